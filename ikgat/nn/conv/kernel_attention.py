r"""What the attention layers of ikgat share, whichever PyG layer they
replace.

* :class:`AttentionLayer`: what every layer of ikgat declares beyond PyG's
  (the graph batch supplied by :func:`ikgat.nn.graph_batch`, whether a
  target's output is local to its in-neighbourhood, what sampled
  subgraphs change, the full-graph summary), for the GATConv family
  (:class:`~ikgat.nn.conv.gat_base.GATConvBase`) and the TransformerConv
  family (:class:`~ikgat.IKTransformerConv`) alike.
* :class:`LeanPathSwitches`: the switches of the steps that replace PyG's
  message passing, and the hook bookkeeping that turns them off.
* :class:`KernelAttention`: the layers whose attention is a kernel of
  :mod:`ikgat.kernels` (:class:`~ikgat.IKGATConv`,
  :class:`~ikgat.IKTransformerConv` and their MIKAN forms): the kernel and
  its options, its draws (prepared per graph, averaged in evaluation), the
  switch of the fused operators, :meth:`~KernelAttention.spectral_points`
  and :meth:`~KernelAttention.kl_divergence`.
* :func:`implicit_full_graph_summary` and :func:`implicit_sampling_caveat`
  for a kernel that infers its spectral density from the nodes.

Which backend runs the attention is the rule set of
``docs/guides/gpu.md`` ("When the fused kernels run").
"""
from contextlib import contextmanager
from typing import (
    Any,
    Callable,
    Dict,
    Iterator,
    List,
    Optional,
    Set,
    Tuple,
    Union,
)

import torch
from torch import Tensor
from torch.nn.parameter import UninitializedParameter
from torch.utils.hooks import RemovableHandle
from torch_geometric.nn.aggr import SumAggregation
from torch_geometric.typing import OptPairTensor, OptTensor

from ikgat.kernels import Kernel, resolve_kernel
from ikgat.kernels.arguments import check_num_spectral_points, check_positive
from ikgat.kernels.draws import Draws
from ikgat.kernels.graph_summary import finite_mean, finite_sums
from ikgat.nn.conv.checks import count_graphs
from ikgat.nn.conv.own_templates import OwnTemplates
from ikgat.ops.runtime import triton_usable

#: The :mod:`~ikgat.nn.graph_cache` kinds of the fused operators' sorted
#: edges: of the (self-looped) edges given, and of the edges given with
#: the self-loops added in the sort.
CSR = 'csr'
CSR_WITH_SELF_LOOPS = 'csr_with_self_loops'

#: A graph batch as the layers take it: one vector, or the sources' and the
#: targets' vectors of a bipartite graph.
Batch = Union[OptTensor, Tuple[Tensor, Tensor]]


#: The steps of PyG's path that each switch's lean path skips.
SKIPPED_STEPS = {
    'lean_aggregation': ('message', 'aggregate', 'update',
                         'message_and_aggregate'),
    'lean_edge_softmax': ('edge_update', ),
}

#: The steps of PyG's path whose hooks each lean path bypasses, by the
#: attribute of :class:`LeanPathSwitches` that holds the ids of those
#: hooks while they are registered.
HOOKED_STEPS = {
    '_aggregation_hook_ids': ('propagate', 'message', 'aggregate',
                              'message_and_aggregate'),
    '_edge_update_hook_ids': ('edge_update', ),
}


def _hooks_turn_lean_paths_off(cls: type) -> type:
    r"""Class decorator of :class:`LeanPathSwitches`: override each
    ``register_<step>_forward_pre_hook`` and ``register_<step>_forward_hook``
    of :class:`MessagePassing` for the steps of :data:`HOOKED_STEPS`, so
    that the hook's id is kept in the layer's set of that step while the
    hook is registered."""
    def registration(name: str, hook_ids: str) -> Callable:
        def register(self, hook: Callable):
            handle = getattr(super(cls, self), name)(hook)
            return _LeanHookHandle(handle, getattr(self, hook_ids))

        register.__name__ = name
        register.__qualname__ = f'{cls.__qualname__}.{name}'
        register.__doc__ = (f'``MessagePassing.{name}``, which also turns '
                            f'off the lean path that would bypass the hook, '
                            f'until the hook is removed.')
        return register

    for hook_ids, steps in HOOKED_STEPS.items():
        for step in steps:
            for when in ('forward_pre_hook', 'forward_hook'):
                name = f'register_{step}_{when}'
                setattr(cls, name, registration(name, hook_ids))
    return cls


@_hooks_turn_lean_paths_off
class LeanPathSwitches:
    r"""Mixin for a :class:`MessagePassing` layer with lean paths, steps
    that replace PyG's (``edge_update``, ``message``/``aggregate``/
    ``propagate``): a hook registered through the public
    ``register_*_hook`` methods for a skipped step, or a subclass that
    overrides one, would silently not run.  So registering such a hook
    turns the path off until the hook is removed, and a subclass that
    defines a skipped step declares its path off (unless it sets the switch
    itself).  Holds the ids of the registered hooks that turn them off
    (:attr:`_aggregation_hook_ids`, :attr:`_edge_update_hook_ids`), and
    the switches ``lean_aggregation`` and ``lean_edge_softmax`` turned off
    for a subclass that overrides a step they skip.  The layer that
    implements a lean path sets its switch in its own class body (which
    exempts it from that rule); :meth:`_switch_on` also catches a step
    that comes from a mixin or is set on the layer."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Ids of the registered hooks that a lean path would bypass:
        self._aggregation_hook_ids: Set[int] = set()
        self._edge_update_hook_ids: Set[int] = set()

    def __init_subclass__(cls, **kwargs: Any):
        # A subclass that overrides a step of PyG's path (and does not set
        # the switch itself) declares the lean path that skips it off:
        super().__init_subclass__(**kwargs)
        for switch, steps in SKIPPED_STEPS.items():
            if switch not in cls.__dict__ and any(name in cls.__dict__
                                                  for name in steps):
                setattr(cls, switch, False)

    def _switch_on(self, switch: str) -> bool:
        r"""Whether the lean path of :obj:`switch` (a key of
        :data:`SKIPPED_STEPS`) may run: the switch is on, and every step it
        skips is the one of the nearest class that sets the switch (no
        step from a mixin or set on the layer)."""
        if not getattr(self, switch, False):
            return False
        cls = type(self)
        owner = next(base for base in cls.__mro__ if switch in base.__dict__)
        return not any(
            name in self.__dict__
            or getattr(cls, name, None) is not getattr(owner, name, None)
            for name in SKIPPED_STEPS[switch])

    def _lean_paths(self, edge_index: Any) -> Tuple[bool, bool]:
        r"""Whether the lean edge softmax and the lean aggregation may
        replace PyG's steps for :obj:`edge_index`: a plain edge tensor in
        PyG's direction, outside explain mode, the switch on
        (:meth:`_switch_on`) and no hook on a step it skips; for the
        aggregation also one decomposed layer and a sum."""
        plain = (type(edge_index) is Tensor
                 and edge_index.layout == torch.strided and not self.explain
                 and self.flow == 'source_to_target')
        softmax = (plain and self._switch_on('lean_edge_softmax')
                   and not self._edge_update_hook_ids)
        aggregation = (plain and self._switch_on('lean_aggregation')
                       and not self._aggregation_hook_ids
                       and self.decomposed_layers == 1
                       and type(self.aggr_module) is SumAggregation)
        return softmax, aggregation


class _LeanHookHandle:
    r"""PyG's :class:`~torch.utils.hooks.RemovableHandle` for a hook, which
    also keeps the layer's count of hooks that turn a lean path off."""
    def __init__(self, handle: RemovableHandle, hook_ids: Set[int]):
        self.handle = handle
        self.hook_ids = hook_ids
        hook_ids.add(handle.id)

    @property
    def id(self) -> int:
        return self.handle.id

    def remove(self) -> None:
        self.handle.remove()
        self.hook_ids.discard(self.handle.id)

    def __enter__(self) -> '_LeanHookHandle':
        return self

    def __exit__(self, *args: Any) -> None:
        self.remove()


class AttentionLayer(OwnTemplates):
    r"""Mixin (before the :class:`MessagePassing` base) of every attention
    layer of ikgat.

    **Sampled subgraphs.**  On a subgraph that holds every in-edge of a
    target (a ``NeighborLoader`` batch with fan-out :obj:`-1`), a layer
    with :attr:`local_to_in_neighbourhood` gives the target the output the
    full graph gives it, provided that :meth:`full_graph_summary` is active
    for layers that summarise the graph.  :attr:`sampling_caveat` says, in
    one sentence, what differs on sampled subgraphs (:obj:`None`:
    nothing beyond the neighbours left out by the sampler).
    """
    #: Whether a target's output depends only on the target, its in-edges
    #: and their sources (and on :meth:`full_graph_summary`).
    local_to_in_neighbourhood: bool = True
    #: The ``(batch, batch_size)`` that :func:`ikgat.nn.graph_batch`
    #: supplies to a forward pass called without :obj:`batch`, or
    #: :obj:`None`.
    graph_batch: Optional[Tuple[Tensor, Optional[int]]] = None

    @property
    def sampling_caveat(self) -> Optional[str]:
        r"""What a sampled subgraph changes beyond the neighbours it leaves
        out, or :obj:`None`."""
        return None

    @contextmanager
    def full_graph_summary(self, x: Any,
                           chunk_size: int = 65536) -> Iterator[None]:
        r"""Within the block, evaluate forward passes on subgraphs with the
        graph-level quantities of the graph whose node features are
        :obj:`x` (the full graph), computed once in node chunks of
        :obj:`chunk_size`.  Nothing to do for this layer; layers that
        summarise the graph override it."""
        yield

    def _given_batch(self, batch: Batch, batch_size: Optional[int]
                     ) -> Tuple[Batch, Optional[int]]:
        r""":obj:`batch` and :obj:`batch_size` as given to
        :meth:`forward`, else those of :func:`ikgat.nn.graph_batch`."""
        if batch is None and self.graph_batch is not None:
            return self.graph_batch
        return batch, batch_size


class KernelAttention(LeanPathSwitches, AttentionLayer):
    r"""Mixin of the layers whose attention is a kernel of
    :mod:`ikgat.kernels` held as :attr:`kernel`: its options, its draws, the
    switch of the fused operators, and what the kernel reports
    (:meth:`spectral_points`, :meth:`kl_divergence`, the sampling caveat
    of an implicit kernel); with the switches of :class:`LeanPathSwitches`,
    which the layer sets in its own class body."""
    #: Whether :meth:`forward` runs the fused Triton attention on CUDA
    #: (:obj:`True`), never (:obj:`False`), or on any device (``'always'``,
    #: for tests through Triton's interpreter); the rules are in the GPU
    #: guide ("When the fused kernels run").
    fused_attention: Union[bool, str] = True

    kernel: Kernel

    def _init_kernel(self, kernel: Union[str, Kernel], heads: int,
                     out_channels: int,
                     num_spectral_points: Optional[int], p: float,
                     magnitude: bool,
                     kernel_kwargs: Optional[Dict[str, Any]],
                     **options: Any) -> None:
        r"""Check and set the kernel options, and resolve :obj:`kernel`
        (:func:`~ikgat.kernels.resolve_kernel` with :obj:`options`);
        :obj:`num_spectral_points` :obj:`None` leaves the kernel its own
        :math:`R`."""
        name = type(self).__name__
        if num_spectral_points is not None:
            check_num_spectral_points(name, num_spectral_points)
        self.p = check_positive(name, 'p', p)
        try:
            self.kernel = resolve_kernel(kernel, heads, out_channels,
                                         num_spectral_points, kernel_kwargs,
                                         **options)
        except ValueError as error:
            raise ValueError(f'{name}: {error}') from None
        #: :math:`R` of the kernel (the argument, where it has none)
        self.num_spectral_points = getattr(self.kernel, 'num_spectral_points',
                                           num_spectral_points)
        self.magnitude = bool(magnitude) and self.kernel.uses_magnitude

    def reset_parameters(self):
        super().reset_parameters()
        # (PyG's constructor resets before the kernel exists:)
        kernel = self._modules.get('kernel')
        if kernel is not None:
            kernel.reset_parameters()

    # ------------------------------------------------------ fused operators

    def _fused_switch(self) -> Union[bool, str]:
        r"""The checked value of :attr:`fused_attention`."""
        if self.fused_attention not in (True, False, 'always'):
            raise ValueError(f"{type(self).__name__}: 'fused_attention' must "
                             f"be True, False or 'always' (got "
                             f"{self.fused_attention!r})")
        return self.fused_attention

    def _triton_runs_on(self, x: Tensor) -> bool:
        r"""Whether the switch lets the Triton kernels run on the device of
        :obj:`x` (CUDA, or any device with ``'always'``) and Triton is
        usable."""
        return ((self.fused_attention == 'always'
                 or x.device.type == 'cuda') and triton_usable())

    # ---------------------------------------------------------------- draws

    def _draws(self) -> int:
        r"""The kernel's draws in this pass: a stochastic kernel's
        :obj:`num_samples` in evaluation, else one."""
        if self.kernel.stochastic and not self.training:
            return self.kernel.num_samples
        return 1

    def _num_graphs(self, batch: Batch, batch_size: Optional[int]) -> int:
        r"""The number of graphs of :obj:`batch` (a host synchronisation on
        CUDA without :obj:`batch_size`)."""
        batch_src, batch_dst = _sides(batch)
        return count_graphs(type(self).__name__, batch_src, batch_dst,
                            batch_size)

    #: The full graph's summary :math:`h_s` while
    #: :meth:`~AttentionLayer.full_graph_summary` is active
    #: (:func:`implicit_full_graph_summary`), which the kernel's draws
    #: then come from; :obj:`None` otherwise.
    _full_summary: OptTensor = None

    def _prepare_kernel(self, x_src: Tensor, x_dst: OptTensor,
                        batch: Batch, sample: bool,
                        batch_size: Optional[int] = None,
                        num_draws: int = 1,
                        num_graphs: Optional[int] = None
                        ) -> Optional[Draws]:
        r"""The :obj:`num_draws` draws of spectral points of a stochastic
        kernel for this step (:meth:`~ikgat.kernels.Kernel.draw`), from the
        sources :obj:`x_src` (keys) and targets :obj:`x_dst` (queries),
        graph by graph (a graph's draws do not depend on the other graphs
        of a batch), or from the full graph's summary inside
        :meth:`~AttentionLayer.full_graph_summary`; :obj:`sample`
        :obj:`False` takes the density's mean.  :obj:`None` for the other
        kernels.  The layer passes them as ``draws=`` to the kernel."""
        if not self.kernel.stochastic:
            return None
        if num_graphs is None:
            num_graphs = self._num_graphs(batch, batch_size)
        if x_dst is None and num_graphs > 1:
            raise ValueError(
                f"{type(self).__name__}: per-graph spectral points need the "
                f"target features; pass x=(x_src, x_dst) with x_dst given, "
                f"or no batch")
        batch_src, batch_dst = _sides(batch)
        return self.kernel.draw(x_src, x_dst, batch_src, batch_dst,
                                num_graphs, sample, num_draws,
                                summary=self._full_summary)

    @staticmethod
    def _mean_over_draws(draws: Optional[Draws],
                         attention: Callable[[Optional[Draws]], Tensor]
                         ) -> Tensor:
        r"""The mean of :obj:`attention` over the :obj:`draws` of
        :meth:`_prepare_kernel`, each passed alone in turn (the output is
        linear in the weights, so the mean weights give the mean
        output)."""
        count = 1 if draws is None else draws.num_draws
        total: OptTensor = None
        for index in range(count):
            weights = attention(draws if count == 1 else
                                draws.select(index))
            total = weights if total is None else total + weights
        assert total is not None
        return total / count if count > 1 else total

    @staticmethod
    def _mean_of_stacked_draws(values: Tensor, draws: int) -> Tensor:
        r"""The mean over :obj:`draws` stacked along the heads by a fused
        operator: :math:`(N, S H, *) \to (N, H, *)`, where :math:`*` is
        one trailing dimension (outputs) or none (weights)."""
        if draws == 1:
            return values
        return values.view(values.size(0), draws, values.size(1) // draws,
                           *values.shape[2:]).mean(1)

    # ------------------------------------------------------ kernel reports

    @property
    def sampling_caveat(self) -> Optional[str]:
        r"""What differs on a sampled subgraph beyond the neighbours left
        out, in one sentence (:obj:`None`: nothing)."""
        return implicit_sampling_caveat(self)

    def spectral_points(self) -> List[Tensor]:
        r"""The spectral point sets of a random-feature kernel, each of shape
        :math:`(G, H, R, D)` (:math:`D = 2C` for the GATConv family,
        :math:`C` for the TransformerConv family): those of the last
        forward pass per graph for the variational kernels, the fixed or
        learned ones (:math:`G = 1`) otherwise."""
        if not self.kernel.has_spectral_points:
            raise TypeError(f"The kernel {type(self.kernel).__name__} has no "
                            f"spectral points")
        return self.kernel.spectral_points_per_graph()

    def kl_divergence(self) -> Tensor:
        r"""The KL divergence of the variational kernel's last forward pass
        to its prior (zero for the deterministic kernels)."""
        if self.kernel.has_kl:
            return self.kernel.kl_divergence()
        # A zero of the layer's dtype and device:
        return next(parameter for parameter in self.parameters()
                    if not isinstance(parameter, UninitializedParameter)
                    ).new_zeros(())


def _sides(batch: Batch) -> Tuple[OptTensor, OptTensor]:
    r"""The source and target graph indices of :obj:`batch`."""
    if isinstance(batch, (tuple, list)):
        return batch[0], batch[1]
    return batch, batch


@contextmanager
def implicit_full_graph_summary(layer: torch.nn.Module,
                                x: Union[Tensor, OptPairTensor],
                                queries: Callable[[Tensor], Tensor],
                                keys: Callable[[Tensor], Tensor],
                                chunk_size: int = 65536) -> Iterator[None]:
    r"""The ``full_graph_summary`` of a layer whose :obj:`kernel` may be
    stochastic (:class:`~ikgat.IKGATConv`, :class:`~ikgat.IKTransformerConv`
    and their MIKAN forms).  Within the block the kernel draws its spectral
    points from the summary of the graph whose node features are :obj:`x`
    (the full graph) instead of the nodes each forward pass gets: the layer
    passes to :meth:`~ikgat.kernels.Kernel.draw` the :obj:`summary`

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
    layer._full_summary = torch.cat([mean_q, mean_k], dim=-1)
    try:
        yield
    finally:
        layer._full_summary = None


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
