r"""The uncertainty study: GAT with
max-softmax, temperature scaling and MC dropout, MIKAN and
:class:`~ikgat.nn.conv.kep_gat_conv.KEPGATConv`, judged by
:mod:`ikgat.metrics` on the Planetoid test split.

Two settings per (dataset, seed):

* ``misclassification``: the public split; the test nodes are scored by the
  maximum softmax probability (MSP) of the averaged predictive distribution
  and every metric of :func:`ikgat.metrics.uncertainty_report` is reported.
* ``ood``: the last ``k`` classes are held out: their nodes leave the train
  and validation masks and the model has ``C - k`` outputs.  The test nodes
  of the kept classes are in-distribution (positives), those of the held-out
  classes out-of-distribution; MSP ranks them (``ood_auroc``,
  ``ood_fpr95``), and the in-distribution test nodes get the full report.

Every model follows the GAT protocol
(:data:`benchmarks.harness.registry.PROTOCOLS`):
Adam, early stopping on the validation split (patience on accuracy and
loss).  The state evaluated is the one of the lowest validation NLL, not of
the best validation accuracy (:mod:`ikgat.training`'s rule): on Cora the
accuracy peaks early, while the softmax is still nearly uniform (seed 0:
best accuracy at epoch 61 of 501, test ECE 0.58 for max-softmax, fitted
temperature 0.14), which would judge an under-trained model's calibration.
The three GAT methods share one trained GAT per (dataset, seed, setting).
Per-epoch validation is deterministic (the GP's posterior mean, MIKAN's
:math:`z = \mu`, no dropout); the final evaluation is stochastic where the
method is:

* ``gat-msp``: one deterministic pass;
* ``gat-ts``: logits divided by a temperature fitted on the validation split
  by NLL (log-grid search, then golden-section refinement);
* ``gat-mcdropout``: dropout kept on, softmax probabilities averaged over
  :obj:`mc_dropout_passes` passes;
* ``mikan``: :class:`ikgat.MIKANConv` with :obj:`num_samples` spectral draws
  averaged inside each layer (its Monte-Carlo evaluation), one pass.  By
  default the output layer has no magnitude term
  (``mikan_output_magnitude=False``): there the projections are the class
  logits, and the factor :math:`\exp(\tfrac12\|k_j\|_p^2)` (which the RBF
  similarity cancels in GAT, but a bounded random-feature similarity does
  not) makes attention collapse onto the most confident neighbours as the
  logits grow, so training keeps them small.  Measured on Cora's
  validation split (seed 0, selected by validation NLL): mean confidence
  35.8% at 80.8% accuracy, ECE 45.0%, with the term; 65.5% at 80.0%,
  ECE 14.5%, without it.  The hidden layer keeps it;
* ``kep``: :class:`KEPGATConv` in both layers, logits averaged over
  :obj:`kep_passes` stochastic passes (the KEP-SVGP authors' protocol), the
  loss ``nll + eta_ksvd * L_ksvd + beta * KL / n_train``.

Rows are appended (and flushed) to a CSV file per (dataset, method,
setting, seed); ``resume=True`` skips finished ones.  :func:`render_summary`
writes mean ± std over seeds as Markdown.

    # rows appended to benchmarks/results/uncertainty.csv, resumable:
    python -m benchmarks.uncertainty --datasets Cora --seeds 0-9 --resume
    # benchmarks/results/uncertainty.md from the CSV only:
    python -m benchmarks.uncertainty --summary-only
    # seconds, on a tiny synthetic graph (results in a temporary folder):
    python -m benchmarks.uncertainty --smoke
"""
import argparse
import copy
import json
import math
import os.path as osp
import shlex
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from benchmarks.harness.data import BenchData, load_planetoid_data
from benchmarks.harness.provenance import git_commit, row_commits
from benchmarks.harness.registry import protocol_for
from benchmarks.harness.results import (
    RESULTS_DIR,
    MalformedResults,
    ResultsWriter,
    read_results,
    write_text,
)
from benchmarks.harness.runtime import (
    parse_seeds,
    resolve_device,
    seed_everything,
)
from ikgat.data import toy_citation_graph
from ikgat.kernels.random_features import NODE_PATHS
from ikgat.training import train_node_classifier, variational_adam

METHODS = ('gat-msp', 'gat-ts', 'gat-mcdropout', 'mikan', 'kep')
GAT_METHODS = ('gat-msp', 'gat-ts', 'gat-mcdropout')
SETTINGS = ('misclassification', 'ood')

#: Classes held out in the OOD setting (the last ``k`` class indices).
DEFAULT_OOD_CLASSES = {'Cora': 2, 'CiteSeer': 2, 'PubMed': 1}

METRICS = ('accuracy', 'aurc', 'eaurc', 'auroc', 'fpr95', 'aupr_success',
           'aupr_error', 'ece', 'nll', 'brier')
OOD_METRICS = ('ood_auroc', 'ood_fpr95')

COLUMNS = (['dataset', 'method', 'setting', 'seed', 'held_out'] +
           list(METRICS) + list(OOD_METRICS) +
           ['temperature', 'epochs', 'best_epoch', 'seconds', 'config',
            'device', 'git_commit'])
KEY_COLUMNS = ('dataset', 'method', 'setting', 'seed', 'config')
NUMERIC_COLUMNS = (('seed', ) + METRICS + OOD_METRICS +
                   ('temperature', 'epochs', 'best_epoch', 'seconds'))

DEFAULT_RESULTS = osp.join(RESULTS_DIR, 'uncertainty.csv')
DEFAULT_SUMMARY = osp.join(RESULTS_DIR, 'uncertainty.md')


@dataclass
class UncertaintyConfig:
    r"""Settings of the methods (benchmark configuration, not layer
    defaults)."""
    mc_dropout_passes: int = 20
    mikan_num_samples: int = 10
    mikan_num_features: int = 64
    mikan_beta: float = 0.1
    mikan_output_magnitude: bool = False
    kep_passes: int = 10
    kep_eta_ksvd: float = 0.1
    kep_beta: float = 0.01
    epochs: Optional[int] = None
    patience: Optional[int] = None
    #: How MIKAN's random features evaluate their node-wise term
    #: (:data:`ikgat.kernels.random_features.NODE_PATHS`): speed and memory
    #: only, so it is not part of :meth:`label`.
    node_path: str = 'eager'

    def label(self, method: str) -> str:
        r"""The settings that affect :obj:`method`, as compact JSON (part of
        a row's key, so changed settings never resume old rows)."""
        values: Dict[str, Any] = {}
        if method == 'gat-mcdropout':
            values['passes'] = self.mc_dropout_passes
        elif method == 'mikan':
            values.update(S=self.mikan_num_samples, R=self.mikan_num_features,
                          beta=self.mikan_beta,
                          out_magnitude=self.mikan_output_magnitude)
        elif method == 'kep':
            values.update(passes=self.kep_passes,
                          eta_ksvd=self.kep_eta_ksvd, beta=self.kep_beta)
        if self.epochs is not None:
            values['epochs'] = self.epochs
        if self.patience is not None:
            values['patience'] = self.patience
        return json.dumps(values, sort_keys=True, separators=(',', ':'))


# --------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------


def held_out_split(data, num_classes: int, num_held_out: int):
    r"""Return a copy of :obj:`data` without the last :obj:`num_held_out`
    classes in its train and validation masks and with the labels of the
    kept classes (``y < C - k``; held-out nodes get ``-1``), and the boolean
    in-distribution mask over all nodes."""
    if not 0 < num_held_out < num_classes:
        raise ValueError(f"num_held_out must lie in [1, {num_classes - 1}] "
                         f"for {num_classes} classes (got {num_held_out})")
    kept = num_classes - num_held_out
    in_dist = data.y < kept
    split = copy.copy(data)
    split.train_mask = data.train_mask & in_dist
    split.val_mask = data.val_mask & in_dist
    split.y = torch.where(in_dist, data.y, torch.full_like(data.y, -1))
    return split, in_dist


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------


@dataclass
class Trained:
    model: torch.nn.Module
    epochs: int
    best_epoch: int
    seconds: float


def train(model: torch.nn.Module, data, protocol: Dict[str, Any],
          regulariser: Optional[Callable[[], Tensor]] = None) -> Trained:
    r"""The benchmark's use of :func:`ikgat.training.train_node_classifier`:
    the GAT protocol's early stopping, :func:`ikgat.training.variational_adam`
    (no weight decay on variational scales), the state of the lowest
    validation NLL restored (see the module docstring).

    Args:
        regulariser: Added to the training NLL after each forward pass
            (KL and KSVD terms, :func:`extra_loss`).
    """
    result = train_node_classifier(
        model, data, epochs=protocol['epochs'], patience=protocol['patience'],
        select='nll', extra_loss=regulariser,
        optimizer=variational_adam(model, protocol['lr'],
                                   protocol['weight_decay']),
        restore_best_state=True)
    return Trained(model, result.epochs, result.best_epoch, result.seconds)


# --------------------------------------------------------------------------
# Models and predictive distributions
# --------------------------------------------------------------------------


def build(method: str, in_channels: int, num_classes: int,
          protocol: Dict[str, Any], config: UncertaintyConfig
          ) -> torch.nn.Module:
    from ikgat.models import TwoLayerGAT
    out_kwargs: Dict[str, Any] = {}
    if method in GAT_METHODS:
        from torch_geometric.nn import GATConv
        conv, kwargs = GATConv, {}
    elif method == 'mikan':
        from ikgat.nn.conv.mikan_conv import MIKANConv
        conv = MIKANConv
        kwargs = dict(num_spectral_points=config.mikan_num_features, num_samples=1,
                      kernel_kwargs=dict(node_path=config.node_path))
        out_kwargs = dict(magnitude=config.mikan_output_magnitude)
    elif method == 'kep':
        from ikgat.nn.conv.kep_gat_conv import KEPGATConv
        conv, kwargs = KEPGATConv, dict(num_samples=0)
    else:
        raise ValueError(f"Unknown method {method!r}; choose from "
                         f"{list(METHODS)}")
    return TwoLayerGAT(in_channels, protocol['hidden'], num_classes, conv,
                       heads=protocol['heads'],
                       out_heads=protocol['out_heads'],
                       dropout=protocol['dropout'], conv_kwargs=kwargs,
                       out_conv_kwargs=out_kwargs)


def set_kep_samples(model: torch.nn.Module, num_samples: int) -> None:
    from ikgat.nn.conv.kep_gat_conv import KEPGATConv
    for module in model.modules():
        if isinstance(module, KEPGATConv):
            module.num_samples = num_samples


def set_mikan_samples(model: torch.nn.Module, num_samples: int) -> None:
    from ikgat.nn.conv.mikan_conv import MIKANConv
    for module in model.modules():
        if isinstance(module, MIKANConv):
            module.kernel.num_samples = num_samples


def fit_temperature(logits: Tensor, labels: Tensor) -> float:
    r"""The temperature :math:`T > 0` minimising the NLL of
    ``softmax(logits / T)``: a log-spaced grid over :math:`[0.05, 20]`, then
    golden-section search around its best point (the NLL is convex in
    :math:`1/T`, so this finds the global minimum)."""
    logits = logits.detach().double()

    def nll(log_t: float) -> float:
        return float(F.cross_entropy(logits / math.exp(log_t), labels))

    grid = torch.linspace(math.log(0.05), math.log(20.0), 101).tolist()
    best = min(range(len(grid)), key=lambda i: nll(grid[i]))
    low = grid[max(best - 1, 0)]
    high = grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    a, b = high - ratio * (high - low), low + ratio * (high - low)
    for _ in range(40):
        if nll(a) < nll(b):
            high = b
        else:
            low = a
        a, b = high - ratio * (high - low), low + ratio * (high - low)
    return math.exp((low + high) / 2)


@torch.no_grad()
def predictive_probabilities(method: str, model: torch.nn.Module, data,
                             config: UncertaintyConfig,
                             temperature: float = 1.0,
                             generator: Optional[torch.Generator] = None
                             ) -> Tensor:
    r"""The predictive class probabilities of every node under
    :obj:`method` (see the module docstring)."""
    x, edge_index = data.x, data.edge_index
    if method == 'gat-msp':
        model.eval()
        return model(x, edge_index).softmax(-1)
    if method == 'gat-ts':
        model.eval()
        return (model(x, edge_index) / temperature).softmax(-1)
    if method == 'gat-mcdropout':
        model.train()  # dropout on: features and attention
        probs = torch.stack([model(x, edge_index).softmax(-1)
                             for _ in range(config.mc_dropout_passes)])
        model.eval()
        return probs.mean(0)
    if method == 'mikan':
        model.eval()
        set_mikan_samples(model, config.mikan_num_samples)
        try:
            return model(x, edge_index).softmax(-1)
        finally:
            set_mikan_samples(model, 1)
    if method == 'kep':
        model.eval()
        set_kep_samples(model, 1)
        try:
            logits = torch.stack([
                model(x, edge_index, generator=generator)
                for _ in range(config.kep_passes)])
        finally:
            set_kep_samples(model, 0)
        return logits.mean(0).softmax(-1)
    raise ValueError(f"Unknown method {method!r}")


def report(probs: Tensor, labels: Tensor, mask: Tensor,
           in_dist: Optional[Tensor] = None) -> Dict[str, float]:
    r"""The metrics of :func:`ikgat.metrics.uncertainty_report` on the nodes
    of :obj:`mask` that are in-distribution, plus ``ood_auroc`` and
    ``ood_fpr95`` (in-distribution as positives, MSP as score) over all the
    nodes of :obj:`mask` when :obj:`in_dist` is given."""
    from ikgat import metrics
    probs = probs.double()
    probs = probs / probs.sum(-1, keepdim=True)
    in_mask = mask if in_dist is None else mask & in_dist
    row = metrics.uncertainty_report(probs[in_mask], labels[in_mask])
    row['ood_auroc'] = row['ood_fpr95'] = math.nan
    if in_dist is not None:
        confidence = probs[mask].max(-1).values
        positives = in_dist[mask]
        row['ood_auroc'] = metrics.auroc(confidence, positives)
        row['ood_fpr95'] = metrics.fpr_at_tpr(confidence, positives, 0.95)
    return row


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------


def _key(row: Dict[str, Any]):
    return tuple(str(row[column]) for column in KEY_COLUMNS)


def read_rows(path: str) -> List[Dict[str, str]]:
    r"""The rows of an uncertainty results file, validated
    (:func:`benchmarks.harness.results.read_results`)."""
    return read_results(path, KEY_COLUMNS, NUMERIC_COLUMNS)


def format_value(value: Any) -> str:
    r"""A cell: floats as ``repr`` (``nan`` blank), the rest as ``str``."""
    if isinstance(value, float):
        return '' if math.isnan(value) else repr(value)
    return str(value)


def extra_loss(method: str, model: torch.nn.Module,
               config: UncertaintyConfig, num_train: int
               ) -> Optional[Callable[[], Tensor]]:
    r"""What :obj:`method` adds to the training NLL after each forward pass:
    :math:`\beta\,\mathrm{KL}/N_{train}` for MIKAN,
    :math:`\eta\,L_{\mathrm{ksvd}} + \beta\,\mathrm{KL}/N_{train}` for
    KEPGATConv, nothing (:obj:`None`) for the GAT methods."""
    from ikgat.nn import kl_divergence
    if method == 'mikan':
        return lambda: (config.mikan_beta * kl_divergence(model) /
                        num_train)
    if method == 'kep':
        from ikgat.nn.conv.kep_gat_conv import ksvd_loss
        return lambda: (config.kep_eta_ksvd * ksvd_loss(model) +
                        config.kep_beta * kl_divergence(model) / num_train)
    return None


def run_unit(bench, setting: str, seed: int, methods: Sequence[str],
             config: UncertaintyConfig, protocol: Dict[str, Any],
             num_held_out: int) -> List[Dict[str, Any]]:
    r"""Train and evaluate :obj:`methods` (a GAT group, ``mikan`` or
    ``kep``) of one (dataset, setting, seed); return their rows."""
    data, num_classes = bench.data, bench.num_classes
    in_dist = None
    held_out = ''
    if setting == 'ood':
        data, in_dist = held_out_split(data, num_classes, num_held_out)
        num_classes -= num_held_out
        held_out = ' '.join(str(c) for c in range(num_classes,
                                                  num_classes + num_held_out))
    family = methods[0]
    seed_everything(seed)
    device = data.x.device
    model = build(family, bench.num_features, num_classes, protocol,
                  config).to(device)
    num_train = max(int(data.train_mask.sum()), 1)
    trained = train(model, data, protocol,
                    extra_loss(family, model, config, num_train))
    labels = data.y.clamp(min=0)
    rows = []
    for method in methods:
        start = time.perf_counter()
        temperature = math.nan
        if method == 'gat-ts':
            with torch.no_grad():
                logits = trained.model(data.x, data.edge_index)
            temperature = fit_temperature(logits[data.val_mask],
                                          data.y[data.val_mask])
        torch.manual_seed(seed)
        generator = torch.Generator(device=device).manual_seed(seed)
        probs = predictive_probabilities(
            method, trained.model, data, config,
            temperature=1.0 if math.isnan(temperature) else temperature,
            generator=generator)
        row: Dict[str, Any] = dict(
            dataset=bench.name, method=method, setting=setting, seed=seed,
            held_out=held_out, temperature=temperature,
            epochs=trained.epochs, best_epoch=trained.best_epoch,
            seconds=trained.seconds + time.perf_counter() - start,
            config=config.label(method), device=str(device))
        row.update(report(probs.cpu(), labels.cpu(), data.test_mask.cpu(),
                          None if in_dist is None else in_dist.cpu()))
        rows.append(row)
    return rows


def run_uncertainty(datasets: Sequence[str], methods: Sequence[str],
                    settings: Sequence[str], seeds: Sequence[int],
                    results: str = DEFAULT_RESULTS,
                    config: Optional[UncertaintyConfig] = None,
                    resume: bool = True,
                    load_dataset: Optional[Callable[[str], Any]] = None,
                    protocol_overrides: Optional[Dict[str, Any]] = None,
                    ood_classes: Optional[Dict[str, int]] = None,
                    log: Callable[[str], None] = print,
                    device: str = 'auto') -> List[Dict[str, Any]]:
    r"""Run every (dataset, seed, setting, method), seeds outermost within
    a dataset so that each finished seed adds complete rows; append them to
    :obj:`results`; skip the rows already there when :obj:`resume`.
    :obj:`device` is ``'cpu'``, ``'cuda'`` or ``'auto'`` (CUDA when
    available)."""
    torch_device = resolve_device(device)
    config = config or UncertaintyConfig()
    load_dataset = load_dataset or load_planetoid_data
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"Unknown methods {sorted(unknown)}; choose from "
                         f"{list(METHODS)}")
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise ValueError(f"Unknown settings {sorted(unknown)}; choose from "
                         f"{list(SETTINGS)}")
    writer = ResultsWriter(results, COLUMNS)  # repairs a torn last row
    done = {_key(row) for row in read_rows(results)} if resume else set()
    commit = git_commit()
    overrides = dict(protocol_overrides or {})
    if config.epochs is not None:
        overrides['epochs'] = config.epochs
    if config.patience is not None:
        overrides['patience'] = config.patience
    groups = [[m for m in methods if m in GAT_METHODS]] + [
        [m] for m in methods if m not in GAT_METHODS]
    groups = [group for group in groups if group]
    written: List[Dict[str, Any]] = []
    for name in datasets:
        bench = load_dataset(name)
        bench = bench._replace(data=bench.data.to(torch_device))
        protocol = protocol_for(bench.name, **overrides)
        held = (ood_classes or {}).get(
            bench.name, DEFAULT_OOD_CLASSES.get(bench.name, 1))
        for seed in seeds:
            for setting in settings:
                for group in groups:
                    todo = [m for m in group if (
                        bench.name, m, setting, str(seed),
                        config.label(m)) not in done]
                    if not todo:
                        continue
                    # A GAT group trains once for all its methods:
                    rows = run_unit(bench, setting, seed, todo, config,
                                    protocol, held)
                    for row in rows:
                        row['git_commit'] = commit
                        writer.write({k: format_value(v)
                                      for k, v in row.items()})
                        done.add(_key({k: str(v) for k, v in
                                       row.items()}))
                        written.append(row)
                        log(f"{row['dataset']} {row['setting']} seed "
                            f"{seed} {row['method']}: acc "
                            f"{row['accuracy']:.4f} auroc "
                            f"{row['auroc']:.4f} ece {row['ece']:.4f}"
                            + (f" ood_auroc {row['ood_auroc']:.4f}"
                               if setting == 'ood' else '') +
                            f" ({row['seconds']:.0f}s, "
                            f"{row['epochs']} epochs)")
    return written


# --------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------

#: Column title, metric, scale for the Markdown tables (fractions are
#: shown as percentages, AURC and EAURC per mille as the KEP-SVGP paper).
MIS_COLUMNS = [('Acc % ↑', 'accuracy', 100), ('AURC ‰ ↓', 'aurc', 1000),
               ('EAURC ‰ ↓', 'eaurc', 1000), ('AUROC % ↑', 'auroc', 100),
               ('FPR95 % ↓', 'fpr95', 100),
               ('AUPR-S % ↑', 'aupr_success', 100),
               ('AUPR-E % ↑', 'aupr_error', 100), ('ECE % ↓', 'ece', 100),
               ('NLL ↓', 'nll', 1), ('Brier ↓', 'brier', 1)]
OOD_COLUMNS = [('ID acc % ↑', 'accuracy', 100),
               ('OOD AUROC % ↑', 'ood_auroc', 100),
               ('OOD FPR95 % ↓', 'ood_fpr95', 100),
               ('ID misc. AUROC % ↑', 'auroc', 100),
               ('ID ECE % ↓', 'ece', 100)]


def _mean_std(values: List[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return '–'
    mean = sum(values) / len(values)
    if len(values) < 2:
        return f'{mean:.2f}'
    std = math.sqrt(sum((v - mean)**2 for v in values) / (len(values) - 1))
    return f'{mean:.2f} ± {std:.2f}'


def render_summary(rows: Iterable[Dict[str, str]], command: str = '') -> str:
    r"""Markdown: per setting, one table of dataset × method with mean ±
    std (sample, ``n - 1``) over seeds, the seeds counted.  A method run
    with several settings gets one line per setting, labelled with it."""
    rows = list(rows)
    configs_of: Dict[str, set] = defaultdict(set)
    for row in rows:
        configs_of[row['method']].add(row.get('config', ''))

    def label(row: Dict[str, str]) -> str:
        if len(configs_of[row['method']]) < 2:
            return row['method']
        return f"{row['method']} {row.get('config', '')}"

    cells: Dict[tuple, List[Dict[str, str]]] = defaultdict(list)
    for row in rows:
        cells[(row['setting'], row['dataset'], label(row))].append(row)
    order = {name: i for i, name in enumerate(['Cora', 'CiteSeer',
                                                'PubMed'])}
    lines = ['# Uncertainty benchmark (Planetoid, public split)', '']
    if command:
        lines += ['Rows written by (resumable; `--summary-only` renders this '
                  'file from the CSV alone):', '', '```', command, '```', '']
    lines += [
        'Mean ± sample std over seeds (n = seeds run); test split. '
        'Confidence = MSP of the predictive distribution. Misclassification '
        'metrics from `ikgat.metrics` (AUROC/FPR95/AUPR with correct '
        'predictions as positives, AUPR-E with errors as positives, ECE 15 '
        'bins). OOD: the last classes (column "held out") are removed from '
        'the train/validation masks; MSP ranks in- (positive) versus '
        'out-of-distribution test nodes.', '', row_commits(rows), '']
    for setting, columns in (('misclassification', MIS_COLUMNS),
                             ('ood', OOD_COLUMNS)):
        keys = sorted({(d, m) for s, d, m in cells if s == setting},
                      key=lambda k: (order.get(k[0], 9), k[0],
                                     METHODS.index(k[1].split()[0])
                                     if k[1].split()[0] in METHODS else 99,
                                     k[1]))
        if not keys:
            continue
        title = ('Misclassification detection and calibration'
                 if setting == 'misclassification' else
                 'Out-of-distribution detection (held-out classes)')
        lines += [f'## {title}', '']
        header = ['dataset', 'method', 'n']
        if setting == 'ood':
            header.append('held out')
        header += [name for name, _, _ in columns]
        lines.append('| ' + ' | '.join(header) + ' |')
        lines.append('|' + '---|' * len(header))
        for dataset, method in keys:
            group = cells[(setting, dataset, method)]
            values = [dataset, method, str(len({r['seed'] for r in group}))]
            if setting == 'ood':
                values.append(group[0].get('held_out', ''))
            for _, metric, scale in columns:
                numbers = [float(r[metric]) * scale for r in group
                           if r.get(metric, '') != '']
                values.append(_mean_std(numbers))
            lines.append('| ' + ' | '.join(values) + ' |')
        lines.append('')
    configs = sorted({(r['method'], r['config']) for r in rows})
    if configs:
        lines += ['Settings per method: ' + '; '.join(
            f'`{m}` {c}' for m, c in configs if c not in ('', '{}')), '']
    return '\n'.join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def tiny_loader(name: str):
    data = toy_citation_graph(num_nodes=60, num_classes=4, num_train=16,
                              num_val=16)
    return BenchData(name, data, data.num_features, 4)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--datasets', nargs='+',
                        default=['Cora', 'CiteSeer', 'PubMed'])
    parser.add_argument('--methods', nargs='+', default=list(METHODS),
                        choices=METHODS)
    parser.add_argument('--settings', nargs='+', default=list(SETTINGS),
                        choices=SETTINGS)
    parser.add_argument('--seeds', type=parse_seeds, default='0-9',
                        help="e.g. '0-9' or '0,3,5'")
    parser.add_argument('--results', default=None,
                        help=f'CSV of rows (default: {DEFAULT_RESULTS}; '
                        f'a temporary folder with --smoke)')
    parser.add_argument('--summary', default=None,
                        help=f'Markdown summary (default: {DEFAULT_SUMMARY})')
    parser.add_argument('--resume', action='store_true',
                        help='skip the rows already in --results')
    parser.add_argument('--summary-only', action='store_true',
                        help='only rewrite the summary from --results')
    parser.add_argument('--smoke', action='store_true',
                        help='a tiny synthetic graph, a few epochs: seconds')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch CPU threads')
    parser.add_argument('--device', default='auto',
                        help="'cpu', 'cuda' or 'auto' (CUDA when available)")
    parser.add_argument('--node-path', default='eager', choices=NODE_PATHS,
                        help="how MIKAN's random features evaluate their "
                        "node-wise term: speed only (compile: torch.compile,"
                        " fastest on CPU)")
    parser.add_argument('--epochs', type=int, default=None,
                        help="override the protocol's maximum epochs")
    parser.add_argument('--patience', type=int, default=None,
                        help="override the protocol's patience")
    defaults = UncertaintyConfig()
    for name in ('mc_dropout_passes', 'mikan_num_samples',
                 'mikan_num_features', 'mikan_beta', 'kep_passes',
                 'kep_eta_ksvd', 'kep_beta'):
        value = getattr(defaults, name)
        parser.add_argument('--' + name.replace('_', '-'), type=type(value),
                            default=value)
    parser.add_argument('--mikan-output-magnitude', action='store_true',
                        help="keep MIKAN's magnitude term in the output "
                        "layer (the paper's model; under-confident)")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> List[dict]:
    args = parse_args(argv)
    try:
        return _main(args, argv)
    except MalformedResults as error:  # one line, as for a usage error
        print(f'error: {error}', file=sys.stderr)
        raise SystemExit(2) from None


def _main(args: argparse.Namespace, argv: Optional[List[str]]
          ) -> List[dict]:
    torch.set_num_threads(args.threads)
    command = 'python -m benchmarks.uncertainty ' + ' '.join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
        if a != '--summary-only')
    load_dataset = None
    if args.smoke:
        folder = tempfile.mkdtemp(prefix='ikgat-uncertainty-')
        results = args.results or osp.join(folder, 'uncertainty.csv')
        summary = args.summary or osp.join(folder, 'uncertainty.md')
        datasets = ['Tiny']
        load_dataset = tiny_loader
        epochs = args.epochs or 8
        patience = args.patience or 4
        seeds = args.seeds if args.seeds != list(range(10)) else [0]
        config_kwargs = dict(mc_dropout_passes=3, mikan_num_samples=2,
                             mikan_num_features=8, kep_passes=2)
    else:
        results = args.results or DEFAULT_RESULTS
        summary = args.summary or DEFAULT_SUMMARY
        datasets, seeds = args.datasets, args.seeds
        epochs, patience = args.epochs, args.patience
        config_kwargs = dict(mc_dropout_passes=args.mc_dropout_passes,
                             mikan_num_samples=args.mikan_num_samples,
                             mikan_num_features=args.mikan_num_features,
                             kep_passes=args.kep_passes)
    config = UncertaintyConfig(
        mikan_beta=args.mikan_beta,
        mikan_output_magnitude=args.mikan_output_magnitude,
        kep_eta_ksvd=args.kep_eta_ksvd, kep_beta=args.kep_beta,
        epochs=epochs, patience=patience, node_path=args.node_path,
        **config_kwargs)
    rows: List[dict] = []
    if not args.summary_only:
        rows = run_uncertainty(datasets, args.methods, args.settings, seeds,
                               results=results, config=config,
                               resume=args.resume,
                               load_dataset=load_dataset,
                               ood_classes={'Tiny': 1} if args.smoke else
                               None, device=args.device)
    text = render_summary(read_rows(results), command=command)
    write_text(summary, text + '\n')
    print(f'{len(rows)} new rows in {results}; summary in {summary}')
    return rows


if __name__ == '__main__':
    main()
