r"""Figures of what kernel attention learned, after the IKA paper's figures.

* :func:`plot_spectral_tsne` — t-SNE of the learned spectral points of every
  head against samples of GAT's implicit spectral density (Fig. 5a/b);
  :func:`spectral_tsne_inputs` returns exactly the points it embeds.
* :func:`plot_copula_correlation` — MIKAN's copula correlation across heads
  (Fig. 5c).
* :func:`plot_head_attention_std` — the standard deviation of the attention
  weights across heads, per edge (Fig. 5d).
* :func:`plot_sparsity` — histograms of attention weights for several
  :math:`p`, with :func:`sparsity_statistics` (Fig. 4).
* :func:`plot_terms` — the similarity and magnitude terms over training
  epochs (Fig. 3), recorded by :class:`AttentionTermsRecorder`.

GAT's attention is an RBF kernel of length-scale :math:`l = 1` times a
magnitude term (see :class:`ikgat.IKGATConv`); by Bochner's theorem that RBF
kernel, written as the square :math:`f^2` of
:math:`f(x, y) = \exp(-\|x - y\|^2 / (4l^2))`, has the Gaussian spectral
density :math:`\mathcal{N}(0, I / (2l^2))`.  Those are the reference samples
of the t-SNE plots: learned spectral points that stay inside that cloud
behave like GAT's kernel, points that leave it are what was learned.

matplotlib and scikit-learn (the ``viz`` extra) are imported inside the
functions.  Figures are built with the object-oriented API on an Agg canvas
(no :mod:`matplotlib.pyplot` and no global backend switch), so they work on
headless machines and do not accumulate in pyplot's figure manager.  Every
plot function returns its :class:`matplotlib.figure.Figure` and writes a PNG
when given :obj:`path`.
"""
import inspect
import math
import os
import os.path as osp
from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple, Union)

import torch
from torch import Tensor

from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv
from ikgat.nn.conv.mikan_conv import MIKANConv

__all__ = [
    'SpectralTSNEInputs',
    'SparsityStatistics',
    'AttentionTermsRecorder',
    'attention_layers',
    'layer_decompositions',
    'spectral_tsne_inputs',
    'sparsity_statistics',
    'head_attention_std',
    'plot_spectral_tsne',
    'plot_copula_correlation',
    'plot_head_attention_std',
    'plot_sparsity',
    'plot_terms',
]

LayerSelector = Union[None, str, torch.nn.Module]

# --------------------------------------------------------------------------
# Finding layers and their inputs
# --------------------------------------------------------------------------


def attention_layers(model: torch.nn.Module,
                     layer: LayerSelector = None) -> List[Tuple[str, Any]]:
    r"""The kernel-attention layers of :obj:`model` as ``(name, layer)``
    pairs, in module order.

    Args:
        model: A model, or an :class:`~ikgat.IKGATConv` itself (named ``''``).
        layer: :obj:`None` for all :class:`~ikgat.IKGATConv` (and
            :class:`~ikgat.MIKANConv`) submodules, a submodule name such as
            ``'conv1'``, or the layer module itself.
    """
    if isinstance(layer, str):
        try:
            module = model.get_submodule(layer)
        except AttributeError as error:
            names = [name for name, _ in attention_layers(model)]
            raise ValueError(f"{type(model).__name__} has no layer {layer!r}; "
                             f"its attention layers are {names}") from error
        if not isinstance(module, IKGATConv):
            raise TypeError(f"Layer {layer!r} is a {type(module).__name__}, "
                            f"not an IKGATConv or MIKANConv")
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
             if isinstance(module, IKGATConv)]
    if not found:
        raise ValueError(f'{type(model).__name__} has no IKGATConv or '
                         f'MIKANConv layer; build the model with ikgat\'s '
                         f'layers (GATConv has no kernel to plot)')
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


def _single_decomposition(model: torch.nn.Module, x: Any, edge_index: Any,
                          layer: LayerSelector) -> Tuple[
                              str, Any, AttentionDecomposition]:
    name, module = attention_layers(model, layer)[0]
    decomposition = layer_decompositions(model, x, edge_index, module)[name]
    return name, module, decomposition


# --------------------------------------------------------------------------
# Spectral points (Fig. 5a/b)
# --------------------------------------------------------------------------


class SpectralTSNEInputs(NamedTuple):
    r"""The points that :func:`plot_spectral_tsne` embeds.

    Attributes:
        points: :math:`(M, 2C)`; first the learned spectral points, head by
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
                    layer: LayerSelector) -> Tuple[str, IKGATConv]:
    candidates = attention_layers(model, layer)
    for name, module in candidates:
        if module.kernel.has_spectral_points:
            return name, module
    kinds = sorted({type(module.kernel).__name__ for _, module in candidates})
    raise ValueError(f'No layer with spectral points (kernels: {kinds}); '
                     f"use a random-feature kernel ('rff', 'rff_ns', "
                     f"'direct', 'implicit') or MIKANConv")


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
        sets = module.spectral_points()  # each [G, H, R, 2C]
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
            block = points[graph, h].detach().cpu()  # [R, 2C]
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


def plot_spectral_tsne(model: torch.nn.Module, layer: LayerSelector = None,
                       x: Any = None, edge_index: Any = None, graph: int = 0,
                       num_reference: Optional[int] = None,
                       perplexity: float = 30.0, seed: int = 0,
                       title: Optional[str] = None, ax: Any = None,
                       path: Optional[str] = None):
    r"""t-SNE of the learned spectral points of every head of a layer,
    coloured by head, against samples of GAT's implicit spectral density
    :math:`\mathcal{N}(0, I/(2l^2))` (grey crosses); the IKA paper's
    Fig. 5a/b.

    The embedded points are those of :func:`spectral_tsne_inputs` (same
    :obj:`layer`, :obj:`x`, :obj:`edge_index`, :obj:`graph`,
    :obj:`num_reference`; reference samples seeded with :obj:`seed`).
    Draws into :obj:`ax` if given (the figure is then :obj:`ax`'s).
    """
    from sklearn.manifold import TSNE

    inputs = spectral_tsne_inputs(
        model, layer, x, edge_index, graph, num_reference,
        torch.Generator().manual_seed(seed))
    points = inputs.points.double().numpy()
    count = points.shape[0]
    perplexity = float(min(perplexity, max(1.0, (count - 1) / 3.0)))
    embedding = TSNE(n_components=2, perplexity=perplexity, init='pca',
                     random_state=seed).fit_transform(points)

    fig, ax = _figure_and_axes(ax, figsize=(6.0, 5.0))
    head = inputs.head.numpy()
    colours = _head_colours(int(head.max()) + 1)
    reference = head < 0
    ax.scatter(embedding[reference, 0], embedding[reference, 1], marker='x',
               s=14, c='0.55', linewidths=0.8,
               label=f'GAT: N(0, I/2l²), l={inputs.lengthscale:g}')
    for h, colour in enumerate(colours):
        mask = head == h
        ax.scatter(embedding[mask, 0], embedding[mask, 1], s=9,
                   color=colour, alpha=0.8, label=f'head {h}')
    _, module = _spectral_layer(model, layer)
    ax.set_title(title or f'Spectral points, t-SNE: '
                 f'{_layer_label(inputs.layer, module)}')
    ax.set_xlabel('t-SNE 1')
    ax.set_ylabel('t-SNE 2')
    ax.legend(fontsize=7, markerscale=1.5, loc='best', ncol=2)
    return _finish(fig, path)


# --------------------------------------------------------------------------
# Copula correlation and head diversity (Fig. 5c/d)
# --------------------------------------------------------------------------


def _copula_layer(model: torch.nn.Module, layer: LayerSelector) -> Tuple[
        str, Any]:
    for name, module in attention_layers(model, layer):
        if isinstance(module, MIKANConv):
            return name, module
    raise ValueError(f'{type(model).__name__} has no MIKANConv layer: only '
                     f'MIKAN learns a copula correlation across heads')


@torch.no_grad()
def plot_copula_correlation(model: torch.nn.Module,
                            layer: LayerSelector = None,
                            annotate: Optional[bool] = None,
                            title: Optional[str] = None, ax: Any = None,
                            path: Optional[str] = None):
    r"""Heatmap of MIKAN's learned copula correlation :math:`LL^\top`
    across heads (the IKA paper's Fig. 5c).

    Args:
        model: A :class:`~ikgat.MIKANConv` or a model containing one.
        layer: Which layer; by default the first MIKANConv.
        annotate: Write the values into the cells (default: for at most 12
            heads).
    """
    name, module = _copula_layer(model, layer)
    correlation = module.copula_correlation().detach().cpu().double()
    heads = correlation.size(0)
    fig, ax = _figure_and_axes(ax, figsize=(6.4, 5.0))
    image = ax.imshow(correlation.numpy(), cmap='RdBu_r', vmin=-1.0,
                      vmax=1.0)
    off_diagonal = correlation - torch.eye(heads, dtype=correlation.dtype)
    fig.colorbar(image, ax=ax, label=f'correlation (max |off-diagonal| '
                 f'{float(off_diagonal.abs().max()):.3g})')
    if annotate is None:
        annotate = heads <= 12
    if annotate:
        for i in range(heads):
            for j in range(heads):
                value = round(float(correlation[i, j]), 2) + 0.0  # no -0
                ax.text(j, i, f'{value:.2f}', ha='center', va='center',
                        fontsize=7,
                        color='white' if abs(value) > 0.6 else 'black')
    ax.set_xticks(range(heads))
    ax.set_yticks(range(heads))
    ax.set_xlabel('head')
    ax.set_ylabel('head')
    ax.set_title(title or f'Copula correlation across heads: '
                 f'{_layer_label(name, module)}')
    return _finish(fig, path)


def head_attention_std(alpha: Tensor) -> Tensor:
    r"""The standard deviation of each edge's attention weight across
    heads (population std, :math:`\sqrt{\frac1H\sum_h(\alpha_{ij,h} -
    \bar\alpha_{ij})^2}`), shape :math:`(E,)`, for weights of shape
    :math:`(E, H)`."""
    if alpha.dim() != 2:
        raise ValueError(f'Attention weights must have shape [E, H] (got '
                         f'{list(alpha.shape)})')
    return alpha.detach().std(dim=1, unbiased=False)


def plot_head_attention_std(models: Union[torch.nn.Module,
                                          Mapping[str, torch.nn.Module]],
                            x: Any, edge_index: Any,
                            layer: LayerSelector = None, bins: int = 40,
                            title: Optional[str] = None, ax: Any = None,
                            path: Optional[str] = None):
    r"""Histogram over edges of the standard deviation of the attention
    weights across heads (:func:`head_attention_std`), one step curve per
    model (the IKA paper's Fig. 5d: how differently the heads attend).

    Args:
        models: A model or layer, or a mapping ``label -> model``.
        x, edge_index: The graph the models attend over (evaluation mode).
        layer: Which layer of each model (name, or :obj:`None` for the
            first attention layer).
        bins: Histogram bins.
    """
    import numpy as np

    runs = _as_mapping(models)
    stds = {}
    for label, model in runs.items():
        _, _, decomposition = _single_decomposition(model, x, edge_index,
                                                    layer)
        stds[label] = head_attention_std(decomposition.alpha).cpu().double()
    fig, ax = _figure_and_axes(ax, figsize=(6.0, 4.2))
    high = max(float(std.max()) for std in stds.values()) if stds else 1.0
    edges = np.linspace(0.0, max(high, 1e-6), bins + 1)
    for label, std in stds.items():
        ax.hist(std.numpy(), bins=edges, histtype='step', linewidth=1.6,
                label=f'{label} (mean {float(std.mean()):.3f})')
    ax.set_yscale('log')
    ax.set_xlabel('std of α_ij across heads')
    ax.set_ylabel('edges')
    which = layer if isinstance(layer, str) else 'first attention layer'
    ax.set_title(title or f'Attention across heads ({which})')
    ax.legend(fontsize=8)
    return _finish(fig, path)


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


def plot_sparsity(attention: Mapping[Any, AttentionLike], bins: int = 50,
                  high: float = 0.9, low: float = 0.01,
                  title: Optional[str] = None, path: Optional[str] = None):
    r"""Histograms of attention weights, one panel per run (e.g. per
    :math:`p`), each with its :func:`sparsity_statistics`; with numeric keys
    a last panel plots the statistics against the key (the IKA paper's
    Fig. 4: smaller :math:`p`, sparser attention).

    Args:
        attention: ``key -> AttentionDecomposition`` or
            ``key -> (alpha, index)``; a numeric key is read as :math:`p`.
        bins: Histogram bins on :math:`[0, 1]`.
        high, low: The thresholds of the statistics.
    """
    import numpy as np

    if not attention:
        raise ValueError("'attention' is empty: give at least one run")
    runs = list(attention.items())
    numeric = all(isinstance(key, (int, float)) and not isinstance(key, bool)
                  for key, _ in runs)
    if numeric:
        runs.sort(key=lambda item: float(item[0]))
    stats = []
    panels = len(runs) + (1 if numeric and len(runs) > 1 else 0)
    fig = _new_figure(figsize=(3.2 * panels, 3.4))
    axes = fig.subplots(1, panels, squeeze=False)[0]
    edges = np.linspace(0.0, 1.0, bins + 1)
    for ax, (key, value) in zip(axes, runs):
        alpha, index = _alpha_and_index(value)
        stat = sparsity_statistics(alpha, index, high=high, low=low)
        stats.append(stat)
        ax.hist(alpha.detach().cpu().double().reshape(-1).numpy(),
                bins=edges, color='tab:blue')
        ax.set_yscale('log')
        ax.set_title(f'p = {float(key):g}' if numeric else str(key))
        ax.set_xlabel('attention weight α_ij')
        ax.set_ylabel('weights (edges × heads)')
        ax.text(0.97, 0.97, f'entropy {stat.entropy:.3f}\n'
                f'> {high:g}: {100 * stat.share_above:.1f}%\n'
                f'< {low:g}: {100 * stat.share_below:.1f}%',
                transform=ax.transAxes, ha='right', va='top', fontsize=8,
                bbox=dict(boxstyle='round', facecolor='white', alpha=0.8))
    if panels > len(runs):
        ax = axes[-1]
        ps = [float(key) for key, _ in runs]
        ax.plot(ps, [s.entropy for s in stats], 'o-', color='tab:purple',
                label='entropy (nats)')
        ax.axhline(stats[0].uniform_entropy, color='tab:purple',
                   linestyle=':', linewidth=1.0, label='uniform attention')
        ax.set_xlabel('p')
        ax.set_ylabel('entropy (nats)')
        share_ax = ax.twinx()
        share_ax.plot(ps, [100 * s.share_above for s in stats], 's--',
                      color='tab:red', label=f'% > {high:g}')
        share_ax.plot(ps, [100 * s.share_below for s in stats], '^--',
                      color='tab:green', label=f'% < {low:g}')
        share_ax.set_ylabel('% of weights')
        share_ax.set_ylim(bottom=0.0)
        lines = ax.get_lines() + share_ax.get_lines()
        ax.legend(lines, [line.get_label() for line in lines], fontsize=7,
                  loc='center right')
        ax.set_title('Sparsity statistics against p')
    fig.suptitle(title or 'Attention weights against p')
    return _finish(fig, path)


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


def plot_terms(log: Mapping[str, Any], statistic: str = 'both',
               layers: Optional[Sequence[str]] = None,
               title: Optional[str] = None, path: Optional[str] = None):
    r"""The similarity and magnitude terms over training epochs, one line
    per layer (the IKA paper's Fig. 3).

    Args:
        log: :attr:`AttentionTermsRecorder.log`, or a mapping
            ``label -> log`` to compare runs.
        statistic: ``'mean'`` (mean over edges and heads), ``'spread'``
            (std within each node's incoming edges, what moves the
            attention) or ``'both'`` (two rows). (default: ``'both'``)
        layers: The layer names to draw (default: all recorded).
    """
    from matplotlib.ticker import MaxNLocator

    rows = {'mean': ['mean'], 'spread': ['spread'],
            'both': ['mean', 'spread']}.get(statistic)
    if rows is None:
        raise ValueError(f"'statistic' must be 'mean', 'spread' or 'both' "
                         f"(got {statistic!r})")
    if isinstance(log, Mapping) and 'epoch' in log:
        runs = {'': log}
    else:
        runs = dict(log)
    for label, run in runs.items():
        _check_terms_log(run, f'log {label!r}' if label else 'The log')
        if layers is not None:
            missing = [name for name in layers if name not in run['layers']]
            if missing:
                raise ValueError(f'The log has no layers {missing}; it '
                                 f'records {list(run["layers"])}')

    fig = _new_figure(figsize=(10.0, 3.4 * len(rows)))
    axes = fig.subplots(len(rows), 2, squeeze=False)
    terms = (('log_similarity', 'log-similarity'),
             ('log_magnitude', 'log-magnitude'))
    row_label = {'mean': 'mean over edges', 'spread':
                 'std within neighbourhoods'}
    for r, row in enumerate(rows):
        for c, (key, name) in enumerate(terms):
            ax = axes[r][c]
            for label, run in runs.items():
                for layer, values in run['layers'].items():
                    if layers is not None and layer not in layers:
                        continue
                    series = values.get(f'{key}_{row}')
                    if not series:
                        continue
                    line_label = f'{label}: {layer}' if label else layer
                    ax.plot(run['epoch'][:len(series)], series,
                            label=line_label, linewidth=1.4)
            ax.set_title(f'{name} term ({row_label[row]})')
            ax.set_xlabel('epoch')
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(title or 'Similarity and magnitude terms during training')
    return _finish(fig, path)


# --------------------------------------------------------------------------
# Figure plumbing
# --------------------------------------------------------------------------


def _new_figure(figsize: Tuple[float, float]):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout='constrained')
    FigureCanvasAgg(fig)
    return fig


def _figure_and_axes(ax: Any, figsize: Tuple[float, float]):
    if ax is not None:
        return ax.figure, ax
    fig = _new_figure(figsize)
    return fig, fig.add_subplot()


def _finish(fig, path: Optional[str]):
    if path is not None:
        folder = osp.dirname(osp.abspath(path))
        os.makedirs(folder, exist_ok=True)
        fig.savefig(path, dpi=150)
    return fig


def _head_colours(count: int) -> List[Any]:
    from matplotlib import colormaps

    cmap = colormaps['tab10' if count <= 10 else 'tab20' if count <= 20
                     else 'turbo']
    if count > 20:
        return [cmap(i / max(count - 1, 1)) for i in range(count)]
    return [cmap(i) for i in range(count)]


def _as_mapping(models: Union[torch.nn.Module, Mapping[str, torch.nn.Module]]
                ) -> Dict[str, torch.nn.Module]:
    if isinstance(models, torch.nn.Module):
        return {type(models).__name__: models}
    return dict(models)
