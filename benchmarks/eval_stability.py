r"""How steady a layer's evaluation output is in PyG's own
``examples/gat.py``, with only the layer class swapped.

    IKGAT_DATA=../shared/data python -m benchmarks.eval_stability \
        --seeds 0 1 2 --threads 1

The example's model, loop and flags, as a new user runs it: Cora with
row-normalised features, two layers (8 heads x 8, then one head), dropout
0.6 on the inputs and in the attention, Adam (lr 0.005, weight decay 5e-4)
on the cross-entropy alone (no KL term: the example does not know one),
200 epochs, the validation accuracy in ``model.eval()`` read after every
epoch.  For each layer and seed it reports the spread (population standard
deviation) and the lowest value of the validation accuracy over the last
100 epochs, and the last epoch's test accuracy; then the means over seeds
and the ratio of each layer's mean spread to GATConv's.

``--kernel-eps`` sets :math:`\epsilon` in the random-feature kernels'
log-similarity :math:`\log(f^2 + \epsilon)` (``kernel_kwargs``), the floor
whose default of :math:`10^{-5}` made their evaluation swing.

Writes ``benchmarks/results/eval_stability.md``.
"""
import argparse
import functools
import shlex
import statistics
import sys
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import GATConv

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, write_text
from ikgat import IKGATConv, KEPGATConv, MIKANConv
from ikgat.data import load_planetoid

#: The layers compared, each a class called as the example calls GATConv.
LAYERS: Dict[str, Callable[..., torch.nn.Module]] = {
    'GATConv': GATConv,
    'IKGATConv direct': lambda *a, **k: IKGATConv(*a, kernel='direct', **k),
    'IKGATConv implicit': lambda *a, **k: IKGATConv(*a, kernel='implicit',
                                                    **k),
    'MIKANConv': MIKANConv,
    'KEPGATConv': KEPGATConv,
}
#: The layers whose kernel is a random-feature estimate (``--kernel-eps``).
RANDOM_FEATURE_LAYERS = ('IKGATConv direct', 'IKGATConv implicit',
                         'MIKANConv')
EPOCHS = 200


def _with_kernel_eps(make: Callable[..., torch.nn.Module], eps: float,
                     *args, **kwargs) -> torch.nn.Module:
    return make(*args, kernel_kwargs=dict(eps=eps), **kwargs)


def layers(kernel_eps: Optional[float] = None
           ) -> Dict[str, Callable[..., torch.nn.Module]]:
    r""":data:`LAYERS`, the random-feature ones with
    ``kernel_kwargs=dict(eps=kernel_eps)`` when :obj:`kernel_eps` is
    given."""
    table = dict(LAYERS)
    if kernel_eps is not None:
        for name in RANDOM_FEATURE_LAYERS:
            table[name] = functools.partial(_with_kernel_eps, LAYERS[name],
                                            kernel_eps)
    return table


class ExampleGAT(torch.nn.Module):
    r"""The model of PyG's ``examples/gat.py`` with :obj:`layer` in place
    of GATConv."""
    def __init__(self, layer, in_channels: int, hidden_channels: int,
                 out_channels: int, heads: int):
        super().__init__()
        self.conv1 = layer(in_channels, hidden_channels, heads, dropout=0.6)
        self.conv2 = layer(hidden_channels * heads, out_channels, heads=1,
                           concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        return self.conv2(x, edge_index)


def run(layer, data, num_features: int, num_classes: int,
        seed: int) -> Dict[str, float]:
    r"""One training run of the example; the validation curve's spread
    and minimum over the last 100 epochs, and the last test accuracy."""
    torch.manual_seed(seed)
    model = ExampleGAT(layer, num_features, 8, num_classes, 8)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005,
                                 weight_decay=5e-4)
    validation: List[float] = []
    test = 0.0
    for _ in range(EPOCHS):
        model.train()
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        F.cross_entropy(out[data.train_mask],
                        data.y[data.train_mask]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            pred = model(data.x, data.edge_index).argmax(dim=-1)
        correct = pred == data.y
        validation.append(float(correct[data.val_mask].float().mean()))
        test = float(correct[data.test_mask].float().mean())
    last = validation[EPOCHS // 2:]
    return dict(spread=statistics.pstdev(last), lowest=min(last), test=test)


def report(rows: Dict[str, List[Dict[str, float]]], seeds: List[int],
           threads: int, commit: str) -> str:
    baseline = statistics.fmean(row['spread'] for row in rows['GATConv'])
    lines = [
        '# Evaluation stability in PyG\'s examples/gat.py, layer swapped', '',
        f'Command: `python -m benchmarks.eval_stability '
        f'{shlex.join(sys.argv[1:])}`', '',
        f'Code: ikgat commit {commit}; torch {torch.__version__}, '
        f'{threads} thread(s); Cora, {EPOCHS} epochs, seeds '
        f'{", ".join(map(str, seeds))}. Spread: the population std of the '
        f'validation accuracy read after every epoch over the last '
        f'{EPOCHS // 2}; lowest: its minimum there; test: the last '
        f'epoch\'s test accuracy (%).', '',
        '| layer | seed | spread | lowest | test % |', '|---|---|---|---|---|'
    ]
    for name, runs in rows.items():
        for seed, row in zip(seeds, runs):
            lines.append(f'| {name} | {seed} | {row["spread"]:.4f} | '
                         f'{row["lowest"]:.3f} | {100 * row["test"]:.1f} |')
    lines += [
        '', '## Means over seeds', '',
        '| layer | spread | spread / GATConv\'s | lowest | test % |',
        '|---|---|---|---|---|'
    ]
    for name, runs in rows.items():
        spread = statistics.fmean(row['spread'] for row in runs)
        lines.append(
            f'| {name} | {spread:.4f} | {spread / baseline:.2f} | '
            f'{min(row["lowest"] for row in runs):.3f} | '
            f'{100 * statistics.fmean(row["test"] for row in runs):.1f} |')
    return '\n'.join(lines) + '\n'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--layers', nargs='+', default=list(LAYERS),
                        choices=list(LAYERS))
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--kernel-eps', type=float, default=None,
                        help='epsilon in the random-feature kernels\' '
                        'log(f^2 + epsilon) (default: the kernels\' own)')
    parser.add_argument('--output',
                        default=f'{RESULTS_DIR}/eval_stability.md')
    args = parser.parse_args(argv)
    if 'GATConv' not in args.layers:
        parser.error('--layers must include GATConv, the baseline of the '
                     'ratios')
    torch.set_num_threads(args.threads)
    commit = git_commit()  # of the code that runs, before any edit
    dataset = load_planetoid('Cora', transform=T.NormalizeFeatures())
    data = dataset[0]
    table = layers(args.kernel_eps)
    rows: Dict[str, List[Dict[str, float]]] = {}
    for name in args.layers:
        rows[name] = []
        for seed in args.seeds:
            rows[name].append(run(table[name], data, dataset.num_features,
                                  dataset.num_classes, seed))
            print(f'{name} seed {seed}: {rows[name][-1]}', flush=True)
    text = report(rows, args.seeds, args.threads, commit)
    write_text(args.output, text)
    print(text)


if __name__ == '__main__':
    main()
