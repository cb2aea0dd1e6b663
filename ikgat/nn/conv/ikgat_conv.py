from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    ContextManager,
    Dict,
    Iterator,
    List,
    Optional,
    Tuple,
    Union,
)

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.aggr import SumAggregation
from torch_geometric.typing import (
    Adj,
    OptPairTensor,
    OptTensor,
    Size,
    SparseTensor,
)
from torch_geometric.utils import (
    is_torch_sparse_tensor,
    softmax,
)
from torch_geometric.utils.sparse import set_sparse_value

import ikgat.nn.graph_cache as graph_cache
import ikgat.ops.gat_attention as gat_attention
from ikgat.kernels import Kernel, resolve_kernel
from ikgat.kernels.base import (
    DeprecatedNumFeatures,
    check_num_spectral_points,
    check_positive,
    renamed_argument,
)
from ikgat.kernels.implicit import finite_mean, finite_sums
from ikgat.nn.conv.checks import (
    check_batch,
    count_graphs,
    node_counts,
)
from ikgat.nn.conv.decomposition import (
    AttentionDecomposition,
    attention_decomposition,
)
from ikgat.nn.conv.gat_base import (
    GATStyleConv,
    accumulation_dtype,
    without_autocast,
)
from ikgat.nn.conv.lean_hooks import LeanPathHooks
from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.edge_softmax import edge_logit, kernel_edge_softmax
from ikgat.ops.runtime import triton_usable

#: The :mod:`~ikgat.nn.graph_cache` kinds of the fused path's sorted edges:
#: of the self-looped edges, and of the edges given with the self-loops
#: added in the sort.
CSR = 'csr'
CSR_WITH_SELF_LOOPS = 'csr_with_self_loops'


class IKGATConv(DeprecatedNumFeatures, LeanPathHooks, GATStyleConv):
    r"""Graph attention whose attention is a similarity kernel times an
    :math:`L^p` magnitude, from the `"Implicit Kernel Attention"
    <https://arxiv.org/abs/2006.06147>`_ paper; a drop-in replacement for
    :class:`torch_geometric.nn.conv.GATConv`.

    .. math::
        \mathbf{x}^{\prime}_i = \sum_{j \in \mathcal{N}(i) \cup \{ i \}}
        \alpha_{i,j}\mathbf{\Theta}_s\mathbf{x}_{j}, \qquad
        \alpha_{i,j} = \frac{\tilde\alpha_{i,j}}
        {\sum_{k \in \mathcal{N}(i) \cup \{ i \}} \tilde\alpha_{i,k}}.

    With :math:`q_i = [\mathbf{\Theta}_t\mathbf{x}_i \,\|\, 0]`,
    :math:`k_j = [0 \,\|\, \mathbf{\Theta}_s\mathbf{x}_j]`,
    :math:`a = [\mathbf{a}_t \,\|\, \mathbf{a}_s]` and :math:`c_{ij} = 1` if
    :math:`e_{ij} = a^\top(q_i + k_j) > 0`, else the negative slope,
    GAT's attention factorises exactly as

    .. math::
        \exp(\mathrm{LeakyReLU}(e_{ij})) =
        \underbrace{k(q_i, c_{ij} a)\, k(c_{ij} a, k_j)}_{\text{similarity}}
        \;\underbrace{\exp\left(\|c_{ij} a\|_2^2 + \tfrac12\|q_i\|_2^2
        + \tfrac12\|k_j\|_2^2\right)}_{\text{magnitude}}

    with the RBF kernel :math:`k(x, y) = \exp(-\|x - y\|^2/2)`.  This layer
    replaces :math:`k` by any non-negative similarity kernel (see
    :mod:`ikgat.kernels`) and the :math:`L^2` norms by :math:`L^p` norms:

    .. math::
        \log \tilde\alpha_{i,j} = \log \mathrm{sim}(q_i, c_{ij} a)
        + \log \mathrm{sim}(c_{ij} a, k_j)
        + \|c_{ij} a\|_p^2 + \tfrac12\|q_i\|_p^2 + \tfrac12\|k_j\|_p^2
        \;\left(+\, c_{ij}\, \mathbf{a}_e^{\top}\mathbf{\Theta}_e
        \mathbf{e}_{i,j}\right).

    For random-feature kernels (IKA, IKAN-direct) the similarity is the
    square of the estimate :math:`f(x, y) = \phi(x)^\top\phi(y) / (m^2 R)`
    of a kernel from :math:`R` spectral points, e.g. the stationary
    :math:`f = \frac1R\sum_r \cos(w_r^\top(x - y)) \to \exp(-\|x-y\|^2/4)`
    for :math:`w_r \sim \mathcal{N}(0, I/2)`.  With ``kernel='rbf'`` and
    ``p=2`` the layer computes exactly GATConv's function, so
    ``conv.load_state_dict(gat_conv.state_dict(), strict=False)`` starts it
    from a trained GATConv.

    Every similarity term pairs a node with the anchor :math:`c a`, and
    :math:`c` takes two values, so all kernel terms are evaluated once per
    node, head and slope (:math:`O(N H R)` random features); each edge only
    picks and adds them (:math:`O(E H)`, like GATConv).  No
    :math:`E \times H \times R` tensor is ever formed.  For an
    :obj:`edge_index` tensor the per-edge logits, their softmax over the
    targets (:func:`~ikgat.ops.edge_softmax.kernel_edge_softmax`) and the
    aggregation (:func:`~ikgat.ops.aggregation.attention_aggregate`) run in
    edge chunks and keep only :math:`\alpha` per edge for backward.

    **Fast paths.**  :meth:`forward` computes the attention weights with
    :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` instead of PyG's
    :meth:`edge_updater` and aggregates with
    :func:`~ikgat.ops.aggregation.attention_aggregate` instead of
    :meth:`propagate` (the same numbers up to the order of floating-point
    additions) when all of these hold:

    1. the switch is on: :attr:`lean_edge_softmax`, resp.
       :attr:`lean_aggregation` (class attributes, :obj:`True`; set them to
       :obj:`False` on a layer or a subclass to force PyG's path);
    2. :obj:`edge_index` is a plain :class:`torch.Tensor` (not a sparse
       adjacency, :class:`SparseTensor` or PyG's :class:`EdgeIndex`);
    3. not in explain mode (:attr:`explain`, edge masks) and flow
       ``"source_to_target"``; while :func:`torch.compile` traces, only the
       fused path below replaces PyG's steps (a registered operator, one
       node of the compiled graph); else PyG's steps run, which Inductor
       fuses itself;
    4. no hook registered through the public ``register_*_hook`` methods
       for the steps the path skips (``edge_update`` hooks for the edge
       softmax; ``propagate``, ``message``, ``aggregate`` and
       ``message_and_aggregate`` hooks for the aggregation); removing the
       hook turns the path back on;
    5. the class does not override those steps: a subclass that defines
       :meth:`edge_update` has :attr:`lean_edge_softmax` :obj:`False`, one
       that defines :meth:`message`, :meth:`aggregate`, :meth:`update` or
       :meth:`message_and_aggregate` has :attr:`lean_aggregation`
       :obj:`False` (declared in :meth:`__init_subclass__` unless the
       subclass sets the switch itself);
    6. for the aggregation only: ``aggr="add"`` (a
       :class:`~torch_geometric.nn.aggr.SumAggregation`) and
       ``decomposed_layers=1``.

    Where both lean paths apply, the softmax and the aggregation run as
    one fused pass per neighbourhood
    (:func:`~ikgat.ops.gat_attention.fused_attention`: online softmax,
    logits recomputed in backward, attention dropout drawn from a
    counter-based generator and regenerated in backward, no
    :math:`E \times H` weights kept unless they are returned) when also

    7. the switch :attr:`fused_attention` is :obj:`True` (a class attribute;
       :obj:`False` keeps the two lean steps; ``'always'`` also runs the
       Triton kernels on CPU tensors, through Triton's interpreter with
       ``TRITON_INTERPRET=1``, for tests);
    8. the tensors are on a CUDA device and Triton can be imported (the
       Triton kernels), or :func:`torch.compile` traces the layer (the
       registered operator's PyTorch implementation off CUDA);
    9. the projections are float32 (float16, bfloat16 and autocast
       models compute them in float32 too; float64 models keep the
       lean steps, since the kernel accumulates in float32).

    The same numbers up to the order of floating-point additions (a test
    compares them through the interpreter for every kernel).  A stochastic
    kernel's :obj:`num_samples` draws in evaluation run as one fused pass
    of :math:`S H` heads (the projections repeated :math:`S` times) rather
    than :math:`S` passes: the mean of the draws' outputs, as elsewhere,
    from other random numbers.  The edges
    sorted by target and by source
    (:func:`~ikgat.ops.gat_attention.prepare_csr`, six int32 arrays
    of :math:`E`) are kept with the (self-looped) :obj:`edge_index` tensor
    (:mod:`ikgat.nn.graph_cache`), so that a graph passed to every layer
    and in every step is sorted once for the whole model.

    **Host synchronisation.**  Outside PyG's debug mode
    (``with torch_geometric.debug():``) a CUDA forward or backward pass
    reads no tensor value on the host: the index range and batch checks
    run on CPU tensors and in debug mode only
    (:func:`~ikgat.nn.conv.checks.reads_values`).  The fused path adds the
    self-loops in its CSR sort
    (:func:`~ikgat.ops.gat_attention.prepare_csr` with ``self_loops``),
    so even a new graph, such as each mini-batch, needs no host read.
    With edge features or returned attention weights it keeps the
    self-looped edges instead, which, like the unfused path, synchronises
    once per new graph and then keeps them with the graph (see
    :class:`~ikgat.nn.conv.gat_base.GATStyleConv`).  Two inputs still need
    one: a :obj:`batch` vector without :obj:`batch_size` (the number of
    graphs is read from it; pass ``batch_size=data.num_graphs``), and
    per-graph spectral points (:math:`G > 1`), which pad the nodes per graph
    with :func:`~torch_geometric.utils.to_dense_batch`.

    **Numbers.**  The projections, kernel terms, norms, logits, softmax and
    aggregation run in at least float32: a float16 or bfloat16 model
    (``model.half()``, ``model.bfloat16()``) or :func:`torch.autocast`
    computes them in float32 and rounds the attention weights and the output
    once, to the dtypes GATConv returns (so autocast does not make this
    layer faster).  The magnitude term would amplify the rounding of a
    half-precision projection :math:`k_j` by :math:`\|k_j\|`.  With
    ``kernel='rbf', p=2`` the node terms are written so that the nodes'
    squared norms cancel algebraically
    (:meth:`~ikgat.kernels.Kernel.reduced_log_similarity`): the logits are
    GAT's at any input scale.  Other kernels clamp :math:`\|\cdot\|_p^2`
    at :math:`e^{40}` (:mod:`ikgat.nn.norms`).  A NaN or infinite input row
    makes NaN only the output rows that attend to it, as in GATConv.

    Args:
        in_channels (int or tuple): Size of each input sample, or :obj:`-1`
            to derive the size from the first input(s) to the forward method.
            A tuple corresponds to the sizes of source and target
            dimensionalities in case of a bipartite graph.
        out_channels (int): Size of each output sample per head :math:`C`.
        heads (int, optional): Number of attention heads :math:`H`.
            (default: :obj:`1`)
        concat (bool, optional): If set to :obj:`False`, the heads are
            averaged instead of concatenated. (default: :obj:`True`)
        negative_slope (float, optional): LeakyReLU angle of the negative
            slope, the second value of :math:`c`. (default: :obj:`0.2`)
        dropout (float, optional): Dropout probability of the normalized
            attention coefficients. (default: :obj:`0`)
        add_self_loops (bool, optional): If set to :obj:`False`, will not add
            self-loops to the input graph. (default: :obj:`True`)
        edge_dim (int, optional): Edge feature dimensionality (in case there
            are any). (default: :obj:`None`)
        fill_value (float or torch.Tensor or str, optional): The way to
            generate edge features of self-loops (in case
            :obj:`edge_dim != None`), as in GATConv. (default: :obj:`"mean"`)
        bias (bool, optional): If set to :obj:`False`, the layer will not
            learn an additive bias. (default: :obj:`True`)
        residual (bool, optional): If set to :obj:`True`, the layer will add
            a learnable skip-connection. (default: :obj:`False`)
        kernel (str or ikgat.kernels.Kernel, optional): The similarity, a
            name of :obj:`ikgat.kernels.KERNELS` (:obj:`"rbf"`,
            :obj:`"rbf_only"`, :obj:`"rff"`, :obj:`"rff_ns"`,
            :obj:`"direct"`, :obj:`"implicit"`, :obj:`"expsin"`,
            :obj:`"linear"`, :obj:`"poly"`, :obj:`"exp"`; a test checks this
            list against the registry), or a kernel instance built for
            :obj:`heads` and :obj:`out_channels`. (default: :obj:`"direct"`)
        num_spectral_points (int, optional): Spectral points per head
            :math:`R` of the random-feature kernels (formerly
            ``num_features``, still accepted for one release with a
            :class:`DeprecationWarning`). (default: :obj:`64`)
        p (float, optional): The :math:`p > 0` of the :math:`L^p` magnitude;
            smaller :math:`p` gives sparser attention. (default: :obj:`2.0`)
        magnitude (bool, optional): If set to :obj:`False`, the magnitude
            term is dropped (``kernel='rbf_only'`` always drops it).
            (default: :obj:`True`)
        kernel_kwargs (dict, optional): Extra arguments of a kernel given by
            name, e.g. :obj:`{"lengthscale": 2.0}`. (default: :obj:`None`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **input:**
          node features :math:`(|\mathcal{V}|, F_{in})` or
          :math:`((|\mathcal{V_s}|, F_{s}), (|\mathcal{V_t}|, F_{t}))`
          if bipartite,
          edge indices :math:`(2, |\mathcal{E}|)` or a sparse adjacency
          :math:`(|\mathcal{V_t}|, |\mathcal{V_s}|)`,
          edge features :math:`(|\mathcal{E}|, D)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, H * F_{out})` or
          :math:`((|\mathcal{V}_t|, H * F_{out})` if bipartite.
          If :obj:`return_attention_weights=True`, then
          :math:`((|\mathcal{V}|, H * F_{out}),
          ((2, |\mathcal{E}|), (|\mathcal{E}|, H)))`
          or :math:`((|\mathcal{V_t}|, H * F_{out}), ((2, |\mathcal{E}|),
          (|\mathcal{E}|, H)))` if bipartite
    """
    #: Whether :meth:`forward` may aggregate through
    #: :func:`~ikgat.ops.aggregation.attention_aggregate` (see *Fast paths*).
    lean_aggregation: bool = True
    #: Whether :meth:`forward` may compute the attention weights through
    #: :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` (see *Fast paths*).
    lean_edge_softmax: bool = True
    #: Whether :meth:`forward` runs the fused Triton attention on CUDA
    #: (:obj:`True`), never (:obj:`False`), or on any device (``'always'``,
    #: for tests through Triton's interpreter); see *Fast paths*.
    fused_attention: Union[bool, str] = True

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
        *,
        kernel: Union[str, Kernel] = 'direct',
        num_spectral_points: int = 64,
        p: float = 2.0,
        magnitude: bool = True,
        kernel_kwargs: Optional[Dict[str, Any]] = None,
        num_features: Optional[int] = None,
        **kwargs,
    ):
        name = type(self).__name__
        num_spectral_points = renamed_argument(
            name, 'num_features', 'num_spectral_points', num_features,
            num_spectral_points, 64)
        super().__init__(in_channels, out_channels, heads, concat,
                         negative_slope, dropout, add_self_loops, edge_dim,
                         fill_value, bias, residual, **kwargs)
        self.num_spectral_points = check_num_spectral_points(
            name, num_spectral_points)
        self.p = check_positive(name, 'p', p)
        self.kernel = resolve_kernel(kernel, heads, out_channels,
                                     num_spectral_points, kernel_kwargs)
        self.magnitude = bool(magnitude) and self.kernel.uses_magnitude

        self.reset_parameters()

    def reset_parameters(self):
        super().reset_parameters()
        self.kernel.reset_parameters()

    def redraw_spectral_points(self,
                               generator: Optional[torch.Generator] = None):
        r"""Redraw the spectral points of a random-feature kernel in place
        (kernels that declare :attr:`~ikgat.kernels.Kernel.can_redraw`:
        ``'rff'``, ``'rff_ns'``, ``'direct'``; re-initialises learned
        ones)."""
        if not self.kernel.can_redraw:
            raise TypeError(f"The kernel {type(self.kernel).__name__} has no "
                            f"spectral points to redraw; use kernel='rff' or "
                            f"'rff_ns'")
        self.kernel.redraw_spectral_points(generator=generator)

    def forward(
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        size: Size = None,
        return_attention_weights: Optional[bool] = None,
        batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None,
        batch_size: Optional[int] = None,
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]], Tuple[
            Tensor, SparseTensor]]:
        r"""Runs the forward pass of the module.

        Args:
            x (torch.Tensor or (torch.Tensor, torch.Tensor)): The input node
                features.
            edge_index (torch.Tensor or SparseTensor): The edge indices, or a
                sparse transposed adjacency ``adj_t``.
            edge_attr (torch.Tensor, optional): The edge features.
                (default: :obj:`None`)
            size ((int, int), optional): The shape of the adjacency matrix.
                (default: :obj:`None`)
            return_attention_weights (bool, optional): Will additionally
                return the tuple :obj:`(edge_index, attention_weights)`
                whenever it is set to a value, as in GATConv.
                (default: :obj:`None`)
            batch (torch.Tensor or (torch.Tensor, torch.Tensor), optional):
                The sorted graph index of every node (of the source and the
                target nodes if bipartite) for a mini-batch of graphs: the
                implicit kernels summarise each graph and draw its spectral
                points apart, so that no graph's output depends on the
                others; the other kernels ignore it.  Without it, the
                batch is one graph to them (:func:`ikgat.nn.graph_batch`
                supplies it where a container does not pass it).
                (default: :obj:`None`)
            batch_size (int, optional): The number of graphs in
                :obj:`batch` (PyG's ``Batch.num_graphs``), as PyG's
                normalisation layers take it; read from :obj:`batch` if not
                given, a host synchronisation on CUDA. (default: :obj:`None`)
        """
        batch, batch_size = self._given_batch(batch, batch_size)
        self._check_inputs(x, edge_index, edge_attr, size, batch)
        x_src, x_dst, res, projection_dtype = self._project(x)
        key = (x_src.size(0), _num_targets(x_src, x_dst, size))
        fused = self._fused_kernels(edge_index, x_src)
        if (fused is not None and self.add_self_loops and edge_attr is None
                and not return_attention_weights):
            # The self-loops added in the CSR sort: no edge selection, so
            # no host synchronisation even on a new graph.
            assert isinstance(edge_index, Tensor)
            loops = self._self_loop_count(x_src, x_dst, size)
            csr = graph_cache.cached(
                edge_index, CSR_WITH_SELF_LOOPS, key + (loops, ),
                lambda: gat_attention.prepare_csr(
                    edge_index, *key, self_loops=loops))
            return self._fused_forward(x_src, x_dst, res, projection_dtype,
                                       csr, None, None, batch, batch_size,
                                       use_triton=fused == 'triton')
        edge_index, edge_attr = self._add_self_loops(edge_index, edge_attr,
                                                     x_src, x_dst, size)
        if fused is not None:
            assert isinstance(edge_index, Tensor)
            csr = graph_cache.cached(
                edge_index, CSR, key,
                lambda: gat_attention.prepare_csr(edge_index, *key))
            return self._fused_forward(x_src, x_dst, res, projection_dtype,
                                       csr, edge_index, edge_attr, batch,
                                       batch_size, fused == 'triton',
                                       return_attention_weights)
        # A stochastic kernel in evaluation averages the attention weights of
        # num_samples draws (the output is linear in them); one draw else.
        passes = 1
        if self.kernel.stochastic and not self.training:
            passes = self.kernel.num_samples
        alpha = torch.empty(0)
        # Kernel, norms, logits, softmax and aggregation run in at least
        # float32, autocast or not (accumulation_dtype); the attention
        # weights and the output then take the dtypes GATConv gives them.
        alpha_dtype, out_dtype = self._gat_dtypes(projection_dtype)
        with without_autocast(x_src.device):
            # The draws are taken at once, graph by graph (a graph's draws do
            # not depend on the other graphs of a batch), then used one at a
            # time:
            self._prepare_kernel(x_src, x_dst, batch,
                                 sample=self.training or passes > 1,
                                 batch_size=batch_size, num_draws=passes)
            for draw in range(passes):
                if passes > 1:
                    self.kernel.select_draw(draw)
                weights = self._attention(edge_index, x_src, x_dst,
                                          edge_attr, size)
                alpha = weights if draw == 0 else alpha + weights
            if passes > 1:
                alpha = alpha / passes

            if (self._lean_aggregation_applies(edge_index)
                    and not torch.compiler.is_compiling()):
                assert isinstance(edge_index, Tensor)
                out = attention_aggregate(alpha, x_src, edge_index,
                                          _num_targets(x_src, x_dst, size))
            else:
                # propagate_type: (x: OptPairTensor, alpha: Tensor)
                out = self.propagate(edge_index, x=(x_src, x_dst),
                                     alpha=alpha, size=size)
        out = self._add_residual_and_bias(out.to(out_dtype), res)
        alpha = alpha.to(alpha_dtype)

        if return_attention_weights:
            if isinstance(edge_index, Tensor):
                if is_torch_sparse_tensor(edge_index):
                    adj = set_sparse_value(edge_index, alpha)
                    return out, (adj, alpha)
                return out, (edge_index, alpha)
            elif isinstance(edge_index, SparseTensor):
                return out, edge_index.set_value(alpha, layout='coo')
        return out

    def _attention(self, edge_index: Adj, x_src: Tensor, x_dst: OptTensor,
                   edge_attr: OptTensor, size: Size) -> Tensor:
        score_src, score_dst = self._node_scores(x_src, x_dst)
        if (self._lean_edge_softmax_applies(edge_index)
                and not torch.compiler.is_compiling()):
            assert isinstance(edge_index, Tensor)
            # edge_update's logit and softmax, chunked over the edges: no
            # [E, H, 3] gathers, only alpha saved for backward.
            alpha = kernel_edge_softmax(
                score_src, score_dst, edge_index,
                _num_targets(x_src, x_dst, size), self._edge_gate(edge_attr),
                self.negative_slope)
            return F.dropout(alpha, p=self.dropout, training=self.training)
        score_dst_shared: OptTensor = None
        if x_dst is None:
            score_dst_shared, score_dst = score_dst, None

        # edge_updater_type: (score: OptPairTensor, score_dst_shared: OptTensor, edge_attr: OptTensor)  # noqa: E501
        return self.edge_updater(edge_index, score=(score_src, score_dst),
                                 score_dst_shared=score_dst_shared,
                                 edge_attr=edge_attr, size=size)

    def _fused_forward(
        self, x_src: Tensor, x_dst: OptTensor, res: OptTensor,
        projection_dtype: torch.dtype, csr: gat_attention.AttentionCSR,
        edge_index: OptTensor, edge_attr: OptTensor,
        batch: Union[OptTensor, Tuple[Tensor, Tensor]],
        batch_size: Optional[int], use_triton: bool,
        return_attention_weights: Optional[bool] = None
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]]]:
        r"""The rest of :meth:`forward` through
        :func:`~ikgat.ops.gat_attention.fused_attention` over the edges
        sorted in :obj:`csr`: the logits, softmax and aggregation of
        :meth:`_attention` and
        :func:`~ikgat.ops.aggregation.attention_aggregate` in one kernel.
        The attention weights are returned with :obj:`edge_index`, the
        self-looped edges that :obj:`csr` sorts."""
        num_dst = csr.num_dst
        # A stochastic kernel in evaluation averages num_samples draws, here
        # in one pass: the draws are stacked along the heads (S H heads, the
        # projections repeated), and since the output is linear in the
        # weights, the mean of the draws' outputs is the output of their
        # mean weights.
        draws = 1
        if self.kernel.stochastic and not self.training:
            draws = self.kernel.num_samples
        alpha_dtype, out_dtype = self._gat_dtypes(projection_dtype)
        with without_autocast(x_src.device):
            edge_gate = self._edge_gate(edge_attr)
            self._prepare_kernel(x_src, x_dst, batch,
                                 sample=self.training or draws > 1,
                                 batch_size=batch_size, num_draws=draws)
            score_src, score_dst = self._node_scores(x_src, x_dst, draws)
            values = x_src
            if edge_gate is not None:
                edge_gate = edge_gate.to(score_src.dtype)
            if draws > 1:
                values = x_src.repeat(1, draws, 1)
                if edge_gate is not None:
                    edge_gate = edge_gate.repeat(1, draws)
            result = gat_attention.fused_attention(
                score_src, score_dst, values, csr, num_dst, edge_gate,
                self.negative_slope,
                return_attention_weights=bool(return_attention_weights),
                dropout=self.dropout if self.training else 0.0,
                use_triton=use_triton)
            out, alpha = result if return_attention_weights else (result,
                                                                  None)
            if draws > 1:
                out = out.view(num_dst, draws, -1, out.size(-1)).mean(1)
                if alpha is not None:
                    alpha = alpha.view(alpha.size(0), draws, -1).mean(1)
        out = self._add_residual_and_bias(out.to(out_dtype), res)
        if alpha is not None:
            return out, (edge_index, alpha.to(alpha_dtype))
        return out

    def _prepare_kernel(self, x_src: Tensor, x_dst: OptTensor,
                        batch: Union[OptTensor, Tuple[Tensor, Tensor]],
                        sample: bool,
                        batch_size: Optional[int] = None,
                        num_draws: int = 1) -> None:
        if not self.kernel.stochastic:
            return
        if isinstance(batch, (tuple, list)):
            batch_src, batch_dst = batch
        else:
            batch_src = batch_dst = batch
        num_graphs = count_graphs(type(self).__name__, batch_src, batch_dst,
                                 batch_size)
        if x_dst is None and num_graphs > 1:
            raise ValueError(
                f"{type(self).__name__}: per-graph spectral points need the "
                f"target features; pass x=(x_src, x_dst) with x_dst given, "
                f"or no batch")
        if num_draws == 1:
            self.kernel.prepare(x_src, x_dst, batch_src, batch_dst,
                                num_graphs, sample)
        else:
            self.kernel.prepare(x_src, x_dst, batch_src, batch_dst,
                                num_graphs, sample, num_draws=num_draws)

    @property
    def sampling_caveat(self) -> Optional[str]:
        return implicit_sampling_caveat(self)

    def full_graph_summary(self, x: Union[Tensor, OptPairTensor],
                           chunk_size: int = 65536) -> ContextManager[None]:
        r"""Within the block, a stochastic kernel draws its spectral points
        from the summary :math:`h_s = [\operatorname{mean}_i q_i \,\|\,
        \operatorname{mean}_j k_j]` of the graph whose node features are
        :obj:`x` (the full graph), not from the nodes each forward pass
        gets; the sums are taken once, in node chunks of :obj:`chunk_size`.
        On a subgraph that holds every in-edge of its targets (fan-out
        :obj:`-1`), the targets then get their full-graph outputs.

        For evaluation only (the summary carries no gradient): in training
        mode this raises.  A no-op for the other kernels
        (:func:`implicit_full_graph_summary`).
        """
        x_src = x if isinstance(x, Tensor) else x[0]

        def keys(rows: Tensor) -> Tensor:
            return self._project((rows, None))[0]

        def queries(rows: Tensor) -> Tensor:
            return self._project((x_src[:0], rows))[1]

        # One projection for sources and targets: the keys' mean is the
        # queries'.
        shared = isinstance(x, Tensor) and self.lin is not None
        return implicit_full_graph_summary(self, x, keys if shared else
                                           queries, keys, chunk_size)

    def spectral_points(self) -> List[Tensor]:
        r"""The spectral point sets of a random-feature kernel, each of shape
        :math:`(G, H, R, 2C)`: those of the last forward pass per graph for
        the variational kernels, the fixed or learned ones (:math:`G = 1`)
        otherwise."""
        if not self.kernel.has_spectral_points:
            raise TypeError(f"The kernel {type(self.kernel).__name__} has no "
                            f"spectral points")
        return self.kernel.spectral_points_per_graph()

    def kl_divergence(self) -> Tensor:
        r"""The KL divergence of the variational kernel's last forward pass
        to its prior (zero for the deterministic kernels)."""
        if self.kernel.has_kl:
            return self.kernel.kl_divergence()
        return self.att_src.new_zeros(())

    def edge_update(self, score_j: Tensor, score_i: OptTensor,
                    score_dst_shared: OptTensor, edge_attr: OptTensor,
                    index: Tensor, ptr: OptTensor,
                    dim_size: Optional[int]) -> Tensor:
        if score_i is None:
            assert score_dst_shared is not None
            score_i = score_dst_shared
        if index.numel() == 0:
            return score_j[..., 2] + score_i[..., 2]
        # c_ij = 1 where e_ij > 0 (t = 0), negative_slope elsewhere (t = 1):
        logit, _ = edge_logit(score_j, score_i, self._edge_gate(edge_attr),
                              self.negative_slope)
        alpha = softmax(logit, index, ptr, dim_size)
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        return alpha

    def _lean_paths_apply(self, edge_index: Adj) -> bool:
        r"""The rules both lean paths share (see the class docstring)."""
        return (type(edge_index) is Tensor
                and edge_index.layout == torch.strided and not self.explain
                and self.flow == 'source_to_target')

    def _lean_aggregation_applies(self, edge_index: Adj) -> bool:
        r"""Whether PyG's :meth:`propagate` may be skipped (rules in the
        class docstring)."""
        return (self._switch_on('lean_aggregation')
                and not self._aggregation_hook_ids
                and self._lean_paths_apply(edge_index)
                and self.decomposed_layers == 1
                and type(self.aggr_module) is SumAggregation)

    def _lean_edge_softmax_applies(self, edge_index: Adj) -> bool:
        r"""Whether PyG's :meth:`edge_updater` may be skipped (rules in the
        class docstring)."""
        return (self._switch_on('lean_edge_softmax')
                and not self._edge_update_hook_ids
                and self._lean_paths_apply(edge_index))

    def _fused_kernels(self, edge_index: Adj,
                       x_src: Tensor) -> Optional[str]:
        r"""How :func:`~ikgat.ops.gat_attention.fused_attention` replaces
        both lean steps: ``'triton'`` (its Triton kernels), ``'torch'``
        (its registered operator's PyTorch implementation, while
        :func:`torch.compile` traces off CUDA), or :obj:`None` (not fused);
        rules in the class docstring."""
        if self.fused_attention not in (True, False, 'always'):
            raise ValueError(f"{type(self).__name__}: 'fused_attention' must "
                             f"be True, False or 'always' (got "
                             f"{self.fused_attention!r})")
        if (self.fused_attention is False or x_src.dtype != torch.float32
                or not self._lean_edge_softmax_applies(edge_index)
                or not self._lean_aggregation_applies(edge_index)):
            return None
        if ((self.fused_attention == 'always'
             or x_src.device.type == 'cuda')
                and triton_usable()):
            return 'triton'
        return 'torch' if torch.compiler.is_compiling() else None

    def attention_decomposition(
        self,
        x: Union[Tensor, OptPairTensor],
        edge_index: Adj,
        edge_attr: OptTensor = None,
        size: Size = None,
        batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None,
        batch_size: Optional[int] = None,
    ) -> AttentionDecomposition:
        r"""Return the per-edge similarity, magnitude and edge terms of the
        attention logits, and the attention weights without dropout (see
        :func:`ikgat.nn.conv.decomposition.attention_decomposition`).

        Takes the same inputs as :meth:`forward`; the edges are those the
        forward pass attends over (self-loops included)."""
        return attention_decomposition(self, x, edge_index, edge_attr, size,
                                       batch, batch_size)

    def _check_inputs(self, x: Union[Tensor, OptPairTensor], edge_index: Adj,
                      edge_attr: OptTensor, size: Size,
                      batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None):
        super()._check_inputs(x, edge_index, edge_attr, size)
        if torch.compiler.is_compiling():
            return
        name = type(self).__name__
        num_src, num_dst = node_counts(x, size)
        if isinstance(batch, (tuple, list)):
            check_batch(name, 'batch[0]', batch[0], num_src)
            check_batch(name, 'batch[1]', batch[1], num_dst)
        else:
            check_batch(name, 'batch', batch, num_src)

    def _accumulation_inputs(self, x_src: Tensor, x_dst: OptTensor
                             ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Source and target projections (a zero target row for
        :obj:`x_dst=None`), the anchors :math:`(H, 2C)` and the slopes
        :math:`c_t`, all in :func:`~ikgat.ops.dtypes.accumulation_dtype`
        (float32 for a float16 or bfloat16 model)."""
        H, C = self.heads, self.out_channels
        dtype = accumulation_dtype(x_src.dtype)
        anchor = torch.cat([self.att_dst, self.att_src],
                           dim=-1).view(H, 2 * C).to(dtype)
        # [1, negative_slope], made on the device: a host value written into
        # a device tensor (torch.tensor of a list, or slopes[0] = 1.0) is a
        # host-to-device copy, a synchronisation on CUDA.  One operation:
        # linspace computes its last point from the end (exactly the slope).
        slopes = torch.linspace(1.0, self.negative_slope, 2,
                                device=anchor.device, dtype=anchor.dtype)
        x_src = x_src.to(dtype)
        # A missing target projection is q_i = 0 for every target:
        q = x_src.new_zeros(1, H, C) if x_dst is None else x_dst.to(dtype)
        return x_src, q, anchor, slopes

    def _anchor_norm(self, anchor: Tensor, slopes: Tensor) -> Tensor:
        r""":math:`\|c_t a_h\|_p^2` of shape :math:`(H, T)`."""
        scaled_anchor = slopes.view(-1, 1, 1) * anchor  # [T, H, 2C]
        return lp_norm_squared(scaled_anchor, self.p).t()

    def _node_scores(self, x_src: Tensor, x_dst: OptTensor,
                     draws: int = 1) -> Tuple[Tensor, Tensor]:
        r"""Everything of the logit that depends on one endpoint, packed per
        node as [logit part for :math:`c = 1`, for :math:`c =`
        :obj:`negative_slope`, gate]: :math:`(N_s, H, 3)` and
        :math:`(N_t, H, 3)` (or :math:`(1, H, 3)` without target features),
        in :func:`~ikgat.ops.dtypes.accumulation_dtype`; with :obj:`draws`
        :math:`S > 1`, for the kernel's :math:`S` draws stacked along the
        heads (:math:`S H` heads, the projections and anchors repeated)."""
        x_src, q, anchor, slopes = self._accumulation_inputs(x_src, x_dst)
        if draws > 1:
            x_src, q = x_src.repeat(1, draws, 1), q.repeat(1, draws, 1)
            anchor = anchor.repeat(draws, 1)
        C = self.out_channels
        kernel = self.kernel
        # Targets: the kernel's gamma |q_i|^2 and the magnitude's ½‖q_i‖_p²
        # are the same for both slopes, hence constant over the softmax
        # group of i: they cancel and are left out.
        gamma = kernel.node_norm_coefficient
        # log sim(c a, k_j) + ½‖k_j‖² = r_j + (gamma + ½)‖k_j‖²: for the RBF
        # kernel of length-scale 1, gamma = -½ and the squared norms cancel
        # exactly, leaving c a_s^T x_j + ½‖c a‖² here and c a_d^T x_i -
        # ½‖c a‖² on the target side: the logit is GAT's c e_ij at any input
        # scale.
        reduced_source = self.magnitude and self.p == 2.0 and gamma != 0.0
        logit_dst, logit_src = kernel.node_log_similarities(
            q, x_src, anchor, slopes, reduced_source)
        if reduced_source:
            if gamma != -0.5:
                logit_src = logit_src + (
                    (gamma + 0.5) * (x_src * x_src).sum(-1)).unsqueeze(-1)
        elif self.magnitude:
            logit_src = logit_src + 0.5 * lp_norm_squared(
                x_src, self.p).unsqueeze(-1)
        if self.magnitude:
            logit_src = logit_src + self._anchor_norm(anchor, slopes)
        # GAT's logits a_s^T x_j and a_d^T q_i (the gate), in one product
        # where sources and targets share one projection:
        if q is x_src:
            gat_logits = (x_src.unsqueeze(-2) * anchor.view(-1, 2, C)).sum(-1)
            gat_logit_dst, gat_logit_src = gat_logits.split(1, dim=-1)
        else:
            gat_logit_src = (x_src * anchor[:, C:]).sum(-1, keepdim=True)
            gat_logit_dst = (q * anchor[:, :C]).sum(-1, keepdim=True)
        return (torch.cat([logit_src, gat_logit_src], dim=-1),
                torch.cat([logit_dst, gat_logit_dst], dim=-1))

def _num_targets(x_src: Tensor, x_dst: OptTensor, size: Size) -> int:
    r"""The number of target nodes, as :meth:`propagate` infers it: from
    the target features, else from :obj:`size`, else square."""
    if x_dst is not None:
        return x_dst.size(0)
    if size is not None:
        return size[1] if size[1] is not None else size[0]
    return x_src.size(0)


@contextmanager
def implicit_full_graph_summary(layer: torch.nn.Module,
                                x: Union[Tensor, OptPairTensor],
                                queries: Callable[[Tensor], Tensor],
                                keys: Callable[[Tensor], Tensor],
                                chunk_size: int = 65536) -> Iterator[None]:
    r"""The ``full_graph_summary`` of a layer whose :obj:`kernel` may be
    stochastic (:class:`IKGATConv`, :class:`~ikgat.IKTransformerConv` and
    their MIKAN forms).  Within the block the kernel draws its spectral
    points from the summary of the graph whose node features are :obj:`x`
    (the full graph) instead of the nodes each forward pass gets: its
    :attr:`~ikgat.kernels.implicit.ImplicitSpectralKernel.fixed_summary` is

    .. math::
        h_s = \Big[\frac{1}{N_t} \sum_{i} q_i \,\Big\|\,
        \frac{1}{N_s} \sum_{j} k_j\Big],

    with :math:`q_i` = :obj:`queries` of the target features and
    :math:`k_j` = :obj:`keys` of the source features (each :math:`(n, H,
    C)` for :math:`n` nodes), the means over the nodes whose projection is
    finite (:func:`~ikgat.kernels.implicit.finite_sums`).  The sums are
    taken once, without gradient, in node chunks of :obj:`chunk_size` (sums
    of chunks add up to the sum of the graph).  Without target features
    (``x=(x_src, None)``) the queries' mean is zero; when :obj:`x` is one
    tensor and :obj:`queries` is :obj:`keys` (one projection for sources
    and targets), the keys' mean is the queries'.

    For evaluation only (the summary carries no gradient): in training
    mode this raises a :class:`RuntimeError`.  A no-op for a kernel that is
    not stochastic.
    """
    if not layer.kernel.stochastic:
        yield
        return
    if layer.training:
        raise RuntimeError(
            f'{type(layer).__name__}.full_graph_summary: the summary is '
            f'for evaluation; call model.eval() first')
    x_src, x_dst = (x, x) if isinstance(x, Tensor) else x

    def mean(project: Callable[[Tensor], Tensor], rows: Tensor) -> Tensor:
        sums = [finite_sums(project(chunk))
                for chunk in rows.split(chunk_size)]
        return finite_mean(*map(sum, zip(*sums)))

    with torch.no_grad():
        mean_k = mean(keys, x_src)
        if x_dst is None:
            mean_q = torch.zeros_like(mean_k)
        elif x_dst is x_src and queries is keys:
            mean_q = mean_k
        else:
            mean_q = mean(queries, x_dst)
    layer.kernel.fixed_summary = torch.cat([mean_q, mean_k], dim=-1)
    try:
        yield
    finally:
        layer.kernel.fixed_summary = None


def implicit_sampling_caveat(layer: torch.nn.Module) -> Optional[str]:
    r"""The ``sampling_caveat`` of a layer whose :obj:`kernel` may be
    stochastic: the implicit density is a statistic of the nodes a forward
    pass gets (:obj:`None` for the other kernels)."""
    if not layer.kernel.stochastic:
        return None
    return (f'{type(layer).__name__}: the implicit spectral density is '
            f'inferred from the mean over the nodes of each sampled '
            f'subgraph, so a seed node\'s output depends on which '
            f'other nodes were sampled (in training this acts like a '
            f'batch statistic); evaluate layer-wise over the full graph '
            f'(TwoLayerGAT.inference), or within '
            f'full_graph_summary(x), to get the full graph\'s outputs')
