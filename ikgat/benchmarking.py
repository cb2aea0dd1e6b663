r"""The Planetoid benchmark harness behind ``ikgat bench`` and
``benchmarks/planetoid.py``, in the style of PyG's ``benchmark/citation``:
one table of models, the GAT paper's protocol as defaults, one shared
train/eval loop (:func:`ikgat.training.train_node_classifier`), results
appended as CSV rows and summarised as Markdown.

The pieces, top to bottom:

* :data:`MODELS`, the models table (``gat`` ... ``mikan``), and
  :data:`PROTOCOLS`, the GAT paper's settings per dataset.  This is benchmark
  configuration; the layers in :mod:`ikgat.nn` know nothing about it.
* :func:`run_benchmark` runs (dataset, model, seed) combinations and appends
  one CSV row per run (flushed at once), skipping finished rows with
  ``resume=True``.  The dataset loader is injectable (tests use a tiny graph).
* :func:`run_search` runs a small grid over :math:`p`, :math:`R` and
  :math:`\beta` and :func:`select_hyperparameters` picks, per dataset and
  model, the configuration with the best *mean validation accuracy*.  Search
  runs do not even record a test accuracy: the test split selects nothing.
* :func:`mean_std_ci` (Student-t confidence intervals without scipy) and
  :func:`render_summary`, the Markdown table beside the paper's numbers.

Model selection inside a run follows the GAT protocol: early stopping on the
validation split, test accuracy read at the best validation epoch.
"""
import argparse
import csv
import math
import os
import os.path as osp
import random
import subprocess
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import product
from typing import (Any, Callable, Dict, Iterable, List, NamedTuple, Optional,
                    Sequence, Tuple)

import torch

from ikgat.kernels.random_features import NODE_PATHS, check_node_path

# --------------------------------------------------------------------------
# Models and protocol
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    r"""One entry of the models table.

    Args:
        name: The name used on the command line and in the results.
        layer: ``'gat'`` (PyG's GATConv), ``'ikgat'`` (:class:`IKGATConv`
            with :obj:`kernel`) or ``'mikan'`` (:class:`ikgat.MIKANConv`).
        kernel: The IKGATConv kernel name.
        uses_p: Whether the :math:`L^p` magnitude (and so :math:`p`) applies.
        uses_num_features: Whether the kernel has :math:`R` spectral points.
        variational: Whether the loss adds :math:`\beta \cdot \mathrm{KL}`.
        fixed_p: A :math:`p` that the model defines (``gat-rbf``: 2).
        paper: The key of :data:`PAPER_RESULTS` to print beside it.
        description: One line for the Markdown summary.
    """
    name: str
    layer: str
    kernel: Optional[str] = None
    uses_p: bool = False
    uses_num_features: bool = False
    variational: bool = False
    fixed_p: Optional[float] = None
    paper: Optional[str] = None
    description: str = ''


_MODEL_SPECS = [
    ModelSpec('gat', 'gat', paper='GAT',
              description="PyG's GATConv (our own GAT run)"),
    ModelSpec('gat-rbf', 'ikgat', 'rbf', fixed_p=2.0, paper='GAT',
              description='IKGATConv(kernel="rbf", p=2): GAT written as '
              'kernel x magnitude, the same function as GATConv'),
    ModelSpec('rbf-only', 'ikgat', 'rbf_only',
              description='RBF similarity without the magnitude term'),
    ModelSpec('expsin', 'ikgat', 'expsin', uses_p=True,
              description='exp-sine-squared similarity, L^p magnitude'),
    ModelSpec('linear', 'ikgat', 'linear', uses_p=True,
              description='linear (elu+1 feature) similarity, L^p magnitude'),
    ModelSpec('ika', 'ikgat', 'rff', uses_p=True, uses_num_features=True,
              description='IKA: stationary random Fourier features (fixed)'),
    ModelSpec('ika-ns', 'ikgat', 'rff_ns', uses_p=True,
              uses_num_features=True,
              description='IKA: non-stationary random Fourier features'),
    ModelSpec('ikan-direct', 'ikgat', 'direct', uses_p=True,
              uses_num_features=True, paper='IKAN-direct',
              description='IKAN-direct: learned spectral points'),
    ModelSpec('ikan', 'ikgat', 'implicit', uses_p=True,
              uses_num_features=True, variational=True,
              description='IKAN: implicit spectral density, beta*KL'),
    ModelSpec('mikan', 'mikan', uses_p=True, uses_num_features=True,
              variational=True, paper='MIKAN',
              description='MIKAN: heads coupled by a Gaussian copula, '
              'beta*KL'),
]
#: The models table, by name, in the order of the Markdown tables.
MODELS: 'OrderedDict[str, ModelSpec]' = OrderedDict(
    (spec.name, spec) for spec in _MODEL_SPECS)

#: Public-split test accuracy (%) from the papers: ``(mean, std)``.
PAPER_RESULTS: Dict[str, Dict[str, Tuple[float, float]]] = {
    'GAT': {'Cora': (83.0, 0.7), 'CiteSeer': (72.5, 0.7),
            'PubMed': (79.0, 0.3)},
    'IKAN-direct': {'Cora': (83.3, 0.7), 'CiteSeer': (72.8, 1.0),
                    'PubMed': (79.2, 0.4)},
    'MIKAN': {'Cora': (83.4, 0.6), 'CiteSeer': (72.9, 0.8),
              'PubMed': (79.1, 0.6)},
}
PAPER_SOURCES = {'GAT': 'GAT paper, 100 runs',
                 'IKAN-direct': 'IKA paper (AAAI)',
                 'MIKAN': 'IKA paper (AAAI)'}

#: The GAT paper's protocol.  Cora and CiteSeer share it; PubMed uses a
#: larger learning rate and weight decay and 8 averaged output heads.
GAT_PROTOCOL: Dict[str, Any] = dict(lr=0.005, weight_decay=5e-4, hidden=8,
                                    heads=8, out_heads=1, dropout=0.6,
                                    epochs=1000, patience=100)
PROTOCOLS: Dict[str, Dict[str, Any]] = {
    'Cora': dict(GAT_PROTOCOL),
    'CiteSeer': dict(GAT_PROTOCOL),
    'PubMed': dict(GAT_PROTOCOL, lr=0.01, weight_decay=1e-3, out_heads=8),
}

#: Defaults of the kernel hyperparameters when neither a flag nor a search
#: result gives one: the authors' R = 64 and KL weight 0.1, and p = 2 (GAT).
DEFAULT_HYPERPARAMETERS: Dict[str, float] = dict(p=2.0, R=64, beta=0.1)

#: The search grid of the issue (validation accuracy only).
SEARCH_GRID: Dict[str, Tuple[float, ...]] = dict(p=(1.5, 2.0, 2.5, 3.0),
                                                 R=(32, 64),
                                                 beta=(0.01, 0.1))


def protocol_for(dataset: str, **overrides: Any) -> Dict[str, Any]:
    r"""The GAT protocol of :obj:`dataset` (Cora's for other names), with
    the non-:obj:`None` :obj:`overrides` applied."""
    protocol = dict(PROTOCOLS.get(canonical_dataset(dataset), GAT_PROTOCOL))
    unknown = set(overrides) - set(protocol)
    if unknown:
        raise ValueError(f'Unknown protocol settings {sorted(unknown)}; '
                         f'choose from {sorted(protocol)}')
    protocol.update({k: v for k, v in overrides.items() if v is not None})
    return protocol


def canonical_dataset(name: str) -> str:
    r"""``'cora'`` → ``'Cora'`` etc.; other names are returned unchanged."""
    from ikgat.datasets import PLANETOID_NAMES
    return PLANETOID_NAMES.get(str(name).lower(), str(name))


def check_models(names: Iterable[str]) -> List[str]:
    names = list(names)
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise ValueError(f'Unknown models {unknown}; choose from '
                         f'{list(MODELS)}')
    return names


def model_hyperparameters(model: str, p: Optional[float] = None,
                          R: Optional[int] = None,
                          beta: Optional[float] = None
                          ) -> Dict[str, Optional[float]]:
    r"""The ``p``, ``R`` and ``beta`` that :obj:`model` uses: the given
    values, else :data:`DEFAULT_HYPERPARAMETERS`; :obj:`None` for those that
    do not apply to it (they are left blank in the results)."""
    spec = MODELS[model]
    if spec.fixed_p is not None:
        p_used: Optional[float] = spec.fixed_p
    elif spec.uses_p:
        p_used = float(DEFAULT_HYPERPARAMETERS['p'] if p is None else p)
    else:
        p_used = None
    R_used = (int(DEFAULT_HYPERPARAMETERS['R'] if R is None else R)
              if spec.uses_num_features else None)
    beta_used = (float(DEFAULT_HYPERPARAMETERS['beta'] if beta is None else
                       beta) if spec.variational else None)
    return dict(p=p_used, R=R_used, beta=beta_used)


def conv_factory(model: str, p: Optional[float] = None,
                 R: Optional[int] = None, node_path: str = 'eager'
                 ) -> Tuple[type, Dict[str, Any]]:
    r"""Return ``(conv_class, conv_kwargs)`` of :obj:`model` for
    :class:`ikgat.models.TwoLayerGAT`.  :obj:`node_path` is how the
    random-feature kernels evaluate their node-wise term (one of
    :data:`ikgat.kernels.random_features.NODE_PATHS`): it changes speed and
    memory, not the function computed."""
    spec = MODELS[check_models([model])[0]]
    if spec.layer == 'gat':
        from torch_geometric.nn import GATConv
        return GATConv, {}
    hyper = model_hyperparameters(model, p, R)
    kwargs: Dict[str, Any] = {}
    if hyper['p'] is not None:
        kwargs['p'] = hyper['p']
    if hyper['R'] is not None:
        kwargs['num_features'] = hyper['R']
        kwargs['kernel_kwargs'] = dict(
            node_path=check_node_path(model, node_path))
    if spec.layer == 'mikan':
        from ikgat import MIKANConv
        return MIKANConv, kwargs
    from ikgat.nn import IKGATConv
    kwargs['kernel'] = spec.kernel
    return IKGATConv, kwargs


def build_model(model: str, in_channels: int, out_channels: int,
                protocol: Dict[str, Any], p: Optional[float] = None,
                R: Optional[int] = None,
                node_path: str = 'eager') -> torch.nn.Module:
    r"""The GAT paper's two-layer architecture with :obj:`model`'s layer.

    ``gat`` and ``gat-rbf`` draw their initial parameters from the global
    RNG in the same order (IKGATConv creates GATConv's parameters in GATConv's
    order and the RBF kernel draws nothing), so after the same
    ``torch.manual_seed`` they start from identical weights: their
    equivalence is checked by training, not by copying a state dict.
    """
    from ikgat.models import TwoLayerGAT
    conv, conv_kwargs = conv_factory(model, p, R, node_path)
    return TwoLayerGAT(in_channels, protocol['hidden'], out_channels, conv,
                       heads=protocol['heads'],
                       out_heads=protocol['out_heads'],
                       dropout=protocol['dropout'], conv_kwargs=conv_kwargs)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed % 2**32)
    except ImportError:  # pragma: no cover
        pass


# --------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------


class BenchData(NamedTuple):
    r"""What a run needs of a dataset: a graph with ``x``, ``edge_index``,
    ``y`` and the three masks, and its sizes."""
    name: str
    data: Any
    num_features: int
    num_classes: int


def load_planetoid_data(name: str, root: Optional[str] = None) -> BenchData:
    r"""The public split of a Planetoid dataset with row-normalised
    features (GAT protocol)."""
    import torch_geometric.transforms as T

    from ikgat.datasets import load_planetoid
    dataset = load_planetoid(name, root, transform=T.NormalizeFeatures())
    return BenchData(canonical_dataset(name), dataset[0],
                     dataset.num_features, dataset.num_classes)


# --------------------------------------------------------------------------
# Results files
# --------------------------------------------------------------------------

#: Columns of ``planetoid.csv`` and ``search.csv``.  Accuracies are
#: fractions; ``p``, ``R`` and ``beta`` are blank where they do not apply;
#: ``test_acc`` is blank for search runs.
COLUMNS = ['dataset', 'model', 'tag', 'seed', 'p', 'R', 'beta', 'lr',
           'weight_decay', 'val_acc', 'test_acc', 'epochs', 'best_epoch',
           'seconds', 'num_parameters', 'device', 'git_commit']
#: The columns that identify a run for ``--resume``.
KEY_COLUMNS = ('dataset', 'model', 'seed', 'p', 'R', 'beta', 'tag')

RESULTS_DIR = osp.join('benchmarks', 'results')
DEFAULT_RESULTS = osp.join(RESULTS_DIR, 'planetoid.csv')
DEFAULT_SUMMARY = osp.join(RESULTS_DIR, 'planetoid.md')
DEFAULT_SEARCH_RESULTS = osp.join(RESULTS_DIR, 'search.csv')
DEFAULT_SEARCH_SUMMARY = osp.join(RESULTS_DIR, 'search.md')


def _format_float(value: Any) -> str:
    return '' if value is None or value == '' else repr(float(value))


def _format_int(value: Any) -> str:
    return '' if value is None or value == '' else str(int(float(value)))


def run_key(row: Dict[str, Any]) -> Tuple[str, ...]:
    r"""The identity of a run: dataset, model, seed, p, R, beta and tag,
    normalised so that ``2``, ``'2.0'`` and ``2.0`` compare equal."""
    return (str(row['dataset']), str(row['model']), _format_int(row['seed']),
            _format_float(row['p']), _format_int(row['R']),
            _format_float(row['beta']), str(row.get('tag', '')))


def read_results(path: str) -> List[Dict[str, str]]:
    r"""The rows of a results CSV (an empty list when it does not exist)."""
    if not osp.isfile(path):
        return []
    with open(path, newline='') as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in KEY_COLUMNS if c not in header]
        if missing:
            raise ValueError(f'{path} is not a results file of this harness: '
                             f'it lacks the columns {missing}')
        return list(reader)


class ResultsWriter:
    r"""Appends rows to a CSV (header written once), flushing each row so
    that an interrupted benchmark keeps every finished run."""
    def __init__(self, path: str, columns: Sequence[str] = COLUMNS):
        self.path = path
        self.columns = list(columns)
        if osp.isfile(path) and osp.getsize(path) > 0:
            with open(path, newline='') as f:
                header = next(csv.reader(f), [])
            if header != self.columns:
                raise ValueError(
                    f'{path} has the columns {header}, but this harness '
                    f'writes {self.columns}; pass another results path')

    def write(self, row: Dict[str, Any]) -> None:
        folder = osp.dirname(self.path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        new = not osp.isfile(self.path) or osp.getsize(self.path) == 0
        with open(self.path, 'a', newline='') as f:
            writer = csv.DictWriter(f, fieldnames=self.columns,
                                    extrasaction='ignore')
            if new:
                writer.writeheader()
            writer.writerow(row)
            f.flush()


_GIT_COMMIT: Optional[str] = None


def git_commit() -> str:
    r"""The short commit of the ikgat checkout, ``+dirty`` when tracked files
    other than the benchmark results (``benchmarks/results/``, which runs
    append to) differ from it, ``'unknown'`` outside a git checkout.  Only
    reads (no index refresh is written).  A copy of a checkout without its
    ``.git`` (e.g. on a remote machine) names its commit in the environment
    variable ``IKGAT_GIT_COMMIT``."""
    global _GIT_COMMIT
    if _GIT_COMMIT is None and os.environ.get('IKGAT_GIT_COMMIT'):
        _GIT_COMMIT = os.environ['IKGAT_GIT_COMMIT']
    if _GIT_COMMIT is None:
        folder = osp.dirname(osp.dirname(osp.abspath(__file__)))
        env = dict(os.environ, GIT_OPTIONAL_LOCKS='0')
        try:
            commit = subprocess.run(
                ['git', '-C', folder, 'rev-parse', '--short=12', 'HEAD'],
                capture_output=True, text=True, check=True, env=env,
                timeout=10).stdout.strip()
            dirty = subprocess.run(
                ['git', '-C', folder, 'status', '--porcelain',
                 '--untracked-files=no', '--', '.',
                 ':(exclude)benchmarks/results'], capture_output=True,
                text=True, check=True, env=env, timeout=30).stdout.strip()
            _GIT_COMMIT = commit + ('+dirty' if dirty else '')
        except (OSError, subprocess.SubprocessError):
            _GIT_COMMIT = 'unknown'
    return _GIT_COMMIT


# --------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------


class Progress:
    r"""A progress display over runs and, inside each run, over epochs.

    On a terminal: tqdm's bars when tqdm is installed (it is not a
    dependency), else one self-rewriting stderr line.  Elsewhere (logs, CI):
    one stderr line per finished run.  ``enabled=False`` prints nothing."""
    def __init__(self, total_runs: int, enabled: bool = True):
        self.enabled = enabled
        self.total = total_runs
        self.done = 0
        self.label = ''
        self.max_epochs = 0
        self.runs = self.epochs = None
        self.live = enabled and sys.stderr.isatty()
        self._last_draw = 0.0
        if self.live:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.runs = tqdm(total=total_runs, desc='runs', unit='run',
                                 position=0)
                self.epochs = tqdm(total=0, desc='epochs', unit='ep',
                                   position=1, leave=False)

    def start_run(self, label: str, max_epochs: int) -> None:
        self.label, self.max_epochs = label, max_epochs
        if self.epochs is not None:
            self.epochs.reset(total=max_epochs)
            self.epochs.set_description(label)

    def epoch(self, epoch: int, val_acc: float, val_loss: float) -> None:
        if self.epochs is not None:
            self.epochs.update(1)
            if epoch % 10 == 0:
                self.epochs.set_postfix(val_acc=f'{val_acc:.3f}',
                                        refresh=False)
        elif self.live and time.monotonic() - self._last_draw > 0.25:
            self._last_draw = time.monotonic()
            print(f'\r[run {self.done + 1}/{self.total}] {self.label} epoch '
                  f'{epoch}/{self.max_epochs} val acc {val_acc:.4f}\033[K',
                  end='', file=sys.stderr, flush=True)

    def end_run(self, message: str) -> None:
        self.done += 1
        if self.runs is not None:
            self.runs.update(1)
            self.runs.write(message)
        elif self.enabled:
            start = '\r\033[K' if self.live else ''
            print(f'{start}[{self.done}/{self.total}] {message}',
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        for bar in (self.epochs, self.runs):
            if bar is not None:
                bar.close()


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def parse_seeds(text: str) -> List[int]:
    r"""``'20'`` → 0..19; ``'0-19'`` → 0..19; ``'3,5,10-12'`` → 3, 5,
    10, 11, 12."""
    text = str(text).strip()
    if text.isdigit():
        return list(range(int(text)))
    seeds: List[int] = []
    for part in text.split(','):
        part = part.strip()
        try:
            if '-' in part:
                low, high = (int(v) for v in part.split('-'))
                if high < low:
                    raise ValueError
                seeds.extend(range(low, high + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(
                f'Invalid seeds {text!r}: give a count (20), a range (0-19) '
                f'or a list (0,3,10-12)') from None
    return list(dict.fromkeys(seeds))


def compact_seeds(seeds: Iterable[int]) -> str:
    r"""The inverse of :func:`parse_seeds`: ``[0, 1, 2, 5]`` → ``'0-2,5'``."""
    values = sorted(set(int(s) for s in seeds))
    parts, start = [], None
    for i, value in enumerate(values):
        if start is None:
            start = value
        if i + 1 == len(values) or values[i + 1] != value + 1:
            parts.append(str(start) if start == value else f'{start}-{value}')
            start = None
    return ','.join(parts)


def resolve_device(device: str = 'auto') -> torch.device:
    if device == 'auto':
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    return torch.device(device)


def run_one(bench: BenchData, model: str, seed: int, protocol: Dict[str, Any],
            hyper: Dict[str, Optional[float]], device: torch.device,
            tag: str = '', record_test: bool = True,
            on_epoch: Optional[Callable[[int, float, float], None]] = None,
            checkpoint_dir: Optional[str] = None,
            node_path: str = 'eager') -> Dict[str, Any]:
    r"""Train one model from :obj:`seed` and return its results row; with
    :obj:`checkpoint_dir`, also save the best-validation weights there
    (readable by ``ikgat plot``)."""
    from ikgat.training import train_node_classifier
    seed_everything(seed)
    net = build_model(model, bench.num_features, bench.num_classes, protocol,
                      p=hyper['p'], R=hyper['R'],
                      node_path=node_path).to(device)
    data = bench.data
    result = train_node_classifier(
        net, data, lr=protocol['lr'], weight_decay=protocol['weight_decay'],
        epochs=protocol['epochs'], patience=protocol['patience'],
        beta=float(hyper['beta'] or 0.0), on_epoch=on_epoch,
        keep_best_state=checkpoint_dir is not None)
    row = dict(
        dataset=bench.name, model=model, tag=tag, seed=int(seed),
        p=_format_float(hyper['p']), R=_format_int(hyper['R']),
        beta=_format_float(hyper['beta']), lr=repr(float(protocol['lr'])),
        weight_decay=repr(float(protocol['weight_decay'])),
        val_acc=f'{result.val_acc:.6f}',
        test_acc=f'{result.test_acc:.6f}' if record_test else '',
        epochs=result.epochs, best_epoch=result.best_epoch,
        seconds=f'{result.seconds:.3f}',
        num_parameters=sum(p.numel() for p in net.parameters()),
        device=str(device), git_commit=git_commit())
    if checkpoint_dir is not None:
        from ikgat.checkpoints import save_checkpoint
        name = (f"{bench.name}_{model}_p{row['p'] or '-'}_R{row['R'] or '-'}"
                f"_seed{seed}_{tag or 'untagged'}.pt")
        save_checkpoint(osp.join(checkpoint_dir, name), net, bench.name,
                        conv_factory(model, hyper['p'], hyper['R'],
                                     node_path)[1],
                        info=row, state_dict=result.state_dict)
    return row


@dataclass
class RunPlan:
    r"""One planned run: dataset, model, seed, hyperparameters."""
    dataset: str
    model: str
    seed: int
    hyper: Dict[str, Optional[float]] = field(default_factory=dict)


def run_plans(plans: Sequence[RunPlan], results: str, tag: str,
              protocol_overrides: Optional[Dict[str, Any]] = None,
              resume: bool = True, device: str = 'auto',
              progress: bool = True, record_test: bool = True,
              load_dataset: Optional[Callable[[str], BenchData]] = None,
              root: Optional[str] = None,
              checkpoint_dir: Optional[str] = None,
              node_path: str = 'eager') -> List[Dict[str, Any]]:
    r"""Run :obj:`plans` (grouped by dataset, each dataset loaded once),
    appending each finished run to :obj:`results`.  With :obj:`resume`,
    plans whose :data:`KEY_COLUMNS` are already in :obj:`results` are
    skipped.  Returns the rows written by this call."""
    writer = ResultsWriter(results)
    done = {run_key(row) for row in read_results(results)} if resume else set()
    todo = []
    for plan in plans:
        key = run_key(dict(dataset=canonical_dataset(plan.dataset),
                           model=plan.model, seed=plan.seed, tag=tag,
                           **{k: plan.hyper.get(k) for k in ('p', 'R',
                                                              'beta')}))
        if key not in done:
            todo.append(plan)
            done.add(key)  # the same plan twice in one call runs once
    skipped = len(plans) - len(todo)
    if progress and skipped:
        print(f'resume: {skipped} of {len(plans)} runs are already in '
              f'{results}', file=sys.stderr)
    torch_device = resolve_device(device)
    loader = load_dataset or (lambda name: load_planetoid_data(name, root))
    rows: List[Dict[str, Any]] = []
    bar = Progress(len(todo), enabled=progress)
    try:
        by_dataset: Dict[str, List[RunPlan]] = OrderedDict()
        for plan in todo:
            by_dataset.setdefault(plan.dataset, []).append(plan)
        for dataset, dataset_plans in by_dataset.items():
            loaded = loader(dataset)
            bench = loaded._replace(data=loaded.data.to(torch_device))
            protocol = protocol_for(bench.name, **(protocol_overrides or {}))
            for plan in dataset_plans:
                label = f'{bench.name} {plan.model} seed={plan.seed}'
                bar.start_run(label, protocol['epochs'])
                row = run_one(bench, plan.model, plan.seed, protocol,
                              plan.hyper, torch_device, tag=tag,
                              record_test=record_test, on_epoch=bar.epoch,
                              checkpoint_dir=checkpoint_dir,
                              node_path=node_path)
                writer.write(row)
                rows.append(row)
                test = (f', test {float(row["test_acc"]):.4f}'
                        if row['test_acc'] else '')
                bar.end_run(f'{label} {_hyper_label(plan.hyper)}: val '
                            f'{float(row["val_acc"]):.4f}{test}, '
                            f'{row["epochs"]} epochs, {row["seconds"]} s')
    finally:
        bar.close()
    return rows


def _hyper_label(hyper: Dict[str, Optional[float]]) -> str:
    return ' '.join(f'{k}={v:g}' for k, v in hyper.items()
                    if v is not None) or '-'


def run_benchmark(datasets: Sequence[str], models: Sequence[str],
                  seeds: Sequence[int], results: str = DEFAULT_RESULTS,
                  tag: str = 'final', p: Optional[float] = None,
                  R: Optional[int] = None, beta: Optional[float] = None,
                  selected: Optional[Dict[Tuple[str, str], Dict[str, Any]]] =
                  None, protocol_overrides: Optional[Dict[str, Any]] = None,
                  resume: bool = False, device: str = 'auto',
                  progress: bool = True,
                  load_dataset: Optional[Callable[[str], BenchData]] = None,
                  root: Optional[str] = None,
                  checkpoint_dir: Optional[str] = None,
                  node_path: str = 'eager') -> List[Dict[str, Any]]:
    r"""Run every (dataset, model, seed) and append the rows to
    :obj:`results`.

    Hyperparameters: the explicit :obj:`p`, :obj:`R`, :obj:`beta` win, then
    the configuration :obj:`selected` by a search for that (dataset, model)
    (see :func:`select_hyperparameters`), then
    :data:`DEFAULT_HYPERPARAMETERS`.
    """
    check_models(models)
    plans = []
    for dataset in datasets:
        for model in models:
            chosen = (selected or {}).get((canonical_dataset(dataset), model),
                                          {})
            hyper = model_hyperparameters(
                model, p if p is not None else chosen.get('p'),
                R if R is not None else chosen.get('R'),
                beta if beta is not None else chosen.get('beta'))
            plans.extend(RunPlan(dataset, model, seed, hyper)
                         for seed in seeds)
    return run_plans(plans, results, tag, protocol_overrides, resume, device,
                     progress, True, load_dataset, root, checkpoint_dir,
                     node_path)


# --------------------------------------------------------------------------
# Hyperparameter search (validation accuracy only)
# --------------------------------------------------------------------------


def search_configurations(model: str, grid: Optional[Dict[str, Sequence]] =
                          None) -> List[Dict[str, Optional[float]]]:
    r"""The grid points of :obj:`model`: only the axes that apply to it
    (``gat``, ``gat-rbf`` and ``rbf-only`` have a single point)."""
    grid = dict(SEARCH_GRID, **(grid or {}))
    spec = MODELS[model]
    axes = [list(grid['p']) if spec.uses_p and spec.fixed_p is None
            else [None],
            list(grid['R']) if spec.uses_num_features else [None],
            list(grid['beta']) if spec.variational else [None]]
    return [model_hyperparameters(model, p, R, beta)
            for p, R, beta in product(*axes)]


#: The models with more than one grid point (the default of ``search``).
SEARCHABLE_MODELS = [name for name, spec in MODELS.items()
                     if (spec.uses_p and spec.fixed_p is None)
                     or spec.uses_num_features or spec.variational]


def run_search(datasets: Sequence[str], models: Sequence[str],
               seeds: Sequence[int], results: str = DEFAULT_SEARCH_RESULTS,
               summary: Optional[str] = DEFAULT_SEARCH_SUMMARY,
               grid: Optional[Dict[str, Sequence]] = None,
               tag: str = 'search', **kwargs: Any) -> List[Dict[str, Any]]:
    r"""Run the grid of every model with a few seeds, append the rows to
    :obj:`results` (test accuracy left blank) and write the selection to
    :obj:`summary`.  Always resumes: finished grid points are skipped."""
    check_models(models)
    plans = [RunPlan(dataset, model, seed, hyper) for dataset in datasets
             for model in models
             for hyper in search_configurations(model, grid)
             for seed in seeds]
    kwargs.setdefault('resume', True)
    rows = run_plans(plans, results, tag, record_test=False, **{
        k: v for k, v in kwargs.items()
        if k in ('protocol_overrides', 'resume', 'device', 'progress',
                 'load_dataset', 'root', 'node_path')})
    if summary:
        write_text(summary, render_search_summary(read_results(results),
                                                  results=results, tag=tag))
    return rows


class ConfigStats(NamedTuple):
    dataset: str
    model: str
    p: str
    R: str
    beta: str
    val: 'Stats'
    seeds: List[int]


def search_table(rows: Iterable[Dict[str, str]], tag: Optional[str] = None
                 ) -> List[ConfigStats]:
    r"""Validation accuracy (%) per (dataset, model, p, R, beta)."""
    groups: Dict[Tuple[str, ...], Dict[str, float]] = OrderedDict()
    for row in rows:
        if tag is not None and row.get('tag', '') != tag:
            continue
        key = run_key(row)
        group = groups.setdefault(key[:2] + key[3:6], {})
        group.setdefault(key[2], 100 * float(row['val_acc']))  # first per seed
    return [ConfigStats(*key, mean_std_ci(list(vals.values())),
                        sorted(int(s) for s in vals))
            for key, vals in groups.items()]


def select_hyperparameters(rows: Iterable[Dict[str, str]],
                           tag: Optional[str] = None
                           ) -> Dict[Tuple[str, str], Dict[str, Any]]:
    r"""Pick, per (dataset, model), the configuration with the highest mean
    validation accuracy; ties go to the smaller :math:`R`, then the
    :math:`p` closer to 2, then the smaller :math:`\beta`.  Reads only
    ``val_acc``: a test accuracy in the rows changes nothing.

    Returns ``{(dataset, model): {'p', 'R', 'beta', 'val_mean', 'n'}}``.
    """
    best: Dict[Tuple[str, str], Tuple[Tuple, ConfigStats]] = {}
    for stats in search_table(rows, tag):
        order = (-stats.val.mean, float(stats.R or 0),
                 abs(float(stats.p or 2.0) - 2.0), float(stats.beta or 0))
        key = (stats.dataset, stats.model)
        if key not in best or order < best[key][0]:
            best[key] = (order, stats)
    return {key: dict(p=float(s.p) if s.p else None,
                      R=int(s.R) if s.R else None,
                      beta=float(s.beta) if s.beta else None,
                      val_mean=s.val.mean, n=s.val.n)
            for key, (_, s) in best.items()}


def render_search_summary(rows: List[Dict[str, str]], results: str =
                          DEFAULT_SEARCH_RESULTS, tag: Optional[str] = 'search'
                          ) -> str:
    table = search_table(rows, tag)
    chosen = select_hyperparameters(rows, tag)
    lines = [
        '# Hyperparameter search (validation accuracy only)', '',
        f'Rows: `{results}` (tag `{tag}`).  Every configuration is trained '
        'with the GAT protocol and early stopping on validation; the '
        'configuration with the highest **mean validation accuracy** is '
        'chosen per dataset and model (ties: smaller R, p closer to 2, '
        'smaller beta).  Search runs do not record test accuracy, so the '
        'test split selects nothing.', '',
        'Final runs use these choices with `ikgat bench planetoid '
        f'--from-search {results} ...`.', '']
    datasets = _ordered_datasets(s.dataset for s in table)
    for dataset in datasets:
        lines += [f'## {dataset}', '',
                  '| model | p | R | beta | seeds | val acc (%) | chosen |',
                  '|---|---|---|---|---|---|---|']
        for model in _ordered_models(s.model for s in table
                                     if s.dataset == dataset):
            pick = chosen.get((dataset, model))
            for s in (s for s in table
                      if s.dataset == dataset and s.model == model):
                is_pick = pick is not None and (
                    _format_float(pick['p']), _format_int(pick['R']),
                    _format_float(pick['beta'])) == (s.p, s.R, s.beta)
                lines.append(
                    f'| {model} | {s.p or "-"} | {s.R or "-"} | '
                    f'{s.beta or "-"} | {compact_seeds(s.seeds)} | '
                    f'{_pct(s.val)} | {"**yes**" if is_pick else ""} |')
        lines.append('')
    if not table:
        lines.append('No search runs yet.')
        return '\n'.join(lines).rstrip() + '\n'
    lines += ['## Reproduce', '',
              'Each searched grid (finished grid points are skipped):', '',
              '```']
    for dataset in datasets:
        for model in _ordered_models(s.model for s in table
                                     if s.dataset == dataset):
            group = [s for s in table
                     if s.dataset == dataset and s.model == model]
            seeds = sorted({seed for s in group for seed in s.seeds})
            flags = ''
            for flag, values in (
                    ('grid-p', {s.p for s in group if s.p}),
                    ('grid-num-features', {s.R for s in group if s.R}),
                    ('grid-beta', {s.beta for s in group if s.beta})):
                if values and not (flag == 'grid-p'
                                   and MODELS.get(model) is not None
                                   and MODELS[model].fixed_p is not None):
                    flags += f' --{flag} ' + ' '.join(
                        sorted(values, key=float))
            lines.append(f'ikgat bench search --datasets {dataset} --models '
                         f'{model} --seeds {compact_seeds(seeds)}{flags} '
                         f'--results {results}')
    lines += ['```', '']
    return '\n'.join(lines).rstrip() + '\n'


# --------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the regularised incomplete beta function
    # (modified Lentz's method, as in Numerical Recipes' betacf).
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    r"""The regularised incomplete beta function :math:`I_x(a, b)`."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) +
                 a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    r"""The CDF of Student's t distribution with :obj:`df` degrees of
    freedom: :math:`1 - \tfrac12 I_{df/(df+t^2)}(df/2, 1/2)` for
    :math:`t \ge 0`."""
    if df <= 0:
        raise ValueError(f'df must be positive (got {df!r})')
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(probability: float, df: float) -> float:
    r"""The :obj:`probability` quantile of Student's t with :obj:`df`
    degrees of freedom, by bisection on :func:`t_cdf` (to about 1e-12)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f'probability must lie in (0, 1) '
                         f'(got {probability!r})')
    if probability < 0.5:
        return -t_quantile(1.0 - probability, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < probability:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_cdf(mid, df) < probability:
            low = mid
        else:
            high = mid
        if high - low < 1e-13 * max(1.0, high):
            break
    return 0.5 * (low + high)


class Stats(NamedTuple):
    r"""Mean, sample standard deviation (``n - 1``) and the half-width of the
    two-sided Student-t confidence interval of the mean; ``nan`` where
    undefined (``n < 2``)."""
    n: int
    mean: float
    std: float
    half_width: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def mean_std_ci(values: Sequence[float], confidence: float = 0.95) -> Stats:
    r"""``[1, 2, 3, 4, 5]`` → mean 3, std 1.5811, 95% half-width 1.9632
    (:math:`t_{0.975, 4} \cdot s / \sqrt{n}`)."""
    values = [float(v) for v in values]
    n = len(values)
    if n == 0:
        return Stats(0, math.nan, math.nan, math.nan)
    mean = math.fsum(values) / n
    if n < 2:
        return Stats(1, mean, math.nan, math.nan)
    std = math.sqrt(math.fsum((v - mean)**2 for v in values) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    return Stats(n, mean, std, half)


# --------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------


class CellStats(NamedTuple):
    dataset: str
    model: str
    p: str
    R: str
    beta: str
    lr: str
    weight_decay: str
    test: Stats
    val: Stats
    seconds: float
    epochs: float
    seeds: List[int]
    commits: List[str]


def summarize(rows: Iterable[Dict[str, str]], tag: Optional[str] = 'final'
              ) -> Tuple[List[CellStats], int]:
    r"""Group the rows of :obj:`tag` by dataset, model and configuration
    (p, R, beta, lr, weight decay: different configurations are never
    averaged together).  A run repeated with the same key counts once (the
    first row).  Returns the cells and the number of duplicates dropped."""
    groups: Dict[Tuple[str, ...], List[Dict[str, str]]] = OrderedDict()
    seen, duplicates = set(), 0
    for row in rows:
        if tag is not None and row.get('tag', '') != tag:
            continue
        key = run_key(row)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        group = (key[0], key[1], key[3], key[4], key[5],
                 _format_float(row.get('lr')),
                 _format_float(row.get('weight_decay')))
        groups.setdefault(group, []).append(row)
    cells = []
    dataset_order = _ordered_datasets(g[0] for g in groups)
    model_order = _ordered_models(g[1] for g in groups)
    groups = OrderedDict(sorted(groups.items(), key=lambda item: (
        dataset_order.index(item[0][0]), model_order.index(item[0][1]))))
    for group, members in groups.items():
        tests = [float(r['test_acc']) * 100 for r in members
                 if r.get('test_acc')]
        cells.append(CellStats(
            *group, test=mean_std_ci(tests),
            val=mean_std_ci([float(r['val_acc']) * 100 for r in members]),
            seconds=math.fsum(float(r['seconds']) for r in members) /
            len(members),
            epochs=math.fsum(float(r['epochs']) for r in members) /
            len(members),
            seeds=sorted(int(r['seed']) for r in members),
            commits=sorted({r.get('git_commit', '') for r in members})))
    return cells, duplicates


def _ordered_datasets(names: Iterable[str]) -> List[str]:
    names = set(names)
    known = [n for n in PROTOCOLS if n in names]
    return known + sorted(names - set(known))


def _ordered_models(names: Iterable[str]) -> List[str]:
    names = set(names)
    known = [n for n in MODELS if n in names]
    return known + sorted(names - set(known))


def _pct(stats: Stats, digits: int = 2) -> str:
    if stats.n == 0:
        return '-'
    if stats.n < 2:
        return f'{stats.mean:.{digits}f}'
    return f'{stats.mean:.{digits}f} ± {stats.std:.{digits}f}'


def _ci(stats: Stats) -> str:
    if stats.n < 2:
        return '-'
    return f'[{stats.low:.2f}, {stats.high:.2f}]'


def _paper(model: str, dataset: str) -> str:
    key = MODELS[model].paper if model in MODELS else None
    value = PAPER_RESULTS.get(key or '', {}).get(dataset)
    return f'{value[0]:.1f} ± {value[1]:.1f} ({key})' if value else '-'


def _reference_gat(cells: List[CellStats], dataset: str
                   ) -> Optional[CellStats]:
    candidates = [c for c in cells if c.dataset == dataset
                  and c.model == 'gat']
    return max(candidates, key=lambda c: c.test.n) if candidates else None


def compare_to_gat(cell: CellStats, gat: CellStats) -> str:
    r"""One sentence: difference of mean test accuracy to our ``gat`` run
    and whether the 95% confidence intervals overlap."""
    diff = cell.test.mean - gat.test.mean
    where = ('above' if diff > 0 else 'below' if diff < 0 else 'equal to')
    amount = '' if diff == 0 else f'{abs(diff):.2f} points '
    text = (f'{cell.model} ({_pct(cell.test)}, n={cell.test.n}) is {amount}'
            f'{where} our gat ({_pct(gat.test)}, n={gat.test.n})')
    if cell.test.n < 2 or gat.test.n < 2:
        return text + '; too few seeds for confidence intervals.'
    overlap = cell.test.low <= gat.test.high and gat.test.low <= cell.test.high
    if overlap:
        return (text + '; the 95% CIs overlap, so the seeds do not separate '
                'them.')
    verdict = 'better' if diff > 0 else 'worse'
    return (text + f'; the 95% CIs do not overlap: {cell.model} is '
            f'{verdict} here.')


def _config_label(cell: CellStats) -> str:
    parts = [f'{k}={v}' for k, v in (('p', cell.p), ('R', cell.R),
                                     ('beta', cell.beta)) if v]
    return ', '.join(parts) or '-'


def render_summary(rows: Iterable[Dict[str, str]], tag: Optional[str] =
                   'final', results: str = DEFAULT_RESULTS,
                   output: str = DEFAULT_SUMMARY) -> str:
    r"""The Markdown summary: per dataset, a table of model × configuration
    with test accuracy mean ± std, 95% CI, seeds, validation accuracy, time
    per run and the paper's number; then one sentence per ikgat model
    comparing it with our own ``gat`` run; then the commands that reproduce
    every cell."""
    cells, duplicates = summarize(rows, tag)
    lines = [
        '# Planetoid benchmark (public split)', '',
        'Test accuracy (%) at the epoch of best validation accuracy, GAT '
        'protocol (8 heads x 8 hidden, dropout 0.6, Adam lr 0.005 / wd 5e-4; '
        'PubMed lr 0.01 / wd 1e-3 / 8 output heads; patience 100; '
        'row-normalised features).  mean ± sample std over seeds; 95% CI of '
        'the mean from Student\'s t.  Each cell\'s p, R, beta are in its '
        'config column; where they were searched, they were chosen on '
        'validation accuracy only (`search.md`).  Paper numbers: GAT paper '
        '(100 runs) and the IKA paper (AAAI).', '',
        f'Rows: `{results}`, tag `{tag}`.  Regenerate this file with '
        f'`ikgat bench summary --results {results} --tag {tag} '
        f'--output {output}`.', '']
    if duplicates:
        lines += [f'{duplicates} repeated rows (same dataset, model, seed, '
                  'configuration and tag) were counted once.', '']
    if not cells:
        lines.append('No runs yet.')
        return '\n'.join(lines) + '\n'
    datasets = _ordered_datasets(c.dataset for c in cells)
    lines += ['Models: ' + '; '.join(
        f'`{name}`: {MODELS[name].description}' for name in
        _ordered_models(c.model for c in cells) if name in MODELS) + '.', '']
    # Overview: one line per model, one column per dataset.
    models = _ordered_models(c.model for c in cells)
    lines += ['## Overview (test accuracy %, mean ± std, seeds)', '',
              '| model | ' + ' | '.join(datasets) + ' |',
              '|---|' + '---|' * len(datasets)]
    for model in models:
        entries = []
        for dataset in datasets:
            found = [c for c in cells if c.model == model
                     and c.dataset == dataset]
            entries.append('<br>'.join(
                f'{_pct(c.test)} (n={c.test.n})' for c in found) or '-')
        lines.append(f'| {model} | ' + ' | '.join(entries) + ' |')
    lines.append('')
    for dataset in datasets:
        lines += [f'## {dataset}', '',
                  '| model | config | seeds | test acc (%) | 95% CI | '
                  'val acc (%) | epochs | s/run | paper |',
                  '|---|---|---|---|---|---|---|---|---|']
        dataset_cells = [c for c in cells if c.dataset == dataset]
        for model in _ordered_models(c.model for c in dataset_cells):
            for c in (c for c in dataset_cells if c.model == model):
                lines.append(
                    f'| {model} | {_config_label(c)} | {c.test.n} | '
                    f'{_pct(c.test)} | {_ci(c.test)} | {_pct(c.val)} | '
                    f'{c.epochs:.0f} | {c.seconds:.1f} | '
                    f'{_paper(model, dataset)} |')
        lines.append('')
        gat = _reference_gat(cells, dataset)
        others = [c for c in dataset_cells if c.model != 'gat']
        if gat is None:
            lines += [f'No `gat` runs on {dataset}: nothing to compare '
                      'with.', '']
        elif others:
            better = sorted({c.model for c in others
                             if c.test.n > 1 and gat.test.n > 1
                             and c.test.low > gat.test.high})
            above = sorted({c.model for c in others
                            if c.test.mean > gat.test.mean} - set(better))
            below = sorted({c.model for c in others
                            if c.test.mean <= gat.test.mean})
            lines.append(
                f'On {dataset}, compared with our own gat run: '
                f'clearly better (CIs do not overlap): '
                f'{", ".join(better) or "none"}; higher mean but '
                f'overlapping CIs: {", ".join(above) or "none"}; not above '
                f'gat: {", ".join(below) or "none"}.')
            lines.append('')
            for c in others:
                sentence = compare_to_gat(c, gat)
                paper = PAPER_RESULTS.get(MODELS[c.model].paper or '', {}
                                          ) if c.model in MODELS else {}
                if dataset in paper and c.model != 'gat-rbf':
                    ref = paper[dataset][0]
                    side = 'at or above' if c.test.mean >= ref else 'below'
                    sentence += (f' Against the paper\'s {ref:.1f}: {side} '
                                 f'({c.test.mean - ref:+.2f}).')
                lines.append(f'- {sentence}')
            lines.append('')
    lines += ['## Reproduce', '',
              'Each cell, with the seeds it holds (`--resume` skips finished '
              'runs):', '', '```']
    for c in cells:
        spec = MODELS.get(c.model, MODELS['gat'])
        searched_p = c.p if spec.fixed_p is None else ''
        flags = ''.join(f' --{flag} {value}' for flag, value in (
            ('p', searched_p), ('num-features', c.R), ('beta', c.beta))
            if value)
        proto = protocol_for(c.dataset)
        for flag, value, default in (('lr', c.lr, proto['lr']),
                                     ('weight-decay', c.weight_decay,
                                      proto['weight_decay'])):
            if value and float(value) != float(default):
                flags += f' --{flag} {value}'
        lines.append(f'ikgat bench planetoid --datasets {c.dataset} --models '
                     f'{c.model} --seeds {compact_seeds(c.seeds)}{flags} '
                     f'--tag {tag} --results {results} --resume')
    lines += ['```', '', 'Commits of these runs: ' + ', '.join(
        f'`{commit}`' for commit in sorted({x for c in cells
                                            for x in c.commits})), '']
    return '\n'.join(lines)


def write_text(path: str, text: str) -> None:
    folder = osp.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


# --------------------------------------------------------------------------
# Command line: ``ikgat bench planetoid | search | summary | ogb | speed``
# --------------------------------------------------------------------------


def _add_common_run_arguments(parser: argparse.ArgumentParser,
                              seeds_default: str,
                              models_default: Sequence[str]) -> None:
    parser.add_argument('--datasets', nargs='+',
                        default=['Cora', 'CiteSeer', 'PubMed'])
    default = ('all' if list(models_default) == list(MODELS) else
               ' '.join(models_default))
    parser.add_argument('--models', nargs='+', default=list(models_default),
                        choices=list(MODELS), metavar='MODEL',
                        help=f'any of {", ".join(MODELS)} (default: '
                        f'{default})')
    parser.add_argument('--seeds', default=seeds_default,
                        help='a count (20 = 0-19), a range (0-19) or a list '
                        f'(0,3,10-12) (default: {seeds_default})')
    parser.add_argument('--root', default=None,
                        help='folder holding Planetoid/<Name>/raw/ '
                        '(default: $IKGAT_DATA)')
    parser.add_argument('--device', default='auto',
                        help="'cpu', 'cuda' or 'auto' (default: auto)")
    parser.add_argument('--threads', type=int, default=None,
                        help='CPU threads of torch (default: torch\'s; 1 is '
                        'fastest on a shared, busy CPU)')
    parser.add_argument('--no-progress', action='store_true')
    parser.add_argument('--node-path', default='eager', choices=NODE_PATHS,
                        help='how random-feature kernels evaluate their '
                        'node-wise term: speed and memory only, the same '
                        'model (compile: torch.compile, fastest on CPU; '
                        'default: eager)')
    proto = parser.add_argument_group(
        'protocol (default: the GAT paper\'s, per dataset)')
    proto.add_argument('--lr', type=float, default=None)
    proto.add_argument('--weight-decay', type=float, default=None)
    proto.add_argument('--hidden', type=int, default=None)
    proto.add_argument('--heads', type=int, default=None)
    proto.add_argument('--out-heads', type=int, default=None)
    proto.add_argument('--dropout', type=float, default=None)
    proto.add_argument('--epochs', type=int, default=None)
    proto.add_argument('--patience', type=int, default=None)


def _protocol_overrides(args: argparse.Namespace) -> Dict[str, Any]:
    return dict(lr=args.lr, weight_decay=args.weight_decay,
                hidden=args.hidden, heads=args.heads,
                out_heads=args.out_heads, dropout=args.dropout,
                epochs=args.epochs, patience=args.patience)


def add_bench_parser(subparsers) -> None:
    r"""Register ``ikgat bench`` with its subcommands ``planetoid``,
    ``search``, ``summary``, ``ogb`` and ``speed``."""
    bench = subparsers.add_parser(
        'bench', help='benchmarks: Planetoid runs, hyperparameter search, '
        'Markdown summary, OGB, speed and memory against GATConv')
    add_bench_commands(bench)


def add_bench_commands(bench: argparse.ArgumentParser) -> None:
    r"""Add the subcommands of ``ikgat bench`` to :obj:`bench`."""
    commands = bench.add_subparsers(required=True, dest='bench_command')

    run = commands.add_parser(
        'planetoid', help='train models over seeds on the public Planetoid '
        'splits and append one CSV row per run')
    _add_common_run_arguments(run, '0-19', list(MODELS))
    run.add_argument('--p', type=float, default=None,
                     help='L^p magnitude exponent (default: from '
                     '--from-search, else 2)')
    run.add_argument('--num-features', type=int, default=None,
                     help='spectral points R (default: from --from-search, '
                     'else 64)')
    run.add_argument('--beta', type=float, default=None,
                     help='KL weight of variational models (default: from '
                     '--from-search, else 0.1)')
    run.add_argument('--from-search', default=None, metavar='CSV',
                     help='use the p, R, beta chosen on validation accuracy '
                     f'in this search CSV (e.g. {DEFAULT_SEARCH_RESULTS})')
    run.add_argument('--tag', default='final',
                     help="label of these runs, e.g. 'final' or 'smoke' "
                     '(default: final)')
    run.add_argument('--results', default=DEFAULT_RESULTS)
    run.add_argument('--save-checkpoints', default=None, metavar='DIR',
                     help='save each run\'s best-validation model in DIR, '
                     'for `ikgat plot`')
    run.add_argument('--resume', action='store_true',
                     help='skip runs already in --results')
    run.set_defaults(run=_run_planetoid)

    search = commands.add_parser(
        'search', help='grid over p, R, beta with a few seeds; choose by '
        'mean validation accuracy')
    _add_common_run_arguments(search, '100-102', SEARCHABLE_MODELS)
    search.add_argument('--grid-p', type=float, nargs='+',
                        default=list(SEARCH_GRID['p']))
    search.add_argument('--grid-num-features', type=int, nargs='+',
                        default=list(SEARCH_GRID['R']))
    search.add_argument('--grid-beta', type=float, nargs='+',
                        default=list(SEARCH_GRID['beta']))
    search.add_argument('--results', default=DEFAULT_SEARCH_RESULTS)
    search.add_argument('--summary', default=DEFAULT_SEARCH_SUMMARY)
    search.set_defaults(run=_run_search)

    summary = commands.add_parser(
        'summary', help='render the Markdown table of a results CSV')
    summary.add_argument('--results', default=DEFAULT_RESULTS)
    summary.add_argument('--tag', default='final')
    summary.add_argument('--output', default=DEFAULT_SUMMARY)
    summary.add_argument('--search-results', default=DEFAULT_SEARCH_RESULTS,
                         help='also rewrite search.md when this CSV exists')
    summary.set_defaults(run=_run_summary)

    from ikgat.ogb import add_ogb_arguments
    ogb = commands.add_parser(
        'ogb', help='full-batch GAT-style runs on ogbn-arxiv / '
        'ogbn-products (needs the ogb package)')
    add_ogb_arguments(ogb)

    from ikgat.speed import add_speed_arguments
    speed = commands.add_parser(
        'speed', help='forward+backward time and peak memory of IKGATConv, '
        'MIKANConv and a naive edge-wise evaluation against GATConv, in one '
        'process; writes a Markdown report')
    add_speed_arguments(speed)


def _set_threads(args: argparse.Namespace) -> None:
    if getattr(args, 'threads', None):
        torch.set_num_threads(args.threads)


def _run_planetoid(args: argparse.Namespace) -> None:
    _set_threads(args)
    selected = None
    if args.from_search:
        if not osp.isfile(args.from_search):
            raise SystemExit(f'--from-search: {args.from_search} does not '
                             f'exist; run `ikgat bench search` first')
        selected = select_hyperparameters(read_results(args.from_search))
        missing = [(canonical_dataset(d), m) for d in args.datasets
                   for m in args.models
                   if (canonical_dataset(d), m) not in selected
                   and len(search_configurations(m)) > 1]
        if missing:
            print(f'warning: no search results for {missing}; those use the '
                  f'defaults {DEFAULT_HYPERPARAMETERS} unless flags say '
                  f'otherwise', file=sys.stderr)
    run_benchmark(args.datasets, args.models, parse_seeds(args.seeds),
                  results=args.results, tag=args.tag, p=args.p,
                  R=args.num_features, beta=args.beta, selected=selected,
                  protocol_overrides=_protocol_overrides(args),
                  resume=args.resume, device=args.device,
                  progress=not args.no_progress, root=args.root,
                  checkpoint_dir=args.save_checkpoints,
                  node_path=args.node_path)


def _run_search(args: argparse.Namespace) -> None:
    _set_threads(args)
    run_search(args.datasets, args.models, parse_seeds(args.seeds),
               results=args.results, summary=args.summary,
               grid=dict(p=args.grid_p, R=args.grid_num_features,
                         beta=args.grid_beta),
               protocol_overrides=_protocol_overrides(args),
               device=args.device, progress=not args.no_progress,
               root=args.root, node_path=args.node_path)
    print(f'wrote {args.summary}')


def _run_summary(args: argparse.Namespace) -> None:
    if not osp.isfile(args.results):
        raise SystemExit(f'{args.results} does not exist: run '
                         f'`ikgat bench planetoid` first')
    text = render_summary(read_results(args.results), tag=args.tag,
                          results=args.results, output=args.output)
    write_text(args.output, text)
    print(f'wrote {args.output}')
    if args.search_results and osp.isfile(args.search_results):
        summary = osp.join(osp.dirname(args.search_results), 'search.md')
        write_text(summary, render_search_summary(
            read_results(args.search_results), results=args.search_results))
        print(f'wrote {summary}')


def main(argv: Optional[List[str]] = None) -> None:
    r"""``python benchmarks/planetoid.py ...``: the same as ``ikgat bench
    ...``; the subcommand defaults to ``planetoid``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ('planetoid', 'search', 'summary', 'ogb',
                                   'speed', '-h', '--help'):
        argv = ['planetoid'] + argv
    parser = argparse.ArgumentParser(prog='ikgat bench',
                                     description=__doc__.split('\n\n')[0])
    add_bench_commands(parser)
    args = parser.parse_args(argv)
    args.run(args)
