r"""Kernel attention for graph transformers: the IKA decomposition of scaled
dot-product attention, a drop-in for PyG's ``TransformerConv``."""
from typing import Any, Callable, ContextManager, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.aggr import SumAggregation
from torch_geometric.nn.conv import TransformerConv
from torch_geometric.typing import Adj, OptTensor, PairTensor, SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor, softmax

import ikgat.nn.graph_cache as graph_cache
import ikgat.ops.node_tables as node_tables
import ikgat.ops.transformer_attention as transformer_attention
from ikgat.kernels import Kernel
from ikgat.kernels.draws import Draws
from ikgat.nn.conv.decomposition import AttentionDecomposition
from ikgat.nn.conv.docstrings import shared_docstring
from ikgat.nn.conv.gat_base import check_sizes, without_autocast
from ikgat.nn.conv.kernel_attention import (
    CSR,
    Batch,
    KernelAttention,
    implicit_full_graph_summary,
)
from ikgat.nn.conv.routes import TransformerRoute
from ikgat.nn.conv.transformer_edge_path import TransformerEdgePath
from ikgat.nn.conv.transformer_inputs import TransformerInputs
from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.dtypes import accumulation_dtype
from ikgat.ops.gat_attention import prepare_csr


@shared_docstring
class IKTransformerConv(KernelAttention, TransformerInputs,
                        TransformerEdgePath, TransformerConv):
    r"""Graph transformer attention whose scaled dot product is a similarity
    kernel times an :math:`L^p` magnitude, from the `"Implicit Kernel
    Attention" <https://arxiv.org/abs/2006.06147>`_ paper (Proposition 1);
    a drop-in replacement for :class:`torch_geometric.nn.conv.TransformerConv`.

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{W}_1 \mathbf{x}_i +
        \sum_{j \in \mathcal{N}(i)} \alpha_{i,j} \left(\mathbf{W}_2
        \mathbf{x}_{j} + \mathbf{W}_6 \mathbf{e}_{ij}\right), \qquad
        \alpha_{i,j} = \operatorname{softmax}_j \log\tilde\alpha_{i,j}.

    With the query :math:`q_i = \mathbf{W}_3\mathbf{x}_i` and the key
    :math:`k_{ij} = \mathbf{W}_4\mathbf{x}_j (+ \mathbf{W}_6
    \mathbf{e}_{ij})`, both scaled by :math:`d^{-1/4}` (:math:`d` = the
    channels per head), TransformerConv's attention factorises exactly as

    .. math::
        \exp\left(\frac{q_i^\top k_{ij}}{\sqrt d}\right) =
        \underbrace{\exp\left(-\tfrac12\|\tilde q_i - \tilde k_{ij}\|^2
        \right)}_{\text{similarity (RBF)}}
        \;\underbrace{\exp\left(\tfrac12\|\tilde q_i\|_2^2 +
        \tfrac12\|\tilde k_{ij}\|_2^2\right)}_{\text{magnitude}},
        \qquad \tilde v = d^{-1/4} v.

    This layer replaces the RBF kernel by any kernel of
    :mod:`ikgat.kernels` that pairs two vectors
    (:func:`~ikgat.kernels.vector_kernels`) and the :math:`L^2` norms by
    :math:`L^p` norms:

    .. math::
        \log\tilde\alpha_{i,j} = \log\mathrm{sim}(\tilde q_i, \tilde k_{ij})
        + \tfrac12\|\tilde k_{ij}\|_p^2
        \;\left(+\, \tfrac12\|\tilde q_i\|_p^2, \text{ which cancels in the
        softmax}\right).

    With ``kernel='rbf'`` and ``p=2`` the layer computes TransformerConv's
    function (the logit is :math:`\tilde q_i^\top\tilde k_{ij}` itself, see
    :meth:`~ikgat.kernels.Kernel.reduced_pair_log_similarity`), and the
    parameters have TransformerConv's names, so
    ``conv.load_state_dict(transformer_conv.state_dict(), strict=False)``
    starts it from a trained TransformerConv.

    For the random-feature kernels the similarity is the square of the
    estimate :math:`f(q, k) = \phi(q)^\top\phi(k) / (m^2 R)` of
    :math:`\exp(-\|q - k\|^2/4)`: per edge and head a :math:`2R`-dot of
    feature maps, computed per node and head group and taken in edge chunks
    (:mod:`ikgat.ops.edge_fourier`): :math:`O(E H R)` work and no
    :math:`E \times H \times 2R` tensor, with or without edge features.

    Which backend computes the attention (fused Triton kernels, edge
    chunks, or PyG's message passing): :doc:`the GPU guide
    </guides/gpu>`, "When the fused kernels run".

    Args:
        in_channels (int or tuple): Size of each input sample, or :obj:`-1`
            to derive it lazily; a tuple for bipartite graphs.
        out_channels (int): Size of each output sample per head (:math:`d`).
        heads (int, optional): Number of attention heads. (default: :obj:`1`)
        concat (bool, optional): Concatenate the heads' outputs, else
            average them. (default: :obj:`True`)
        beta (bool, optional): Gate the skip connection as TransformerConv
            does. (default: :obj:`False`)
        dropout (float, optional): Dropout probability of the normalised
            attention weights. (default: :obj:`0.`)
        edge_dim (int, optional): Edge feature dimensionality.
            (default: :obj:`None`)
        bias (bool, optional): Learn additive biases. (default: :obj:`True`)
        root_weight (bool, optional): Add the transformed root node
            features to the output. (default: :obj:`True`)
        kernel (str or Kernel, optional): A kernel of
            :func:`~ikgat.kernels.vector_kernels` by name, or a
            :class:`~ikgat.kernels.Kernel` built with
            ``pairing='vectors'``. (default: :obj:`'direct'`)
        num_spectral_points (int, optional): :math:`R` for the
            random-feature kernels; :obj:`None` takes the kernel's
            :attr:`~ikgat.kernels.Kernel.default_num_spectral_points`: 16
            for :obj:`"direct"` (within noise of 64 on 20 Planetoid
            seeds), 64 for the others. (default: :obj:`None`)
        p (float, optional): The :math:`p` of the magnitude's norms.
            (default: :obj:`2.0`)
        magnitude (bool, optional): Multiply the similarity by the
            magnitude term. (default: :obj:`True`)
        kernel_kwargs (dict, optional): Options of the named kernel.
        **kwargs (optional): Arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Example:
        >>> import torch
        >>> from torch_geometric.nn import TransformerConv
        >>> from ikgat import IKTransformerConv
        >>> x = torch.randn(4, 8)
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
        >>> reference = TransformerConv(8, 16, heads=2)
        >>> conv = IKTransformerConv(8, 16, heads=2, kernel='rbf')
        >>> _ = conv.load_state_dict(reference.state_dict(), strict=False)
        >>> torch.allclose(conv(x, edge_index), reference(x, edge_index),
        ...                atol=1e-5)
        True
    """
    #: Whether :meth:`forward` may aggregate without PyG's
    #: :meth:`propagate` (the GPU guide, "When the fused kernels run").
    lean_aggregation: bool = True

    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        beta: bool = False,
        dropout: float = 0.,
        edge_dim: Optional[int] = None,
        bias: bool = True,
        root_weight: bool = True,
        *,
        kernel: Union[str, Kernel] = 'direct',
        num_spectral_points: Optional[int] = None,
        p: float = 2.0,
        magnitude: bool = True,
        kernel_kwargs: Optional[Dict[str, Any]] = None,
        **kwargs,
    ):
        name = type(self).__name__
        check_sizes(name, in_channels, out_channels, heads, edge_dim)
        if isinstance(dropout, bool) or not isinstance(
                dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"{name}: 'dropout' must be in [0, 1) (got "
                             f"{dropout!r})")
        super().__init__(in_channels, out_channels, heads, concat, beta,
                         dropout, edge_dim, bias, root_weight, **kwargs)
        if self.flow != 'source_to_target':
            raise ValueError(f"{name}: flow={self.flow!r} is not supported; "
                             f"use the default 'source_to_target' with "
                             f"edge_index.flip(0)")
        self._init_kernel(kernel, heads, out_channels, num_spectral_points,
                          p, magnitude, kernel_kwargs, pairing='vectors')
        self.kernel.reset_parameters()

    def forward(  # noqa: F811
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        return_attention_weights: Optional[bool] = None,
        batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None,
        batch_size: Optional[int] = None,
    ):
        r"""Runs the forward pass of the module.

        Args:
            {forward_graph_arguments}
            return_attention_weights (bool, optional): Also return
                :obj:`(edge_index, attention_weights)` (the sparse adjacency
                holding them for a :class:`SparseTensor`) whenever it is
                set, as in TransformerConv. (default: :obj:`None`)
            batch (torch.Tensor or (torch.Tensor, torch.Tensor), optional):
                The sorted graph index of every node (sources and targets if
                bipartite), so that the implicit kernels draw each graph's
                spectral points from that graph alone; the other kernels
                ignore it (:func:`ikgat.nn.graph_batch` supplies it where a
                container does not). (default: :obj:`None`)
            batch_size (int, optional): The number of graphs in
                :obj:`batch`. (default: :obj:`None`)
        """
        batch, batch_size = self._given_batch(batch, batch_size)
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        query, key, value, x_r, edge_key, edges = self._project(
            x_src, x_dst, edge_index, edge_attr, batch)
        num_graphs = 1
        if self.kernel.stochastic:
            num_graphs = self._num_graphs(batch, batch_size)
        route = self._route(edge_index, edge_key, query,
                            return_attention_weights, num_graphs)
        out, alpha = self._attend(route, query, key, value, edge_key,
                                  edge_index, edges, batch, num_graphs)
        out = self._heads_and_root(out, x_r)
        if isinstance(return_attention_weights, bool):
            if isinstance(edge_index, SparseTensor):
                return out, edge_index.set_value(alpha, layout='coo')
            return out, (edge_index, alpha)
        return out

    def _route(self, edge_index: Adj, edge_key: OptTensor, query: Tensor,
               return_attention_weights: Optional[bool],
               num_graphs: int = 1) -> TransformerRoute:
        r"""How this forward pass attends, decided once from its inputs and
        the layer's switches (the rules of the GPU guide, "When the fused
        kernels run"); off CUDA, :func:`torch.compile` traces the PyTorch
        path."""
        fused_switch = self._fused_switch()
        propagate = (not self._switch_on('lean_aggregation')
                     or bool(self.explain)
                     or bool(self._aggregation_hook_ids)
                     or type(self.aggr_module) is not SumAggregation)
        fused = (fused_switch is not False
                 and query.dtype == torch.float32 and not propagate
                 and edge_key is None
                 and not isinstance(return_attention_weights, bool)
                 and type(edge_index) is Tensor
                 and edge_index.layout == torch.strided
                 and self.kernel.has_pair_feature_map
                 and self._triton_runs_on(query) and num_graphs == 1)
        return TransformerRoute(fused, propagate)

    def _attend(self, route: TransformerRoute, query: Tensor, key: Tensor,
                value: Tensor, edge_key: OptTensor, edge_index: Adj,
                edges: Tuple[Tensor, Tensor, OptTensor], batch: Batch,
                num_graphs: int) -> Tuple[Tensor, OptTensor]:
        r""":math:`\sum_j \alpha_{ij}(v_j + e_{ij})`, :math:`(N_t, H, C)`,
        and the attention weights :math:`(E, H)` (:obj:`None` from the
        fused kernels), along :obj:`route`."""
        if route.fused:
            assert isinstance(edge_index, Tensor)
            return self._fused_attention(query, key, value, edge_index), None
        src, dst, ptr = edges
        alpha = self._attention(query, key, edge_key, src, dst, ptr, batch,
                                num_graphs).to(value.dtype)
        dropped = F.dropout(alpha, p=self.dropout, training=self.training)
        if not route.propagate:
            return self._aggregate(dropped, value, edge_key, src, dst, ptr,
                                   query.size(0)), alpha
        size = (None if isinstance(edge_index, SparseTensor)
                or is_torch_sparse_tensor(edge_index) else
                (value.size(0), query.size(0)))
        # propagate_type: (value: Tensor, alpha: Tensor,
        #                  edge_key: OptTensor)
        return self.propagate(edge_index, value=value, alpha=dropped,
                              edge_key=edge_key, size=size), alpha

    def _heads_and_root(self, out: Tensor, x_r: OptTensor) -> Tensor:
        r"""TransformerConv's finish: concatenate or average the heads,
        then add the root term :math:`\mathbf{W}_1\mathbf{x}_i` (gated by
        :math:`\beta` with :obj:`beta`)."""
        if self.concat:
            out = out.view(-1, self.heads * self.out_channels)
        else:
            out = out.mean(dim=1)
        if x_r is not None:
            if self.lin_beta is not None:
                beta = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1))
                beta = beta.sigmoid()
                out = beta * x_r + (1 - beta) * out
            else:
                out = out + x_r
        return out

    def message(self, value_j: Tensor, alpha: Tensor,
                edge_key: OptTensor) -> Tensor:
        r"""The message :math:`\alpha_{i,j}(\mathbf{W}_2\mathbf{x}_j +
        \mathbf{W}_6\mathbf{e}_{ij})`, :math:`(E, H, C)`, where
        :meth:`propagate` runs (see *PyG's message passing*)."""
        if edge_key is not None:
            value_j = value_j + edge_key
        return alpha.unsqueeze(-1) * value_j

    def _fused_attention(self, query: Tensor, key: Tensor, value: Tensor,
                         edge_index: Tensor) -> Tensor:
        r""":math:`\sum_j \alpha_{ij} v_j`, :math:`(N_t, H, C)`, in one
        fused pass: the kernel's node tables (:math:`\lambda(c\,
        U_i^\top V_j)` is :meth:`~ikgat.kernels.Kernel.edge_log_similarity`)
        and the source terms :math:`s_j` of :meth:`_source_terms`; the
        draws of a stochastic kernel in evaluation are heads of one pass,
        whose outputs are averaged (the output is linear in
        :math:`\alpha`)."""
        scale = self.out_channels**-0.25
        query, key = query * scale, key * scale
        heads, num_src, num_dst = self.heads, key.size(0), query.size(0)
        draws = self._draws()
        kernel_draws = self._prepare_kernel(
            key, query, None, sample=self.training or draws > 1,
            num_draws=draws, num_graphs=1)
        tables = self.kernel.pair_feature_map(query, key, draws=kernel_draws)
        if tables.points is not None and node_tables.uses_tables(query):
            # Per-node feature tables for the gathered-table kernels
            # (ikgat.ops.node_tables: faster on a GPU than the points).
            tables = tables._replace(
                query=node_tables.node_tables(tables.query, tables.points),
                key=node_tables.node_tables(tables.key, tables.points),
                points=None)
        draws = tables.query.size(1) // heads
        # Every draw's heads share the keys' terms and the values:
        terms = self._key_terms(key)
        if terms is None:
            terms = key.new_zeros(num_src, heads * draws)
        elif draws > 1:
            terms = terms.repeat(1, draws)
        if draws > 1:
            value = value.repeat(1, draws, 1)
        csr = graph_cache.cached(edge_index, CSR, (num_src, num_dst),
                                 lambda: prepare_csr(edge_index, num_src,
                                                     num_dst))
        out = transformer_attention.fused_transformer_attention(
            tables.query, tables.key, terms, value, csr, num_dst, tables.link,
            tables.scale, tables.eps,
            dropout=self.dropout if self.training else 0.0,
            use_triton=True, points=tables.points)
        return self._mean_of_stacked_draws(out, draws)

    def _attention(self, query: Tensor, key: Tensor, edge_key: OptTensor,
                   src: Tensor, dst: Tensor, ptr: OptTensor,
                   batch: Union[OptTensor, Tuple[Tensor, Tensor]],
                   num_graphs: int) -> Tensor:
        r"""The attention weights :math:`\alpha` :math:`(E, H)`; a
        stochastic kernel in evaluation averages those of its
        :obj:`num_samples` draws."""
        dtype = accumulation_dtype(query.dtype)
        scale = self.out_channels**-0.25
        query, key = query.to(dtype) * scale, key.to(dtype) * scale
        if edge_key is not None:
            edge_key = edge_key.to(dtype) * scale
        draws = self._draws()
        kernel_draws = self._prepare_kernel(
            key, query, batch, sample=self.training or draws > 1,
            num_draws=draws, num_graphs=num_graphs)
        source_terms = self._source_terms(key, edge_key, src)

        def attention(one: Optional[Draws]) -> Tensor:  # of one draw
            logit = self.kernel.edge_log_similarity(query, key, src, dst,
                                                    edge_key, draws=one)
            if source_terms is not None:
                logit = logit + source_terms
            return softmax(logit, dst, ptr, num_nodes=query.size(0))

        return self._mean_over_draws(kernel_draws, attention)

    def full_graph_summary(self, x: Union[Tensor, PairTensor],
                           chunk_size: int = 65536) -> ContextManager[None]:
        r"""Within the block, a stochastic kernel draws its spectral points
        from the summary :math:`h_s = [\operatorname{mean}_i \tilde q_i
        \,\|\, \operatorname{mean}_j \tilde k_j]` of the graph whose node
        features are :obj:`x` (the full graph), not from the nodes each
        forward pass gets; the sums are taken once, in node chunks of
        :obj:`chunk_size`.  On a subgraph that holds every in-edge of its
        targets, the targets then get their full-graph outputs.  For
        evaluation only (in training mode this raises); a no-op for the
        other kernels
        (:func:`~ikgat.nn.conv.ikgat_conv.implicit_full_graph_summary`)."""
        H, C = self.heads, self.out_channels
        x_src = x if isinstance(x, Tensor) else x[0]
        dtype = accumulation_dtype(x_src.dtype)

        def scaled(lin: torch.nn.Module) -> Callable[[Tensor], Tensor]:
            # The scaled projections of _attention, q~ = d^(-1/4) W_q x:
            return lambda rows: (lin(rows).view(-1, H, C).to(dtype) *
                                 C**-0.25)

        return implicit_full_graph_summary(self, x, scaled(self.lin_query),
                                           scaled(self.lin_key), chunk_size)

    @torch.no_grad()
    def attention_decomposition(
        self,
        x: Union[Tensor, PairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None,
        batch_size: Optional[int] = None,
    ) -> AttentionDecomposition:
        r"""Return the per-edge similarity and magnitude terms of the
        attention logits and the attention weights without dropout, as
        :meth:`ikgat.IKGATConv.attention_decomposition` does.

        Per edge :math:`j \to i` and head: :obj:`log_similarity`
        :math:`\log\mathrm{sim}(\tilde q_i, \tilde k_{ij})` (the kernel's
        :meth:`~ikgat.kernels.Kernel.pair_log_similarity`; a stochastic
        kernel's at the mean of its density, each graph with its own
        points), :obj:`log_magnitude` :math:`\tfrac12\|\tilde q_i\|_p^2 +
        \tfrac12\|\tilde k_{ij}\|_p^2` (zero without the magnitude term;
        the query's part cancels in the softmax) and a zero
        :obj:`edge_term` (edge features enter the key).  The weights are
        the forward pass's in evaluation mode (averaged over
        :obj:`num_samples` draws where the kernel averages them).  Takes the
        inputs of :meth:`forward`; the terms and weights are float32 for a
        float16 or bfloat16 model."""
        batch, batch_size = self._given_batch(batch, batch_size)
        x_src, x_dst = (x, x) if isinstance(x, Tensor) else x
        query, key, _, _, edge_key, (src, dst, ptr) = self._project(
            x_src, x_dst, edge_index, edge_attr, batch)
        with without_autocast(x_src.device):
            num_graphs = self._num_graphs(batch, batch_size)
            alpha = self._attention(query, key, edge_key, src, dst, ptr,
                                    batch, num_graphs)
            dtype = alpha.dtype
            scale = self.out_channels**-0.25
            query, key = query.to(dtype) * scale, key.to(dtype) * scale
            if edge_key is not None:
                edge_key = edge_key.to(dtype) * scale
            keys = key.index_select(0, src)
            if edge_key is not None:
                keys = keys + edge_key
            queries = query.index_select(0, dst)
            kernel = self.kernel
            if kernel.stochastic:
                # Each graph's own points, at the density's mean (the
                # random-feature kernels have gamma = 0: the reduced
                # log-similarity is the log-similarity):
                log_similarity = kernel.edge_log_similarity(
                    query, key, src, dst, edge_key,
                    draws=self._prepare_kernel(key, query, batch,
                                               sample=False,
                                               num_graphs=num_graphs))
            else:
                log_similarity = kernel.pair_log_similarity(queries, keys)
            if self.magnitude:
                log_magnitude = 0.5 * (lp_norm_squared(queries, self.p) +
                                       lp_norm_squared(keys, self.p))
            else:
                log_magnitude = torch.zeros_like(log_similarity)
        return AttentionDecomposition(torch.stack([src, dst]), log_similarity,
                                      log_magnitude,
                                      torch.zeros_like(log_similarity), alpha)

    def __repr__(self) -> str:
        return (f'{type(self).__name__}({self.in_channels}, '
                f'{self.out_channels}, heads={self.heads}, '
                f'kernel={type(self.kernel).__name__})')
