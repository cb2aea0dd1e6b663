r"""What kernel attention computed and learned, as tensors and numbers
(no matplotlib): the inputs and statistics behind the figures of
:mod:`ikgat.visualization`.

* :func:`attention_layers` and :func:`layer_decompositions` — a model's
  kernel-attention layers and the per-edge terms of their attention on the
  inputs they see (:meth:`ikgat.IKGATConv.attention_decomposition`).
* :func:`weighting_layers` and :func:`attention_weights` — the attention
  weights of any layer that returns them as GATConv does.
* :func:`spectral_tsne_inputs` — a layer's spectral points and reference
  samples of GAT's implicit spectral density (IKA, Fig. 5a/b).
* :func:`head_attention_std` — the attention weights' standard deviation
  across heads, per edge (Fig. 5d).
* :func:`sparsity_statistics` — how concentrated the attention is (Fig. 4).
* :class:`AttentionTermsRecorder` — the similarity and magnitude terms over
  training epochs (Fig. 3), a hook for the training loop.
"""
import inspect
import math
from typing import (
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import torch
from torch import Tensor

from ikgat.nn.conv.ik_transformer_conv import IKTransformerConv
from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv
from ikgat.nn.conv.mikan_conv import MIKANConv
from ikgat.nn.conv.mikan_transformer_conv import MIKANTransformerConv

__all__ = [
    'SpectralTSNEInputs',
    'SparsityStatistics',
    'AttentionTermsRecorder',
    'attention_layers',
    'layer_decompositions',
    'weighting_layers',
    'attention_weights',
    'spectral_tsne_inputs',
    'sparsity_statistics',
    'head_attention_std',
]

LayerSelector = Union[None, str, torch.nn.Module]

#: The kernel-attention layers (those with a kernel and an
#: ``attention_decomposition``): the GAT form and the transformer form.
KERNEL_LAYERS = (IKGATConv, IKTransformerConv)
#: The layers whose heads are tied by a learned copula.
COPULA_LAYERS = (MIKANConv, MIKANTransformerConv)
_KERNEL_LAYER_NAMES = ('IKGATConv, MIKANConv, IKTransformerConv or '
                       'MIKANTransformerConv')


# --------------------------------------------------------------------------
# Finding layers and their inputs
# --------------------------------------------------------------------------


def attention_layers(model: torch.nn.Module,
                     layer: LayerSelector = None) -> List[Tuple[str, Any]]:
    r"""The kernel-attention layers of :obj:`model` as ``(name, layer)``
    pairs, in module order.

    Args:
        model: A model, or a kernel-attention layer itself (named ``''``).
        layer: :obj:`None` for all :data:`KERNEL_LAYERS` submodules
            (:class:`~ikgat.IKGATConv`, :class:`~ikgat.MIKANConv`,
            :class:`~ikgat.IKTransformerConv`,
            :class:`~ikgat.MIKANTransformerConv`), a submodule name such as
            ``'conv1'``, or the layer module itself.
    """
    if isinstance(layer, str):
        try:
            module = model.get_submodule(layer)
        except AttributeError as error:
            names = [name for name, _ in attention_layers(model)]
            raise ValueError(f"{type(model).__name__} has no layer {layer!r}; "
                             f"its attention layers are {names}") from error
        if not isinstance(module, KERNEL_LAYERS):
            raise TypeError(f"Layer {layer!r} is a {type(module).__name__}, "
                            f"not an {_KERNEL_LAYER_NAMES}")
        return [(layer, module)]
    if isinstance(layer, torch.nn.Module):
        for name, module in model.named_modules():
            if module is layer:
                return [(name, layer)]
        raise ValueError(f'The given {type(layer).__name__} is not a '
                         f'submodule of the {type(model).__name__}')
    if layer is not None:
        raise TypeError(f"'layer' must be None, a submodule name or a module "
                        f"(got {type(layer).__name__})")
    found = [(name, module) for name, module in model.named_modules()
             if isinstance(module, KERNEL_LAYERS)]
    if not found:
        raise ValueError(f'{type(model).__name__} has no '
                         f'{_KERNEL_LAYER_NAMES} layer; build the model with '
                         f'ikgat\'s layers (GATConv and TransformerConv have '
                         f'no kernel to plot)')
    return found


def _layer_label(name: str, layer: torch.nn.Module) -> str:
    return f'{name} ({type(layer).__name__})' if name else type(
        layer).__name__


@torch.no_grad()
def _capture_inputs(model: torch.nn.Module, layers: Sequence[Tuple[str, Any]],
                    x: Any, edge_index: Any, **forward_kwargs: Any
                    ) -> Dict[str, Dict[str, Any]]:
    r"""Run :obj:`model` once in evaluation mode and return, per layer, the
    arguments of its forward call as keyword arguments of
    :meth:`~ikgat.IKGATConv.attention_decomposition`."""
    captured: Dict[str, Dict[str, Any]] = {}
    handles = []

    def hook_for(name: str, layer: torch.nn.Module) -> Callable:
        signature = inspect.signature(layer.forward)

        def hook(module, args, kwargs):
            bound = signature.bind(*args, **kwargs)
            arguments = dict(bound.arguments)
            arguments.pop('return_attention_weights', None)
            captured[name] = arguments

        return hook

    for name, layer in layers:
        handles.append(
            layer.register_forward_pre_hook(hook_for(name, layer),
                                            with_kwargs=True))
    was_training = model.training
    model.eval()
    # Monte-Carlo evaluation (num_samples > 1) draws random numbers: fork the
    # generators so that looking at a model never changes a training run.
    devices = []
    if isinstance(x, Tensor) and x.is_cuda:
        devices = [x.device.index if x.device.index is not None else
                   torch.cuda.current_device()]
    try:
        with torch.random.fork_rng(devices=devices):
            model(x, edge_index, **forward_kwargs)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    missing = [name for name, _ in layers if name not in captured]
    if missing:
        raise RuntimeError(f'The forward pass of {type(model).__name__} did '
                           f'not call the layers {missing}')
    return captured


@torch.no_grad()
def layer_decompositions(model: torch.nn.Module, x: Any, edge_index: Any,
                         layer: LayerSelector = None, **forward_kwargs: Any
                         ) -> Dict[str, AttentionDecomposition]:
    r"""The :meth:`~ikgat.IKGATConv.attention_decomposition` of every
    selected layer on the inputs that layer receives when :obj:`model` runs
    on ``(x, edge_index)`` in evaluation mode (without dropout), keyed by
    layer name.  The model's training mode and the random generators'
    states are restored afterwards, so calling this between epochs does not
    change a training run."""
    layers = attention_layers(model, layer)
    inputs = _capture_inputs(model, layers, x, edge_index, **forward_kwargs)
    out = {}
    for name, module in layers:
        was_training = module.training
        module.eval()
        try:
            out[name] = module.attention_decomposition(**inputs[name])
        finally:
            module.train(was_training)
    return out


def weighting_layers(model: torch.nn.Module) -> List[Tuple[str, Any]]:
    r"""The layers of :obj:`model` that return attention weights as
    GATConv does (``return_attention_weights=True``): PyG's GATConv and
    every ikgat layer (and PyG's TransformerConv, which the transformer
    layers extend), as ``(name, layer)`` pairs in module order."""
    from torch_geometric.nn import GATConv, TransformerConv

    from ikgat.nn.conv.gat_base import GATStyleConv
    return [(name, module) for name, module in model.named_modules()
            if isinstance(module, (GATStyleConv, GATConv, TransformerConv))]


@torch.no_grad()
def attention_weights(model: torch.nn.Module, x: Any, edge_index: Any,
                      layer: LayerSelector = None, **forward_kwargs: Any
                      ) -> Tuple[str, Tensor, Tensor]:
    r"""The attention weights :math:`(E, H)` of one layer of :obj:`model`
    (a submodule name or the module; the first of :func:`weighting_layers`
    by default)
    on the inputs it receives when the model runs on ``(x, edge_index)`` in
    evaluation mode, with the layer's name and the edges they weigh
    (self-loops included).  Any layer that returns attention weights as
    GATConv does: GATConv, :class:`~ikgat.IKGATConv`,
    :class:`~ikgat.MIKANConv`, KEPGATConv, TransformerConv,
    :class:`~ikgat.IKTransformerConv`, :class:`~ikgat.MIKANTransformerConv`
    (which attend over the given edges, without self-loops)."""
    layers = dict(weighting_layers(model))
    if not layers:
        raise ValueError(f'{type(model).__name__} has no layer that returns '
                         f'attention weights (GATConv or an ikgat layer)')
    if isinstance(layer, torch.nn.Module):
        layer = next((name for name, module in layers.items()
                      if module is layer), repr(layer))
    name = next(iter(layers)) if layer is None else layer
    if name not in layers:
        raise ValueError(f"{type(model).__name__} has no attention layer "
                         f"{name!r}; its attention layers are "
                         f"{list(layers)}")
    module = layers[name]
    inputs = _capture_inputs(model, [(name, module)], x, edge_index,
                             **forward_kwargs)[name]
    was_training = module.training
    module.eval()
    try:
        _, (edges, alpha) = module(**inputs, return_attention_weights=True)
    finally:
        module.train(was_training)
    return name, alpha, edges


# --------------------------------------------------------------------------
# Spectral points (Fig. 5a/b)
# --------------------------------------------------------------------------


class SpectralTSNEInputs(NamedTuple):
    r"""The points that :func:`plot_spectral_tsne` embeds.

    Attributes:
        points: :math:`(M, D)` (:math:`D = 2C` for the GAT form,
            :math:`C` for the transformer form, the kernel's
            :attr:`~ikgat.kernels.Kernel.dimension`); first the learned
            spectral points, head by
            head (within a head, set by set), then the reference samples.
        head: :math:`(M,)`, the head of each point, :obj:`-1` for the
            reference samples.
        point_set: :math:`(M,)`, the spectral point set (:math:`w_1, w_2`)
            of each point, :obj:`-1` for the reference samples.
        lengthscale: :math:`l` of the reference density
            :math:`\mathcal{N}(0, I/(2l^2))`.
        layer: The name of the layer the points come from.
    """
    points: Tensor
    head: Tensor
    point_set: Tensor
    lengthscale: float
    layer: str


def _spectral_layer(model: torch.nn.Module,
                    layer: LayerSelector) -> Tuple[str, Any]:
    candidates = attention_layers(model, layer)
    for name, module in candidates:
        if module.kernel.has_spectral_points:
            return name, module
    kinds = sorted({type(module.kernel).__name__ for _, module in candidates})
    raise ValueError(f'No layer with spectral points (kernels: {kinds}); '
                     f"use a random-feature kernel ('rff', 'rff_ns', "
                     f"'direct', 'implicit') or MIKANConv or "
                     f"MIKANTransformerConv")


@torch.no_grad()
def spectral_tsne_inputs(model: torch.nn.Module, layer: LayerSelector = None,
                         x: Any = None, edge_index: Any = None,
                         graph: int = 0,
                         num_reference: Optional[int] = None,
                         generator: Optional[torch.Generator] = None
                         ) -> SpectralTSNEInputs:
    r"""Collect a layer's spectral points and reference samples of GAT's
    implicit Gaussian spectral density :math:`\mathcal{N}(0, I/(2l^2))`.

    Args:
        model: A model or a layer with a random-feature kernel.
        layer: Which layer (see :func:`attention_layers`); by default the
            first one that has spectral points.
        x, edge_index: If given, :obj:`model` runs once on them in
            evaluation mode first.  Needed for the variational kernels
            (IKAN, MIKAN), whose spectral points are those of the last
            forward pass (their mean, :math:`\tilde z = \mu`, in
            evaluation).
        graph: For a mini-batch of graphs, whose graph's points.
            (default: :obj:`0`)
        num_reference: Reference samples; by default as many as one head
            has spectral points.
        generator: The random generator of the reference samples (default:
            seeded with 0, so figures are reproducible).
    """
    name, module = _spectral_layer(model, layer)
    if x is not None or edge_index is not None:
        if x is None or edge_index is None:
            raise ValueError("Give both 'x' and 'edge_index' (or neither)")
        was_training = model.training
        model.eval()
        try:
            model(x, edge_index)
        finally:
            model.train(was_training)
    try:
        sets = module.spectral_points()  # each [G, H, R, D]
    except RuntimeError as error:
        raise RuntimeError(
            f'{error}. The {type(module).__name__} draws its spectral points '
            f'from the graph: pass x= and edge_index= (or run the model once '
            f'in evaluation mode) before plotting') from None
    if not 0 <= graph < sets[0].size(0):
        raise ValueError(f"'graph' must lie in [0, {sets[0].size(0)}) "
                         f"(got {graph})")
    heads = sets[0].size(1)
    learned, head_ids, set_ids = [], [], []
    for h in range(heads):
        for s, points in enumerate(sets):
            block = points[graph, h].detach().cpu()  # [R, D]
            learned.append(block)
            head_ids.append(torch.full((block.size(0), ), h))
            set_ids.append(torch.full((block.size(0), ), s))
    learned_points = torch.cat(learned)
    # Kernels with spectral points declare their length-scale l:
    lengthscale = float(module.kernel.lengthscale)
    if num_reference is None:
        num_reference = len(sets) * sets[0].size(2)
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    reference = torch.randn(num_reference, learned_points.size(1),
                            generator=generator, dtype=learned_points.dtype)
    reference = reference / (math.sqrt(2.0) * lengthscale)
    points = torch.cat([learned_points, reference])
    head = torch.cat(head_ids + [torch.full((num_reference, ), -1)])
    point_set = torch.cat(set_ids + [torch.full((num_reference, ), -1)])
    return SpectralTSNEInputs(points, head.long(), point_set.long(),
                              lengthscale, name)


# --------------------------------------------------------------------------
# Copula correlation and head diversity (Fig. 5c/d)
# --------------------------------------------------------------------------


def _copula_layer(model: torch.nn.Module, layer: LayerSelector) -> Tuple[
        str, Any]:
    for name, module in attention_layers(model, layer):
        if isinstance(module, COPULA_LAYERS):
            return name, module
    raise ValueError(f'{type(model).__name__} has no MIKANConv or '
                     f'MIKANTransformerConv layer: only MIKAN learns a copula '
                     f'correlation across heads')


def head_attention_std(alpha: Tensor) -> Tensor:
    r"""The standard deviation of each edge's attention weight across
    heads (population std, :math:`\sqrt{\frac1H\sum_h(\alpha_{ij,h} -
    \bar\alpha_{ij})^2}`), shape :math:`(E,)`, for weights of shape
    :math:`(E, H)`."""
    if alpha.dim() != 2:
        raise ValueError(f'Attention weights must have shape [E, H] (got '
                         f'{list(alpha.shape)})')
    return alpha.detach().std(dim=1, unbiased=False)


# --------------------------------------------------------------------------
# Sparsity against p (Fig. 4)
# --------------------------------------------------------------------------


class SparsityStatistics(NamedTuple):
    r"""Sparsity of attention weights (see :func:`sparsity_statistics`)."""
    entropy: float
    share_above: float
    share_below: float
    high: float
    low: float
    num_weights: int
    uniform_entropy: float


def sparsity_statistics(alpha: Tensor, index: Tensor,
                        num_nodes: Optional[int] = None, high: float = 0.9,
                        low: float = 0.01) -> SparsityStatistics:
    r"""Sparsity statistics of attention weights normalised over the
    incoming edges of each target node.

    * ``entropy``: the mean over target nodes with at least one incoming
      edge (and over heads) of :math:`-\sum_j \alpha_{ij}\log\alpha_{ij}`,
      in nats (:math:`0 \log 0 = 0`): :math:`0` for one-hot attention,
      :math:`\log d_i` for uniform attention over :math:`d_i` neighbours.
    * ``share_above``: the share of all weights (edges × heads) with
      :math:`\alpha > \text{high}`.
    * ``share_below``: the share with :math:`\alpha < \text{low}`.
    * ``uniform_entropy``: the entropy of uniform attention on the same
      edges, the mean of :math:`\log d_i` over those nodes (the upper
      bound of ``entropy``).

    Args:
        alpha: Weights of shape :math:`(E,)` or :math:`(E, H)`.
        index: The target node of each edge, :math:`(E,)` (the second row
            of the edge index that :meth:`~ikgat.IKGATConv.forward` returns).
        num_nodes: Number of target nodes (default: ``index.max() + 1``).
        high, low: The thresholds. (default: :obj:`0.9`, :obj:`0.01`)
    """
    from torch_geometric.utils import scatter

    alpha = alpha.detach()
    if alpha.dim() == 1:
        alpha = alpha.unsqueeze(-1)
    if alpha.dim() != 2:
        raise ValueError(f"'alpha' must have shape [E] or [E, H] (got "
                         f"{list(alpha.shape)})")
    if index.dim() != 1 or index.numel() != alpha.size(0):
        raise ValueError(f"'index' must have shape [E] = [{alpha.size(0)}] "
                         f"(got {list(index.shape)})")
    if alpha.numel() == 0:
        raise ValueError('No attention weights: the graph has no edges')
    if bool((alpha < 0).any()) or bool((alpha > 1 + 1e-6).any()):
        raise ValueError('Attention weights must lie in [0, 1]')
    alpha = alpha.double()
    index = index.long()
    if num_nodes is None:
        num_nodes = int(index.max()) + 1
    safe = alpha.clamp_min(torch.finfo(alpha.dtype).tiny)
    p_log_p = torch.where(alpha > 0, alpha * safe.log(),
                          torch.zeros_like(alpha))
    entropy = -scatter(p_log_p, index, dim=0, dim_size=num_nodes,
                       reduce='sum')  # [N, H]
    in_degree = torch.bincount(index, minlength=num_nodes)
    has_edges = in_degree > 0
    return SparsityStatistics(
        entropy=float(entropy[has_edges].mean()),
        share_above=float((alpha > high).double().mean()),
        share_below=float((alpha < low).double().mean()), high=float(high),
        low=float(low), num_weights=int(alpha.numel()),
        uniform_entropy=float(in_degree[has_edges].double().log().mean()))


AttentionLike = Union[AttentionDecomposition, Tuple[Tensor, Tensor]]


def _alpha_and_index(value: AttentionLike) -> Tuple[Tensor, Tensor]:
    if isinstance(value, AttentionDecomposition):
        return value.alpha, value.edge_index[1]
    if isinstance(value, (tuple, list)) and len(value) == 2:
        alpha, index = value
        return alpha, index
    raise TypeError('Each attention entry must be an AttentionDecomposition '
                    'or a pair (alpha, index)')


# --------------------------------------------------------------------------
# Similarity against magnitude during training (Fig. 3)
# --------------------------------------------------------------------------


def _group_spread(values: Tensor, index: Tensor, num_nodes: int) -> float:
    r"""Mean over (target node, head) groups with edges of the population
    std of :obj:`values` :math:`(E, H)` within each group."""
    from torch_geometric.utils import scatter

    values = values.double()
    count = torch.bincount(index, minlength=num_nodes)
    mean = scatter(values, index, dim=0, dim_size=num_nodes, reduce='mean')
    variance = scatter((values - mean[index])**2, index, dim=0,
                       dim_size=num_nodes, reduce='mean')
    return float(variance.clamp_min(0).sqrt()[count > 0].mean())


TERM_STATISTICS = ('log_similarity_mean', 'log_magnitude_mean',
                   'log_similarity_spread', 'log_magnitude_spread')


class AttentionTermsRecorder:
    r"""Records, per epoch and attention layer, the similarity and magnitude
    terms of the attention logits, :math:`\log\tilde\alpha_{ij} =
    \log\mathrm{sim} + \log\mathrm{mag}` (see
    :meth:`~ikgat.IKGATConv.attention_decomposition`):

    * ``log_similarity_mean``, ``log_magnitude_mean``: the means over all
      edges and heads (the magnitude includes :math:`\tfrac12\|q_i\|_p^2`,
      which is constant over each softmax group);
    * ``log_similarity_spread``, ``log_magnitude_spread``: the standard
      deviation within the incoming edges of each target node, averaged
      over nodes and heads: how much each term moves the attention
      weights (a constant per group does not).

    Use it as the :obj:`on_epoch` callback of
    :func:`ikgat.training.train_node_classifier`; it evaluates the model in
    evaluation mode on ``(x, edge_index)`` and restores the random
    generators' states, so recording does not change the training run.

    Args:
        model: The model being trained (or one layer).
        x, edge_index: The graph to evaluate the terms on.
        layer: Which layers (see :func:`attention_layers`); all by default.
        every: Record every :obj:`every`-th epoch (and the first).
        callback: Another ``on_epoch`` callback to call as well.

    The record is :attr:`log`, a JSON-friendly dict: ``epoch``, ``val_acc``,
    ``val_loss`` (lists) and ``layers``, ``name -> statistic -> list``.
    """
    def __init__(self, model: torch.nn.Module, x: Any, edge_index: Any,
                 layer: LayerSelector = None, every: int = 1,
                 callback: Optional[Callable[[int, float, float],
                                             None]] = None):
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"'every' must be a positive integer (got "
                             f"{every!r})")
        self.model = model
        self.x = x
        self.edge_index = edge_index
        self.layer = layer
        self.every = every
        self.callback = callback
        self.names = [name for name, _ in attention_layers(model, layer)]
        self.log: Dict[str, Any] = dict(
            epoch=[], val_acc=[], val_loss=[], layers={
                name or type(model).__name__: {key: []
                                               for key in TERM_STATISTICS}
                for name in self.names
            })

    def record(self, epoch: int, val_acc: float = float('nan'),
               val_loss: float = float('nan')) -> None:
        r"""Evaluate the terms now and append them to :attr:`log`."""
        decompositions = layer_decompositions(self.model, self.x,
                                              self.edge_index, self.layer)
        self.log['epoch'].append(int(epoch))
        self.log['val_acc'].append(float(val_acc))
        self.log['val_loss'].append(float(val_loss))
        for name, decomposition in decompositions.items():
            key = name or type(self.model).__name__
            index = decomposition.edge_index[1]
            num_nodes = int(index.max()) + 1 if index.numel() else 0
            entry = self.log['layers'][key]
            entry['log_similarity_mean'].append(
                float(decomposition.log_similarity.double().mean()))
            entry['log_magnitude_mean'].append(
                float(decomposition.log_magnitude.double().mean()))
            entry['log_similarity_spread'].append(
                _group_spread(decomposition.log_similarity, index, num_nodes))
            entry['log_magnitude_spread'].append(
                _group_spread(decomposition.log_magnitude, index, num_nodes))

    def __call__(self, epoch: int, val_acc: float, val_loss: float) -> None:
        if epoch == 1 or epoch % self.every == 0:
            self.record(epoch, val_acc, val_loss)
        if self.callback is not None:
            self.callback(epoch, val_acc, val_loss)


def _check_terms_log(log: Any, label: str) -> None:
    if not isinstance(log, Mapping) or 'epoch' not in log or (
            'layers' not in log):
        raise ValueError(f'{label} is not a log of AttentionTermsRecorder '
                         f'(a dict with "epoch" and "layers")')
    if not log['epoch']:
        raise ValueError(f'{label} has no recorded epochs')
