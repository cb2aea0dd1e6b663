from typing import (
    Any,
    ContextManager,
    Dict,
    NamedTuple,
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
from torch_geometric.utils import softmax

import ikgat.nn.graph_cache as graph_cache
import ikgat.ops.gat_attention as gat_attention
from ikgat.kernels import Kernel
from ikgat.kernels.base import DeprecatedNumFeatures, renamed_argument
from ikgat.nn.conv.decomposition import (
    AttentionDecomposition,
    attention_decomposition,
)
from ikgat.nn.conv.gat_base import (
    GATStyleConv,
    accumulation_dtype,
    without_autocast,
)
from ikgat.nn.conv.kernel_attention import (  # noqa: F401 (public here)
    CSR,
    CSR_WITH_SELF_LOOPS,
    Batch,
    KernelAttention,
    implicit_full_graph_summary,
    implicit_sampling_caveat,
)
from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.edge_softmax import edge_logit, kernel_edge_softmax


class GATRoute(NamedTuple):
    r"""How one forward pass of :class:`IKGATConv` attends, decided once by
    :meth:`IKGATConv._route` (the GPU guide, "When the fused kernels
    run")."""
    #: :func:`~ikgat.ops.gat_attention.fused_attention` runs its Triton
    #: kernels (``'triton'``), its PyTorch implementation (``'torch'``,
    #: while :func:`torch.compile` traces off CUDA), or not (:obj:`None`).
    fused: Optional[str]
    #: The fused operator adds the self-loops in its sort of the edges.
    self_loops_in_sort: bool
    #: :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` replaces PyG's
    #: :meth:`edge_updater`.
    lean_softmax: bool
    #: :func:`~ikgat.ops.aggregation.attention_aggregate` replaces PyG's
    #: :meth:`propagate`.
    lean_aggregation: bool


class IKGATConv(DeprecatedNumFeatures, KernelAttention, GATStyleConv):
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

    Which backend computes the attention (fused Triton kernels, edge
    chunks, or PyG's message passing), what reads values on the host, and
    in which precision: :doc:`the GPU guide </guides/gpu>`, "When the
    fused kernels run".

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
    #: :func:`~ikgat.ops.aggregation.attention_aggregate` instead of PyG's
    #: :meth:`propagate` (the GPU guide, "When the fused kernels run").
    lean_aggregation: bool = True
    #: Whether :meth:`forward` may compute the attention weights through
    #: :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` instead of PyG's
    #: :meth:`edge_updater` (the same guide).
    lean_edge_softmax: bool = True

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
        self._init_kernel(kernel, heads, out_channels, num_spectral_points,
                          p, magnitude, kernel_kwargs)
        self.reset_parameters()

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
        route = self._route(edge_index, x_src, edge_attr,
                            return_attention_weights)
        if not route.self_loops_in_sort:
            edge_index, edge_attr = self._add_self_loops(
                edge_index, edge_attr, x_src, x_dst, size)
        # Kernel, norms, logits, softmax and aggregation run in at least
        # float32, autocast or not (accumulation_dtype); the attention
        # weights and the output then take the dtypes GATConv gives them.
        alpha_dtype, out_dtype = self._gat_dtypes(projection_dtype)
        with without_autocast(x_src.device):
            out, alpha = self._attend(route, x_src, x_dst, edge_index,
                                      edge_attr, size, batch, batch_size,
                                      bool(return_attention_weights))
        out = self._add_residual_and_bias(out.to(out_dtype), res)
        alpha = None if alpha is None else alpha.to(alpha_dtype)
        return self._output(out, edge_index, alpha, return_attention_weights)

    def _route(self, edge_index: Adj, x_src: Tensor,
               edge_attr: OptTensor = None,
               return_attention_weights: Optional[bool] = None) -> GATRoute:
        r"""How this forward pass attends, decided once from its inputs and
        the layer's switches (the rules of the GPU guide, "When the fused
        kernels run")."""
        fused_switch = self._fused_switch()
        compiling = torch.compiler.is_compiling()
        # PyG's steps may be skipped for a plain edge tensor, outside explain
        # mode, in PyG's direction, while no hook and no subclass needs them:
        plain = (type(edge_index) is Tensor
                 and edge_index.layout == torch.strided and not self.explain
                 and self.flow == 'source_to_target')
        softmax = (plain and self._switch_on('lean_edge_softmax')
                   and not self._edge_update_hook_ids)
        aggregation = (plain and self._switch_on('lean_aggregation')
                       and not self._aggregation_hook_ids
                       and self.decomposed_layers == 1
                       and type(self.aggr_module) is SumAggregation)
        fused: Optional[str] = None
        if (fused_switch is not False and x_src.dtype == torch.float32
                and softmax and aggregation):
            if self._triton_runs_on(x_src):
                fused = 'triton'
            elif compiling:  # the registered operator, one graph node
                fused = 'torch'
        # While torch.compile traces, PyG's steps run unless fused (Inductor
        # fuses them itself):
        return GATRoute(
            fused, fused is not None and self.add_self_loops
            and edge_attr is None and not return_attention_weights,
            softmax and not compiling, aggregation and not compiling)

    def _attend(self, route: GATRoute, x_src: Tensor, x_dst: OptTensor,
                edge_index: Adj, edge_attr: OptTensor, size: Size,
                batch: Batch, batch_size: Optional[int],
                weights_asked: bool) -> Tuple[Tensor, OptTensor]:
        r"""The aggregated messages :math:`(N_t, H, C)` and the attention
        weights :math:`(E, H)` over :obj:`edge_index` (:obj:`None` from the
        fused operator unless :obj:`weights_asked`), along :obj:`route`.
        A stochastic kernel in evaluation averages its :obj:`num_samples`
        draws."""
        draws = self._draws()
        self._prepare_kernel(x_src, x_dst, batch,
                             sample=self.training or draws > 1,
                             batch_size=batch_size, num_draws=draws)
        if route.fused is not None:
            return self._fused_attention(route, x_src, x_dst, edge_index,
                                         edge_attr, size, draws,
                                         weights_asked)
        alpha = self._mean_over_draws(draws, lambda: self._attention(
            route, edge_index, x_src, x_dst, edge_attr, size))
        if route.lean_aggregation:
            assert isinstance(edge_index, Tensor)
            out = attention_aggregate(alpha, x_src, edge_index,
                                      _num_targets(x_src, x_dst, size))
            return out, alpha
        # propagate_type: (x: OptPairTensor, alpha: Tensor)
        out = self.propagate(edge_index, x=(x_src, x_dst), alpha=alpha,
                             size=size)
        return out, alpha

    def _attention(self, route: GATRoute, edge_index: Adj, x_src: Tensor,
                   x_dst: OptTensor, edge_attr: OptTensor,
                   size: Size) -> Tensor:
        r"""The attention weights :math:`(E, H)` of the kernel's current
        draw, after dropout."""
        score_src, score_dst = self._node_scores(x_src, x_dst)
        if route.lean_softmax:
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

    def _fused_attention(self, route: GATRoute, x_src: Tensor,
                         x_dst: OptTensor, edge_index: Adj,
                         edge_attr: OptTensor, size: Size, draws: int,
                         weights_asked: bool) -> Tuple[Tensor, OptTensor]:
        r"""The logits, softmax and aggregation of :meth:`_attention` and
        :func:`~ikgat.ops.aggregation.attention_aggregate` in one pass of
        :func:`~ikgat.ops.gat_attention.fused_attention` over the edges
        sorted by target, kept with the graph
        (:mod:`ikgat.nn.graph_cache`).  The kernel's draws are stacked
        along the heads (:math:`S H` heads, the projections repeated):
        the output is linear in the weights, so the mean of the draws'
        outputs is the output of their mean weights."""
        assert isinstance(edge_index, Tensor)
        key = (x_src.size(0), _num_targets(x_src, x_dst, size))
        if route.self_loops_in_sort:
            # No edge selection, so no host synchronisation even on a new
            # graph:
            loops = self._self_loop_count(x_src, x_dst, size)
            csr = graph_cache.cached(
                edge_index, CSR_WITH_SELF_LOOPS, key + (loops, ),
                lambda: gat_attention.prepare_csr(
                    edge_index, *key, self_loops=loops))
        else:
            csr = graph_cache.cached(
                edge_index, CSR, key,
                lambda: gat_attention.prepare_csr(edge_index, *key))
        edge_gate = self._edge_gate(edge_attr)
        score_src, score_dst = self._node_scores(x_src, x_dst, draws)
        values = x_src
        if edge_gate is not None:
            edge_gate = edge_gate.to(score_src.dtype)
        if draws > 1:
            values = x_src.repeat(1, draws, 1)
            if edge_gate is not None:
                edge_gate = edge_gate.repeat(1, draws)
        result = gat_attention.fused_attention(
            score_src, score_dst, values, csr, csr.num_dst, edge_gate,
            self.negative_slope,
            return_attention_weights=weights_asked,
            dropout=self.dropout if self.training else 0.0,
            use_triton=route.fused == 'triton')
        out, alpha = result if weights_asked else (result, None)
        return (self._mean_of_stacked_draws(out, draws),
                None if alpha is None else self._mean_of_stacked_draws(
                    alpha, draws))

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
