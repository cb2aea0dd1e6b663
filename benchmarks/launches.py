r"""Operations per step on the CUDA path, counted on CPU:
``python -m benchmarks.launches``.

    python -m benchmarks.launches --output benchmarks/results/launches.md

A GPU step of small graph operations is bound by its launches, not by its
arithmetic (DESIGN.md section 8): the first CUDA run measured 575 ms for a
step of ``direct`` that the GPU computed in 205 ms, the host launching
~13,000 operations.  This study counts the ATen operations (and registered
``ikgat::`` operators, one each) that one step dispatches on the ``meta``
device, where the layers take their CUDA path (the fused attention with
``fused_attention='always'``, the Triton node terms), at two graph sizes:
the count must not grow with the graph.  Views (``view``, ``slice``,
``t``, ...) launch nothing on a GPU; they are counted too and shown apart.

Every layer (GATConv; IKGATConv with each kernel of the registry;
MIKANConv; KEPGATConv; TransformerConv; IKTransformerConv with ``rbf``,
``direct`` and ``implicit`` and MIKANTransformerConv, on their fused
attention) in training (forward and backward) with attention dropout 0
and 0.6, and in evaluation (forward; the stochastic kernels with
``num_samples`` draws); 8 heads x 8 channels, 128 input features, 8
in-edges per node, no self-loops added (as in the issue's table); one warm
step first (the layers sort each graph once).
"""
import argparse
import os.path as osp
import sys
from collections import Counter
from typing import Dict, List, Optional, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import write_text

HEADS, CHANNELS, FEATURES, DEGREE = 8, 8, 128, 8
#: The graph sizes compared (nodes).
SIZES = (10_000, 160_000)
#: Attention dropout in training: none, and the GAT recipe's.
DROPOUTS = (0.0, 0.6)
#: Draws averaged in evaluation by the stochastic kernels.
NUM_SAMPLES = 4
META = torch.device('meta')


class OperationCount(TorchDispatchMode):
    r"""Counts the operations dispatched while active, views apart."""
    def __init__(self):
        super().__init__()
        self.operations: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.operations[func] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.operations.values())

    @property
    def views(self) -> int:
        return sum(count for func, count in self.operations.items()
                   if func.is_view)


#: The kernels of IKTransformerConv counted: the exact one and a
#: random-feature kernel of each kind (the fused attention serves them all).
TRANSFORMER_KERNELS = ('rbf', 'direct', 'implicit')


def layer_names() -> List[str]:
    from ikgat.kernels import KERNELS
    return (['GATConv'] + [f'IKGATConv-{name}' for name in sorted(KERNELS)]
            + ['MIKANConv', 'KEPGATConv', 'TransformerConv']
            + [f'IKTransformerConv-{name}' for name in TRANSFORMER_KERNELS]
            + ['MIKANTransformerConv'])


#: The PyG layers, baselines of the ratios (each of its drop-ins).
BASELINES = ('GATConv', 'TransformerConv')


def is_transformer(name: str) -> bool:
    r"""Whether layer :obj:`name` is TransformerConv or a drop-in."""
    return 'TransformerConv' in name


def baseline(name: str) -> str:
    r"""The PyG layer that :obj:`name` replaces (or is)."""
    return 'TransformerConv' if is_transformer(name) else 'GATConv'


def build_layer(name: str, dropout: float) -> torch.nn.Module:
    r"""One layer of :obj:`name` on its CUDA path, without self-loops
    (the TransformerConv drop-ins add none)."""
    from torch_geometric.nn import GATConv

    from ikgat import (
        IKGATConv,
        IKTransformerConv,
        KEPGATConv,
        MIKANConv,
        MIKANTransformerConv,
    )
    if name == 'TransformerConv':
        from torch_geometric.nn import TransformerConv
        return TransformerConv(FEATURES, CHANNELS, heads=HEADS,
                               dropout=dropout)
    if is_transformer(name):
        if name == 'MIKANTransformerConv':
            layer = MIKANTransformerConv(FEATURES, CHANNELS, heads=HEADS,
                                         dropout=dropout,
                                         num_samples=NUM_SAMPLES)
        else:
            kernel = name[len('IKTransformerConv-'):]
            layer = IKTransformerConv(
                FEATURES, CHANNELS, heads=HEADS, dropout=dropout,
                kernel=kernel, kernel_kwargs=dict(num_samples=NUM_SAMPLES)
                if kernel == 'implicit' else None)
        layer.fused_attention = 'always'
        return layer
    kwargs = dict(heads=HEADS, dropout=dropout, add_self_loops=False)
    if name == 'GATConv':
        return GATConv(FEATURES, CHANNELS, **kwargs)
    if name == 'KEPGATConv':  # its S draws are one draw scaled by 1/sqrt(S)
        return KEPGATConv(FEATURES, CHANNELS, num_samples=NUM_SAMPLES,
                          **kwargs)
    if name == 'MIKANConv':
        layer = MIKANConv(FEATURES, CHANNELS, num_samples=NUM_SAMPLES,
                          **kwargs)
    else:
        kernel = name[len('IKGATConv-'):]
        kernel_kwargs = dict(num_samples=NUM_SAMPLES) if (
            kernel == 'implicit') else None
        layer = IKGATConv(FEATURES, CHANNELS, kernel=kernel,
                          kernel_kwargs=kernel_kwargs, **kwargs)
    layer.fused_attention = 'always'  # the CUDA path, on meta tensors
    return layer


def count_step(name: str, num_nodes: int, training: bool,
               dropout: float = 0.0) -> Tuple[int, int]:
    r"""(operations, of which views) of one step of :obj:`name` on a graph
    of :obj:`num_nodes` nodes with :data:`DEGREE` in-edges each: forward
    and backward in training, the forward pass in evaluation."""
    torch.manual_seed(0)
    layer = build_layer(name, dropout).to(META).train(training)
    x = torch.randn(num_nodes, FEATURES, device=META,
                    requires_grad=training)
    edge_index = torch.stack([
        torch.randint(0, num_nodes, (DEGREE * num_nodes, ), device=META),
        torch.arange(num_nodes, device=META).repeat_interleave(DEGREE)])

    def step():
        if training:
            layer(x, edge_index).sum().backward()
        else:
            with torch.no_grad():
                layer(x, edge_index)

    step()  # warm: the graph's sort is kept with edge_index
    with OperationCount() as count:
        step()
    return count.total, count.views


def modes() -> List[Tuple[str, bool, float]]:
    r"""(label, training, dropout) of each counted mode."""
    return ([(f'training, dropout {dropout:g}', True, dropout)
             for dropout in DROPOUTS] + [('evaluation', False, 0.0)])


def measure(names: List[str], sizes=SIZES) -> List[dict]:
    rows = []
    for name in names:
        for label, training, dropout in modes():
            row = dict(layer=name, mode=label)
            for size in sizes:
                total, views = count_step(name, size, training, dropout)
                row[size] = total
                row[f'{size} views'] = views
            rows.append(row)
            print(f'{name}, {label}: '
                  + ', '.join(f'{row[size]}' for size in sizes),
                  file=sys.stderr, flush=True)
    return rows


def render(rows: List[dict], sizes, command: str) -> str:
    baselines: Dict[Tuple[str, str], int] = {
        (row['layer'], row['mode']): row[sizes[0]] for row in rows
        if row['layer'] in BASELINES}
    lines = [
        '# Operations per step on the CUDA path (meta device)', '',
        f'Command: `{command}`; git commit {git_commit()}; torch '
        f'{torch.__version__}.', '',
        f'ATen operations (views included; the registered `ikgat::` '
        f'operators one each) of one step at N nodes with {DEGREE} in-edges '
        f'each, {HEADS} heads x {CHANNELS} channels, {FEATURES} features, '
        f'no self-loops added, after one warm step; evaluation is the '
        f'forward pass, the stochastic kernels averaging {NUM_SAMPLES} '
        f'draws. The bar (issue #22): the same count at both sizes, and at '
        f'most 3x that of the PyG layer replaced (GATConv, or '
        f'TransformerConv for its drop-ins) in the same mode.', '',
        '| layer | mode | ' + ' | '.join(f'N={size:,}' for size in sizes)
        + ' | of which views | vs PyG | bar |',
        '|---|---|' + '---:|' * (len(sizes) + 2) + '---|']
    for row in rows:
        counts = [row[size] for size in sizes]
        ratio = counts[0] / baselines[baseline(row['layer']), row['mode']]
        flat = len(set(counts)) == 1
        verdict = ('met' if flat and ratio <= 3.0 else
                   'grows with N' if not flat else 'over 3x')
        lines.append(f"| {row['layer']} | {row['mode']} | "
                     + ' | '.join(f'{count:,}' for count in counts)
                     + f" | {row[f'{sizes[0]} views']:,} | {ratio:.2f}x | "
                     f'{verdict} |')
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--output', default=None,
                        help='write the Markdown table here (default: '
                        'print it)')
    parser.add_argument('--layers', nargs='+', default=None,
                        choices=layer_names(), metavar='LAYER',
                        help=f'layers to count (default: all of '
                        f'{layer_names()})')
    parser.add_argument('--sizes', nargs=2, type=int, default=list(SIZES),
                        metavar='N', help='the two graph sizes (nodes)')
    args = parser.parse_args(argv)
    if args.output is not None:
        folder = osp.dirname(osp.abspath(args.output))
        if not osp.isdir(folder):
            parser.error(f'cannot write --output {args.output!r}: '
                         f'{folder!r} is not a folder')
    names = args.layers or layer_names()
    # The baselines of the ratios first:
    names = [name for name in BASELINES if name not in names and any(
        baseline(other) == name for other in names)] + names
    command = ' '.join(['python -m benchmarks.launches'] + sys.argv[1:]
                       if argv is None else ['python -m benchmarks.launches']
                       + list(argv))
    text = render(measure(names, args.sizes), args.sizes, command)
    if args.output is None:
        print(text)
    else:
        write_text(args.output, text)
    return text


if __name__ == '__main__':
    main()
