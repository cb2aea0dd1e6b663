r"""What every GATConv-compatible layer of ikgat shares: GATConv's
constructor, parameters (under GATConv's names), input checks, projections,
self-loops and output (concatenate or average heads, residual, bias)."""
import inspect
from contextlib import nullcontext
from typing import Any, Callable, ContextManager, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear
from torch_geometric.nn.inits import glorot, zeros
from torch_geometric.typing import (
    Adj,
    OptPairTensor,
    OptTensor,
    Size,
    SparseTensor,
    torch_sparse,
)
from torch_geometric.utils import (
    add_self_loops,
    is_torch_sparse_tensor,
    remove_self_loops,
    to_edge_index,
)
from torch_geometric.utils.sparse import set_sparse_value

import ikgat.nn.graph_cache as graph_cache
from ikgat.deprecation import moved_names
from ikgat.nn.conv.checks import (
    check_batch,
    check_edge_attr,
    check_edge_index,
    check_node_features,
    check_size,
    node_counts,
)
from ikgat.nn.conv.kernel_attention import AttentionLayer, Batch
from ikgat.ops.dtypes import accumulation_dtype, promote_types

#: The :mod:`~ikgat.nn.graph_cache` kind of the self-looped edges.
SELF_LOOPS = 'self_loops'

#: Whether :func:`torch.autocast` exists for a device type, read once per
#: type outside :func:`torch.compile`: dynamo cannot trace the builtin
#: behind :func:`torch.amp.is_autocast_available`, and a graph break inside
#: the ``with`` block recompiled the resumed frame at every step.
_AUTOCAST_AVAILABLE: Dict[str, bool] = {
    device_type: torch.amp.is_autocast_available(device_type)
    for device_type in ('cpu', 'cuda', 'meta')
}


def without_autocast(device: torch.device) -> ContextManager:
    r"""A context in which :func:`torch.autocast` does not lower the
    precision of matrix products on :obj:`device`: the node terms of the
    attention run in :func:`~ikgat.ops.dtypes.accumulation_dtype` under
    autocast too.  A device without autocast (``meta``) gets an empty
    context."""
    available = _AUTOCAST_AVAILABLE.get(device.type)
    if available is None:  # another device type: read once, eagerly
        available = _AUTOCAST_AVAILABLE[device.type] = (
            torch.amp.is_autocast_available(device.type))
    if not available:
        return nullcontext()
    return torch.autocast(device.type, enabled=False)


class GATConvBase(AttentionLayer, MessagePassing):
    r"""The part of :class:`torch_geometric.nn.conv.GATConv` that does not
    depend on how attention is computed.  Subclasses add their own
    parameters, call :meth:`reset_parameters` at the end of their
    constructor and implement :meth:`forward`; a subclass whose
    constructor only passes GATConv's parameters on declares them with
    :func:`takes_gat_conv_parameters` instead of writing them again.
    (Formerly ``GATStyleConv``, a name still importable from here for one
    release, with a :class:`DeprecationWarning`.)

    Parameters keep GATConv's names (``lin`` or ``lin_src``/``lin_dst``,
    ``att_src``, ``att_dst``, ``lin_edge``, ``att_edge``, ``res``,
    ``bias``), so a trained GATConv's state dict loads into a subclass
    (``strict=False`` for the subclass's own parameters).  The arguments are
    GATConv's and are validated with errors that name the value.  What
    sampled subgraphs change is declared as
    :class:`~ikgat.nn.conv.kernel_attention.AttentionLayer` says; how the
    self-loops are kept on a GPU is in :doc:`the GPU guide
    </guides/gpu>` ("When the fused kernels run").
    """
    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = 'mean',
        bias: bool = True,
        residual: bool = False,
        **kwargs,
    ):
        kwargs.setdefault('aggr', 'add')
        super().__init__(node_dim=0, **kwargs)
        name = type(self).__name__
        check_sizes(name, in_channels, out_channels, heads, edge_dim)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{name}: 'dropout' must lie in [0, 1) "
                             f"(got {dropout!r})")

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.heads = heads
        self.concat = concat
        self.negative_slope = float(negative_slope)
        self.dropout = dropout
        self.add_self_loops = add_self_loops
        self.edge_dim = edge_dim
        self.fill_value = fill_value
        self.residual = residual

        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = Linear(in_channels, heads * out_channels, bias=False,
                              weight_initializer='glorot')
        else:
            self.lin_src = Linear(in_channels[0], heads * out_channels, False,
                                  weight_initializer='glorot')
            self.lin_dst = Linear(in_channels[1], heads * out_channels, False,
                                  weight_initializer='glorot')

        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))

        if edge_dim is not None:
            self.lin_edge = Linear(edge_dim, heads * out_channels, bias=False,
                                   weight_initializer='glorot')
            self.att_edge = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter('att_edge', None)

        total_out_channels = out_channels * (heads if concat else 1)
        if residual:
            self.res = Linear(
                in_channels if isinstance(in_channels, int) else
                in_channels[1], total_out_channels, bias=False,
                weight_initializer='glorot')
        else:
            self.register_parameter('res', None)

        if bias:
            self.bias = Parameter(torch.empty(total_out_channels))
        else:
            self.register_parameter('bias', None)

    def reset_parameters(self):
        super().reset_parameters()
        for lin in (self.lin, self.lin_src, self.lin_dst, self.lin_edge,
                    self.res):
            if lin is not None:
                lin.reset_parameters()
        glorot(self.att_src)
        glorot(self.att_dst)
        glorot(self.att_edge)
        zeros(self.bias)

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        return alpha.unsqueeze(-1) * x_j

    def _check_inputs(self, x: Union[Tensor, OptPairTensor], edge_index: Adj,
                      edge_attr: OptTensor, size: Size,
                      batch: Batch = None) -> None:
        r"""Raise an error naming the offending value for malformed node
        features, edges, edge features, ``size`` or graph batch; while
        :func:`torch.compile` traces, only the device-side assertion that
        the edges' indices are in range."""
        name = type(self).__name__
        if torch.compiler.is_compiling():
            check_edge_index(name, edge_index, *node_counts(x, size))
            return
        src_channels, dst_channels = (
            (self.in_channels, self.in_channels) if isinstance(
                self.in_channels, int) else self.in_channels)
        if isinstance(x, (tuple, list)):
            if len(x) != 2:
                raise ValueError(f"{name}: a tuple 'x' must be "
                                 f"(x_src, x_dst) (got {len(x)} items)")
            check_node_features(name, 'x_src', x[0], src_channels)
            if x[1] is not None:
                check_node_features(name, 'x_dst', x[1], dst_channels)
        else:
            check_node_features(name, 'x', x, src_channels)
        check_size(name, size, x)
        num_src, num_dst = node_counts(x, size)
        check_edge_index(name, edge_index, num_src, num_dst)
        check_edge_attr(name, edge_attr, self.edge_dim, edge_index)
        if isinstance(batch, (tuple, list)):
            check_batch(name, 'batch[0]', batch[0], num_src)
            check_batch(name, 'batch[1]', batch[1], num_dst)
        else:
            check_batch(name, 'batch', batch, num_src)

    def _project(
        self, x: Union[Tensor, OptPairTensor]
    ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor], torch.dtype]:
        r"""Return the source and target projections :math:`(N, H, C)`
        (the target one :obj:`None` for ``x_dst=None``), the residual, and
        the dtype GATConv's projections would have.

        The projections come in
        :func:`~ikgat.ops.dtypes.accumulation_dtype`: where GATConv's would
        be float16 or bfloat16 (a reduced-precision model, or
        autocast), the same products are computed in float32.  The
        magnitude term :math:`\tfrac12\|k_j\|_p^2` scales a rounding error
        :math:`\delta k` of the projection by :math:`\|k_j\|` where GAT's
        :math:`a^\top k_j` scales it by :math:`\|a\|`, so rounded
        projections would make the attention far less accurate than
        GATConv's.  The residual is computed as GATConv computes it."""
        H, C = self.heads, self.out_channels
        if isinstance(x, Tensor):
            x_in_src, x_in_dst = x, x
        else:
            x_in_src, x_in_dst = x
        res: Optional[Tensor] = None
        if x_in_dst is not None and self.res is not None:
            res = self.res(x_in_dst)
        lin_src = self.lin if self.lin is not None else self.lin_src
        lin_dst = self.lin if self.lin is not None else self.lin_dst
        assert lin_src is not None and lin_dst is not None
        # The dtype of GATConv's product, autocast included, from an empty
        # product (no work):
        dtype = lin_src(x_in_src[:0]).dtype
        accumulation = accumulation_dtype(dtype)

        def project(lin: Linear, features: Tensor) -> Tensor:
            if accumulation == dtype:
                return lin(features).view(-1, H, C)
            with without_autocast(features.device):
                return F.linear(features.to(accumulation),
                                lin.weight.to(accumulation)).view(-1, H, C)

        x_src = project(lin_src, x_in_src)
        x_dst: Optional[Tensor] = None
        if isinstance(x, Tensor) and self.lin is not None:
            x_dst = x_src
        elif x_in_dst is not None:
            x_dst = project(lin_dst, x_in_dst)
        return x_src, x_dst, res, dtype

    def _gat_dtypes(self, projection_dtype: torch.dtype
                    ) -> Tuple[torch.dtype, torch.dtype]:
        r"""The dtypes of GATConv's attention weights (those of
        :math:`x_j^\top a_s`) and output (of :math:`\alpha_{ij} x_j`) for
        projections of :obj:`projection_dtype`: float16 for a float16
        model, float32 under bfloat16 autocast (float32 attention
        parameters)."""
        alpha_dtype = promote_types(projection_dtype, self.att_src.dtype)
        return alpha_dtype, promote_types(alpha_dtype, projection_dtype)

    def _add_self_loops(self, edge_index: Adj, edge_attr: OptTensor,
                        x_src: Tensor, x_dst: OptTensor,
                        size: Size) -> Tuple[Adj, OptTensor]:
        r"""GATConv's self-loops: removed, then added for the nodes that are
        both sources and targets, with :obj:`fill_value` edge features
        (kept with the graph off the CPU: the GPU guide, "When the fused
        kernels run")."""
        given = edge_index
        if isinstance(edge_index, Tensor) and not is_torch_sparse_tensor(
                edge_index) and edge_index.dtype != torch.long:
            edge_index = edge_index.long()
        if not self.add_self_loops:
            return edge_index, edge_attr
        if isinstance(edge_index, Tensor):
            num_nodes = self._self_loop_count(x_src, x_dst, size)
            if (edge_index.device.type != 'cpu'
                    and not is_torch_sparse_tensor(edge_index)
                    and not torch.compiler.is_compiling()
                    and not torch.is_inference(given)):
                return self._cached_self_loops(given, edge_index, edge_attr,
                                               num_nodes)
            edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
            edge_index, edge_attr = add_self_loops(
                edge_index, edge_attr, fill_value=self.fill_value,
                num_nodes=num_nodes)
        elif isinstance(edge_index, SparseTensor):
            if self.edge_dim is None:
                edge_index = torch_sparse.set_diag(edge_index)
            else:
                raise NotImplementedError(
                    "The usage of 'edge_attr' and 'add_self_loops' "
                    "simultaneously is currently not yet supported for "
                    "'edge_index' in a 'SparseTensor' form")
        return edge_index, edge_attr

    @staticmethod
    def _self_loop_count(x_src: Tensor, x_dst: OptTensor, size: Size) -> int:
        r"""The nodes that get a self-loop, as GATConv counts them: those
        that are both sources and targets."""
        num_nodes = x_src.size(0)
        if x_dst is not None:
            num_nodes = min(num_nodes, x_dst.size(0))
        return min(size) if size is not None else num_nodes

    def _cached_self_loops(self, given: Tensor, edge_index: Tensor,
                           edge_attr: OptTensor,
                           num_nodes: int) -> Tuple[Tensor, OptTensor]:
        r"""GATConv's self-loops of :obj:`edge_index` (the long copy of
        :obj:`given`), the edge selection cached with :obj:`given`: one host
        synchronisation (:meth:`~torch.Tensor.nonzero`) per new graph."""
        def select() -> Tuple[Tensor, Tensor]:
            # remove_self_loops' edge_index[:, mask], as positions:
            keep = (edge_index[0] != edge_index[1]).nonzero().view(-1)
            looped, _ = add_self_loops(edge_index.index_select(1, keep),
                                       num_nodes=num_nodes)
            return keep, looped

        keep, looped = graph_cache.cached(given, SELF_LOOPS, num_nodes,
                                          select)
        if edge_attr is not None:
            _, edge_attr = add_self_loops(
                looped[:, :keep.numel()], edge_attr.index_select(0, keep),
                fill_value=self.fill_value, num_nodes=num_nodes)
        return looped, edge_attr

    def _edge_gate(self, edge_attr: OptTensor) -> OptTensor:
        r"""Return :math:`\mathbf{a}_e^\top\mathbf{\Theta}_e\mathbf{e}_{ij}`
        of shape :math:`(E, H)`, or :obj:`None` without edge features."""
        if edge_attr is None or self.lin_edge is None:
            return None
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.view(-1, 1)
        edge_attr = self.lin_edge(edge_attr)
        edge_attr = edge_attr.view(-1, self.heads, self.out_channels)
        return (edge_attr * self.att_edge).sum(dim=-1)

    def _add_residual_and_bias(self, out: Tensor, res: OptTensor) -> Tensor:
        r"""Concatenate or average the heads, then add residual and bias."""
        if self.concat:
            out = out.reshape(-1, self.heads * self.out_channels)
        else:
            out = out.mean(dim=1)
        if res is not None:
            out = out + res
        if self.bias is not None:
            out = out + self.bias
        return out

    @staticmethod
    def _output(out: Tensor, edge_index: Adj, alpha: OptTensor,
                return_attention_weights: Optional[bool]
                ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]],
                           Tuple[Tensor, SparseTensor]]:
        r""":obj:`out`, with the attention weights :obj:`alpha` of the
        edges :obj:`edge_index` in GATConv's format where they are asked
        for."""
        if return_attention_weights:
            assert alpha is not None
            if isinstance(edge_index, Tensor):
                if is_torch_sparse_tensor(edge_index):
                    adj = set_sparse_value(edge_index, alpha)
                    return out, (adj, alpha)
                return out, (edge_index, alpha)
            elif isinstance(edge_index, SparseTensor):
                return out, edge_index.set_value(alpha, layout='coo')
        return out

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, heads={self.heads})')


def adjacency_edges(edge_index: Adj) -> Tensor:
    r"""The edges of :obj:`edge_index` as a ``[2, E]`` (source, target)
    tensor: itself if it is one, else the entries of the sparse transposed
    adjacency ``adj_t`` (a :class:`torch_sparse.SparseTensor` or a torch
    sparse tensor, row = target) in the order of its values, so that
    per-edge results can be written back into it."""
    if isinstance(edge_index, SparseTensor):
        row, col, _ = edge_index.coo()
        return torch.stack([col, row], dim=0)
    if is_torch_sparse_tensor(edge_index):
        return to_edge_index(edge_index)[0].flip(0)
    return edge_index


def takes_gat_conv_parameters(init: Callable) -> Callable:
    r"""Decorator of a subclass's constructor written
    ``__init__(self, *args, <its own keyword-only parameters>, **kwargs)``
    that passes ``*args`` and the remaining ``**kwargs`` on to the
    constructor of :class:`GATConvBase` unchanged: its signature (what
    ``inspect.signature`` and the docs show) becomes GATConv's
    parameters followed by its own, so that GATConv's are written once."""
    given = inspect.signature(init)
    own = list(given.parameters.values())
    if (len(own) < 3 or own[1].kind is not inspect.Parameter.VAR_POSITIONAL
            or own[-1].kind is not inspect.Parameter.VAR_KEYWORD):
        raise TypeError(f'{init.__qualname__} must be written (self, *args, '
                        f'<keyword-only parameters>, **kwargs)')
    gat = list(inspect.signature(GATConvBase.__init__).parameters.values())
    init.__signature__ = given.replace(parameters=gat[:-1] + own[2:])
    return init


def check_sizes(name: str, in_channels: Union[int, Tuple[int, int]],
                out_channels: int, heads: int,
                edge_dim: Optional[int]) -> None:
    r"""Raise an error naming the value unless the sizes are GATConv's:
    positive integers (``in_channels`` may be -1, lazy, or a pair)."""
    def valid(value: Any, allow_lazy: bool) -> bool:
        return (isinstance(value, int) and not isinstance(value, bool)
                and (value >= 1 or (allow_lazy and value == -1)))

    sizes = in_channels if isinstance(in_channels,
                                      (tuple, list)) else (in_channels, )
    if len(sizes) not in (1, 2) or not all(valid(s, True) for s in sizes):
        raise ValueError(f"{name}: 'in_channels' must be a positive integer, "
                         f"-1 (lazy), or a pair of them for bipartite graphs "
                         f"(got {in_channels!r})")
    for option, value in (('out_channels', out_channels), ('heads', heads)):
        if not valid(value, False):
            raise ValueError(f"{name}: '{option}' must be a positive integer "
                             f"(got {value!r})")
    if edge_dim is not None and not valid(edge_dim, False):
        raise ValueError(f"{name}: 'edge_dim' must be a positive integer or "
                         f"None (got {edge_dim!r})")


# GATStyleConv, the former name of GATConvBase, for one release:
__getattr__ = moved_names(__name__, {
    'GATStyleConv': ('ikgat.nn.conv.gat_base', 'GATConvBase')})
