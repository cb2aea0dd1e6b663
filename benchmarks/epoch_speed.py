r"""A whole training epoch of the GAT recipe with each layer in place of
the PyG layer it replaces, timed beside that PyG layer in one process.

    IKGAT_DATA=../shared/data python -m benchmarks.epoch_speed \
        --datasets Cora CiteSeer PubMed --threads 1

An epoch is what a user waits for: a training step (input and attention
dropout 0.6, cross-entropy on the training nodes, backward, Adam) and an
evaluation forward pass.  The model is the GAT paper's two-layer network
(8 heads x 8 hidden, ELU, one output head; 8 averaged output heads on
PubMed), built from each layer class as PyG's ``examples/gat.py`` builds it
from GATConv, with PyG's ``F.dropout`` on the inputs in every model.  The
GAT family is compared with GATConv, the transformers with TransformerConv.
Every model runs a few warm-up epochs, then the rounds interleave the
models (one epoch of each per round), and each model's median epoch is
divided by its PyG layer's median of the same rounds.  Beside it, the
95% interval of the paired ratio: the geometric mean of the rounds' ratios
(each round's epoch over its PyG layer's in the same round), with a
Student-t interval on their logarithms.  Machine noise moves a ratio by
several percent from run to run; the interval says which targets a run
shows met (its upper end below), missed (its lower end above) or cannot
tell.

Rows are appended to ``benchmarks/results/epoch_speed.csv`` as each
dataset finishes (fsynced), and the Markdown report
``benchmarks/results/epoch_speed.md`` is rewritten from all rows.
"""
import argparse
import csv
import math
import os
import os.path as osp
import platform
import shlex
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import GATConv, TransformerConv

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, write_text
from benchmarks.harness.statistics import mean_std_ci
from ikgat import (
    IKGATConv,
    IKTransformerConv,
    KEPGATConv,
    MIKANConv,
    MIKANTransformerConv,
)
from ikgat.atomic_writes import atomic_open
from ikgat.data import load_planetoid
from ikgat.kernels import KERNELS

GAT_KERNELS = ['rbf', 'direct', 'implicit', 'rff', 'rff_ns', 'rbf_only',
               'expsin', 'linear', 'poly', 'exp']
TRANSFORMER_KERNELS = ['rbf', 'direct', 'implicit', 'rff', 'rff_ns']


def _with(layer: type, **options) -> Callable[..., torch.nn.Module]:
    def make(*args, **kwargs):
        return layer(*args, **options, **kwargs)
    return make


def layers(num_spectral_points: Optional[int] = None) -> Dict[str, tuple]:
    r"""Each model's name, its layer constructor and its baseline's name;
    the layers with spectral points take :obj:`num_spectral_points`
    (default: their own)."""
    points = ({} if num_spectral_points is None else
              dict(num_spectral_points=num_spectral_points))
    table = {'GATConv': (GATConv, 'GATConv')}
    for kernel in GAT_KERNELS:
        assert kernel in KERNELS
        table[f'IKGATConv {kernel}'] = (
            _with(IKGATConv, kernel=kernel, **points), 'GATConv')
    table['MIKANConv'] = (_with(MIKANConv, **points), 'GATConv')
    table['KEPGATConv'] = (KEPGATConv, 'GATConv')
    table['TransformerConv'] = (TransformerConv, 'TransformerConv')
    for kernel in TRANSFORMER_KERNELS:
        table[f'IKTransformerConv {kernel}'] = (
            _with(IKTransformerConv, kernel=kernel, **points),
            'TransformerConv')
    table['MIKANTransformerConv'] = (_with(MIKANTransformerConv, **points),
                                     'TransformerConv')
    return table


class RecipeGAT(torch.nn.Module):
    r"""The GAT paper's network with :obj:`layer` in both places."""
    def __init__(self, layer, in_channels: int, out_channels: int,
                 output_heads: int):
        super().__init__()
        self.conv1 = layer(in_channels, 8, heads=8, dropout=0.6)
        self.conv2 = layer(64, out_channels, heads=output_heads,
                           concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        return self.conv2(x, edge_index)


def epoch(model, optimizer, data) -> float:
    r"""One training step and one evaluation pass; seconds."""
    start = time.perf_counter()
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        model(data.x, data.edge_index).argmax(dim=-1)
    return time.perf_counter() - start


def measure(dataset_name: str, names: List[str], rounds: int,
            warmup: int, num_spectral_points: Optional[int] = None
            ) -> Dict[str, List[float]]:
    dataset = load_planetoid(dataset_name, transform=T.NormalizeFeatures())
    data = dataset[0]
    pubmed = dataset_name.lower() == 'pubmed'
    table = layers(num_spectral_points)
    models = {}
    for name in names:
        torch.manual_seed(0)
        model = RecipeGAT(table[name][0], dataset.num_features,
                          dataset.num_classes, 8 if pubmed else 1)
        optimizer = torch.optim.Adam(model.parameters(),
                                     lr=0.01 if pubmed else 0.005,
                                     weight_decay=1e-3 if pubmed else 5e-4)
        for _ in range(warmup):
            epoch(model, optimizer, data)
        models[name] = (model, optimizer)
    times: Dict[str, List[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name, (model, optimizer) in models.items():
            times[name].append(epoch(model, optimizer, data))
    return times


def paired_ratio(times: List[float], baseline: List[float]
                 ) -> Tuple[float, float, float]:
    r"""The geometric mean of the rounds' ratios :math:`t_i / b_i` and its
    95% Student-t interval (on :math:`\log t_i - \log b_i`); the interval
    is ``nan`` below two rounds.  ``[2, 4], [1, 2]`` gives ``(2, 2, 2)``."""
    logs = mean_std_ci([math.log(t / b) for t, b in zip(times, baseline)])
    if logs.n < 2:
        return math.exp(logs.mean), math.nan, math.nan
    return math.exp(logs.mean), math.exp(logs.low), math.exp(logs.high)


CSV_COLUMNS = ['dataset', 'threads', 'model', 'baseline', 'median_ms',
               'baseline_ms', 'ratio', 'paired_ratio', 'ratio_low',
               'ratio_high', 'rounds', 'commit', 'machine']


def append_rows(path: str, rows: List[Dict[str, object]]) -> None:
    r"""Append :obj:`rows` (fsynced); a file written before the paired
    columns existed is first rewritten with them, empty in its old rows
    (through a temporary file and a rename)."""
    if osp.exists(path):
        with open(path, newline='') as file:
            reader = csv.DictReader(file)
            header, old = reader.fieldnames or [], list(reader)
        if header != CSV_COLUMNS:
            with atomic_open(path, 'w') as file:
                writer = csv.DictWriter(file, CSV_COLUMNS, restval='')
                writer.writeheader()
                writer.writerows(old)
    new = not osp.exists(path)
    with open(path, 'a', newline='') as file:
        writer = csv.DictWriter(file, CSV_COLUMNS)
        if new:
            writer.writeheader()
        writer.writerows(rows)
        file.flush()
        os.fsync(file.fileno())


def _paired(row: Dict[str, str]) -> str:
    if not row.get('ratio_low') or row['ratio_low'] == 'nan':
        return '—'
    return (f'{float(row["paired_ratio"]):.2f}x '
            f'[{float(row["ratio_low"]):.2f}, {float(row["ratio_high"]):.2f}]')


def report(path: str, command: str) -> str:
    with open(path, newline='') as file:
        rows = list(csv.DictReader(file))
    lines = [
        '# A whole training epoch of the GAT recipe against the PyG layer '
        '(CPU)', '', f'Command: `{command}`', '',
        'An epoch: a training step (dropout 0.6 on inputs and attention, '
        'cross-entropy, Adam) and an evaluation forward pass; 8 x 8 hidden, '
        '1 output head (8 on PubMed). Medians of interleaved rounds in one '
        'process; ratio: the model\'s median over its PyG layer\'s '
        '(GATConv, or TransformerConv for the transformers) in the same '
        'rounds; paired: the geometric mean of the rounds\' ratios with its '
        '95% interval (— in rows written before it was recorded). Each row '
        'names its commit and machine.', '',
        '| dataset | threads | model | median ms | PyG layer ms | ratio | '
        'paired [95% CI] | rounds | commit | machine |',
        '|---|---|---|---|---|---|---|---|---|---|'
    ]
    for row in rows:
        lines.append(
            f'| {row["dataset"]} | {row["threads"]} | {row["model"]} | '
            f'{float(row["median_ms"]):.1f} | '
            f'{float(row["baseline_ms"]):.1f} | '
            f'{float(row["ratio"]):.2f}x | {_paired(row)} | '
            f'{row["rounds"]} | '
            f'{row["commit"]} | {row["machine"]} |')
    return '\n'.join(lines) + '\n'


def label(name: str, make: Callable[..., torch.nn.Module]) -> str:
    r"""A row's model: :obj:`name`, and the :math:`R` of its layer if it
    has spectral points."""
    kernel = getattr(make(8, 8, heads=1), 'kernel', None)
    num_points = getattr(kernel, 'num_spectral_points', None)
    return name if num_points is None else f'{name} R={num_points}'


def machine() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as file:
            for line in file:
                if line.startswith('model name'):
                    name = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    return f'{name}, {os.cpu_count()} cores'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--datasets', nargs='+',
                        default=['Cora', 'CiteSeer', 'PubMed'])
    parser.add_argument('--models', nargs='+', default=None,
                        help='model names (default: all; their baselines '
                        'are added)')
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--rounds', type=int, default=7)
    parser.add_argument('--warmup', type=int, default=2)
    parser.add_argument('--num-spectral-points', type=int, default=None,
                        help='R of the layers with spectral points (default: '
                        'their own: 16 for IKGATConv direct, 64 for the '
                        'others)')
    parser.add_argument('--output', default=osp.join(RESULTS_DIR,
                                                     'epoch_speed.csv'))
    args = parser.parse_args(argv)
    table = layers(args.num_spectral_points)
    names = list(table) if args.models is None else args.models
    unknown = [name for name in names if name not in table]
    if unknown:
        parser.error(f'unknown --models {unknown}; choose from '
                     f'{list(table)}')
    for name in list(names):
        if table[name][1] not in names:
            names.insert(0, table[name][1])
    torch.set_num_threads(args.threads)
    command = f'python -m benchmarks.epoch_speed {shlex.join(sys.argv[1:])}'
    commit = git_commit()  # of the code that runs, before any edit
    for dataset in args.datasets:
        times = measure(dataset, names, args.rounds, args.warmup,
                        args.num_spectral_points)
        medians = {name: statistics.median(values)
                   for name, values in times.items()}
        rows = []
        for name in names:
            baseline = table[name][1]
            paired = paired_ratio(times[name], times[baseline])
            rows.append(dict(
                dataset=dataset, threads=args.threads,
                model=label(name, table[name][0]),
                baseline=baseline, median_ms=1e3 * medians[name],
                baseline_ms=1e3 * medians[baseline],
                ratio=medians[name] / medians[baseline],
                paired_ratio=paired[0], ratio_low=paired[1],
                ratio_high=paired[2], rounds=args.rounds,
                commit=commit, machine=machine()))
            print(f'{dataset} {args.threads}t {name}: '
                  f'{1e3 * medians[name]:.1f} ms, '
                  f'{medians[name] / medians[baseline]:.2f}x, paired '
                  f'{paired[0]:.2f}x [{paired[1]:.2f}, {paired[2]:.2f}]',
                  flush=True)
        append_rows(args.output, rows)
        write_text(args.output[:-4] + '.md', report(args.output, command))


if __name__ == '__main__':
    main()
