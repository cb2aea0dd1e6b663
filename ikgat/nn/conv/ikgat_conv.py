from typing import Any, ContextManager, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
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
from ikgat.kernels.arguments import DeprecatedNumFeatures, renamed_num_features
from ikgat.kernels.draws import Draws
from ikgat.nn.conv.decomposition import (  # noqa: F401 (public here)
    AttentionDecomposition,
    attention_decomposition,
)
from ikgat.nn.conv.docstrings import shared_docstring
from ikgat.nn.conv.gat_base import (
    GATConvBase,
    takes_gat_conv_parameters,
    without_autocast,
)
from ikgat.nn.conv.gat_node_scores import GATNodeScores
from ikgat.nn.conv.kernel_attention import (  # noqa: F401 (public here)
    CSR,
    CSR_WITH_SELF_LOOPS,
    Batch,
    KernelAttention,
    implicit_full_graph_summary,
    implicit_sampling_caveat,
)
from ikgat.nn.conv.routes import GATRoute
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.edge_softmax import edge_logit, kernel_edge_softmax


@shared_docstring
class IKGATConv(DeprecatedNumFeatures, GATNodeScores, KernelAttention,
                GATConvBase):
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
    :math:`e_{ij} = a^\top(q_i + k_j) > 0`, else the negative slope
    (:obj:`negative_slope`),
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
        {gatconv_arguments}
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
            :class:`DeprecationWarning`); :obj:`None` takes the kernel's
            :attr:`~ikgat.kernels.Kernel.default_num_spectral_points`: 16
            for :obj:`"direct"` (within noise of 64 on 20 Planetoid seeds,
            at about half the cost of an epoch on PubMed), 64 for the
            others. (default: :obj:`None`)
        p (float, optional): The :math:`p > 0` of the :math:`L^p` magnitude;
            smaller :math:`p` gives sparser attention. (default: :obj:`2.0`)
        magnitude (bool, optional): If set to :obj:`False`, the magnitude
            term is dropped (``kernel='rbf_only'`` always drops it).
            (default: :obj:`True`)
        kernel_kwargs (dict, optional): Extra arguments of a kernel given by
            name, e.g. :obj:`{"lengthscale": 2.0}`. (default: :obj:`None`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    {gatconv_shapes}
    """
    #: Whether :meth:`forward` may aggregate through
    #: :func:`~ikgat.ops.aggregation.attention_aggregate` instead of PyG's
    #: :meth:`propagate` (the GPU guide, "When the fused kernels run").
    lean_aggregation: bool = True
    #: Whether :meth:`forward` may compute the attention weights through
    #: :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` instead of PyG's
    #: :meth:`edge_updater` (the same guide).
    lean_edge_softmax: bool = True

    @takes_gat_conv_parameters
    def __init__(
        self,
        *args,
        kernel: Union[str, Kernel] = 'direct',
        num_spectral_points: Optional[int] = None,
        p: float = 2.0,
        magnitude: bool = True,
        kernel_kwargs: Optional[Dict[str, Any]] = None,
        num_features: Optional[int] = None,
        **kwargs,
    ):
        num_spectral_points = renamed_num_features(
            type(self).__name__, old_value=num_features,
            new_value=num_spectral_points)
        super().__init__(*args, **kwargs)  # GATConv's parameters
        self._init_kernel(kernel, self.heads, self.out_channels,
                          num_spectral_points, p, magnitude, kernel_kwargs)
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
            {forward_graph_arguments}
            size ((int, int), optional): The shape of the adjacency matrix.
                (default: :obj:`None`)
            {gatconv_return_attention_weights}
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
        softmax, aggregation = self._lean_paths(edge_index)
        fused = bool(fused_switch is not False
                     and x_src.dtype == torch.float32 and softmax
                     and aggregation and self._triton_runs_on(x_src))
        # While torch.compile traces, PyG's steps run unless fused: Inductor
        # fuses them itself (off CUDA the fused operator's PyTorch
        # implementation gathers E x H x C messages, and was up to 2.2
        # times slower; the GPU guide, "When the fused kernels run"):
        return GATRoute(
            fused, bool(fused and self.add_self_loops and edge_attr is None
                        and not return_attention_weights),
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
        kernel_draws = self._prepare_kernel(
            x_src, x_dst, batch, sample=self.training or draws > 1,
            batch_size=batch_size, num_draws=draws)
        if route.fused:
            return self._fused_attention(route, x_src, x_dst, edge_index,
                                         edge_attr, size, draws,
                                         weights_asked, kernel_draws)
        alpha = self._mean_over_draws(kernel_draws, lambda one: (
            self._attention(route, edge_index, x_src, x_dst, edge_attr, size,
                            one)))
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
                   x_dst: OptTensor, edge_attr: OptTensor, size: Size,
                   kernel_draws: Optional[Draws] = None) -> Tensor:
        r"""The attention weights :math:`(E, H)` of the kernel's draw
        :obj:`kernel_draws` (of a stochastic kernel), after dropout."""
        if route.lean_softmax and self._is_gat_function():
            # GATConv's own logit: the gates alone, one slot a node.
            score_src, score_dst = self._gate_scores(x_src, x_dst)
        else:
            score_src, score_dst = self._node_scores(
                x_src, x_dst, kernel_draws=kernel_draws,
                targets=_targets_in_use(edge_index, x_dst, kernel_draws))
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
                         weights_asked: bool,
                         kernel_draws: Optional[Draws] = None
                         ) -> Tuple[Tensor, OptTensor]:
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
        score_src, score_dst = self._node_scores(x_src, x_dst, draws,
                                                 kernel_draws)
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
            use_triton=True)
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

    # The function, called as a method: conv.attention_decomposition(x, ...)
    attention_decomposition = attention_decomposition


def _num_targets(x_src: Tensor, x_dst: OptTensor, size: Size) -> int:
    r"""The number of target nodes, as :meth:`propagate` infers it: from
    the target features, else from :obj:`size`, else square."""
    if x_dst is not None:
        return x_dst.size(0)
    if size is not None:
        return size[1] if size[1] is not None else size[0]
    return x_src.size(0)


def _targets_in_use(edge_index: Adj, x_dst: OptTensor,
                    kernel_draws: Optional[Draws]) -> Optional[int]:
    r"""On CPU, one more than the largest target of an edge of
    :obj:`edge_index` that is not a self-loop: the target rows whose node
    terms the softmax reads.  A row past it has its self-loop alone (or no
    edge): a softmax over one edge is 1 whatever its logit.  A subgraph
    from PyG's ``NeighborLoader`` lists its nodes hop by hop and its last
    hop's nodes are sources only, so the targets are a short prefix of the
    rows (a tenth of them at fan-outs of 10).  :obj:`None` (every row) on
    other devices, where the maximum is a host synchronisation, while
    :func:`torch.compile` traces, for a sparse adjacency and for per-graph
    spectral points (whose batch vector covers every row)."""
    if (x_dst is None or not isinstance(edge_index, Tensor)
            or edge_index.layout != torch.strided
            or edge_index.device.type != 'cpu' or edge_index.numel() == 0
            or torch.compiler.is_compiling()
            or (kernel_draws is not None
                and kernel_draws.batches[0] is not None)):
        return None
    targets = edge_index[1][edge_index[0] != edge_index[1]]
    return int(targets.max()) + 1 if targets.numel() else 1
