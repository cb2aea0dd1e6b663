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

The layers, points and statistics each figure shows come from
:mod:`ikgat.inspection` (no matplotlib there).

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
import os
import os.path as osp
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from ikgat.inspection.capture import (
    LayerSelector,
    attention_weights,
    layer_label,
)
from ikgat.inspection.statistics import (
    AttentionLike,
    alpha_and_index,
    copula_layer,
    head_attention_std,
    sparsity_statistics,
    spectral_layer,
    spectral_tsne_inputs,
)
from ikgat.inspection.terms import check_terms_log

__all__ = [
    'plot_spectral_tsne',
    'plot_copula_correlation',
    'plot_head_attention_std',
    'plot_sparsity',
    'plot_terms',
]


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
    _, module = spectral_layer(model, layer)
    ax.set_title(title or f'Spectral points, t-SNE: '
                 f'{layer_label(inputs.layer, module)}')
    ax.set_xlabel('t-SNE 1')
    ax.set_ylabel('t-SNE 2')
    ax.legend(fontsize=7, markerscale=1.5, loc='best', ncol=2)
    return _save_figure(fig, path)


@torch.no_grad()
def plot_copula_correlation(model: torch.nn.Module,
                            layer: LayerSelector = None,
                            annotate: Optional[bool] = None,
                            title: Optional[str] = None, ax: Any = None,
                            path: Optional[str] = None):
    r"""Heatmap of MIKAN's learned copula correlation :math:`LL^\top`
    across heads (the IKA paper's Fig. 5c).

    Args:
        model: A :class:`~ikgat.MIKANConv` or
            :class:`~ikgat.MIKANTransformerConv`, or a model containing one.
        layer: Which layer; by default the first of them.
        annotate: Write the values into the cells (default: for at most 12
            heads).
    """
    name, module = copula_layer(model, layer)
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
                 f'{layer_label(name, module)}')
    return _save_figure(fig, path)


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
            first attention layer): any layer that returns attention
            weights as GATConv does (:func:`attention_weights`), GATConv
            and KEPGATConv included.
        bins: Histogram bins.
    """
    import numpy as np

    runs = _as_mapping(models)
    stds = {}
    for label, model in runs.items():
        _, alpha, _ = attention_weights(model, x, edge_index, layer)
        stds[label] = head_attention_std(alpha).cpu().double()
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
    return _save_figure(fig, path)


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
        alpha, index = alpha_and_index(value)
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
    return _save_figure(fig, path)


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
        check_terms_log(run, f'log {label!r}' if label else 'The log')
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
    return _save_figure(fig, path)


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


def _save_figure(fig, path: Optional[str]):
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
