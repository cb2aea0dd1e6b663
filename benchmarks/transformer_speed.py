r"""Speed and memory of kernel attention for graph transformers against
PyG's ``TransformerConv``, in one process: ``python -m
benchmarks.transformer_speed``.

    # the full run (Cora, PubMed, arxiv size), writes
    # benchmarks/results/transformer_speed.md:
    IKGAT_DATA=../shared/data python -m benchmarks.transformer_speed \
        --threads 1
    # seconds, a tiny synthetic graph (what the test suite runs):
    python -m benchmarks.transformer_speed --smoke --out /tmp/t.md

Every graph is one :class:`~benchmarks.harness.measurement.Session`
(round-robin over the layers, in a shuffled order per round), so the
ratios to TransformerConv compare like with like on whatever machine and
load the run sees; time and memory are measured as in
:mod:`benchmarks.speed`:

* **time**: forward + backward of one layer (8 heads x 8 channels, a fixed
  upstream gradient), the median of ``--reps`` rounds after ``--warmup``
  untimed ones, wall clock and process CPU time;
* **peak memory**: live tensors (:mod:`torch.profiler`) and peak RSS growth
  during one step (:mod:`benchmarks.harness.measurement`).

The layers: TransformerConv; :class:`ikgat.IKTransformerConv` with the
``rbf`` (TransformerConv's function), ``direct`` and ``implicit`` kernels;
:class:`ikgat.MIKANTransformerConv`; then TransformerConv and the layers
of ``--compiled`` (default ``rbf`` and ``direct``) through
:func:`torch.compile`, timed in the same session (their ratios are to
TransformerConv's eager time; the targets table adds ``direct`` compiled
against TransformerConv compiled).  Every layer sees the same graph with
one self-loop per node (TransformerConv adds none), in training mode
(the implicit kernels draw their spectral points in each step), without
the KL term.
"""
import argparse
import os.path as osp
import time
from functools import partial
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch_geometric.utils import add_self_loops, remove_self_loops

from benchmarks.harness.measurement import (
    Measurement,
    Session,
    fmt_bytes,
    fmt_ratio,
    fmt_speed,
    fmt_time,
    load_average,
    machine_info,
    table,
)
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, write_text
from benchmarks.harness.runtime import compiled
from benchmarks.speed_steps import (
    CHANNELS,
    HEADS,
    Graph,
    layer_step,
    load_graph,
    seeded,
    step_maker,
)

DEFAULT_RESULTS = osp.join(RESULTS_DIR, 'transformer_speed.md')

#: The layers, in table order: ``(key, label)``.  ``key`` is
#: ``'transformer'``, ``'mikan'`` or an IKTransformerConv kernel name.
LAYERS: List[Tuple[str, str]] = [
    ('transformer', 'TransformerConv'),
    ('rbf', 'IKTransformerConv `rbf`'),
    ('direct', 'IKTransformerConv `direct`'),
    ('implicit', 'IKTransformerConv `implicit`'),
    ('mikan', 'MIKANTransformerConv'),
]
#: The layers of :data:`LAYERS` also measured through
#: :func:`torch.compile` (``--compiled``; dynamic shapes, the warm-up
#: rounds compile), in the same session as the eager ones.
COMPILED = ['transformer', 'rbf', 'direct']
#: The stated targets: ``direct`` within this time and peak memory of
#: TransformerConv on these graphs.
TARGET_KERNEL = 'direct'
TARGET_TIME_RATIO = 2.0
TARGET_MEMORY_RATIO = 1.0
TARGET_GRAPHS = ('pubmed', 'arxiv')


def make_layer(key: str, in_channels: int,
               num_spectral_points: int = 64) -> torch.nn.Module:
    r"""The layer of :data:`LAYERS` named :obj:`key`, :obj:`HEADS` heads of
    :obj:`CHANNELS` channels."""
    if key == 'transformer':
        from torch_geometric.nn import TransformerConv
        return TransformerConv(in_channels, CHANNELS, heads=HEADS)
    if key == 'mikan':
        from ikgat import MIKANTransformerConv
        return MIKANTransformerConv(in_channels, CHANNELS, heads=HEADS,
                                    num_spectral_points=num_spectral_points)
    from ikgat import IKTransformerConv
    return IKTransformerConv(in_channels, CHANNELS, heads=HEADS, kernel=key,
                             num_spectral_points=num_spectral_points)


def with_self_loops(graph: Graph) -> Graph:
    r""":obj:`graph` with one self-loop per node (as the Planetoid models of
    the transformer family train)."""
    edge_index, _ = remove_self_loops(graph.edge_index)
    edge_index, _ = add_self_loops(edge_index, num_nodes=graph.num_nodes)
    return Graph(graph.name, graph.x, edge_index)


def compiled_layer(key: str, in_channels: int,
                   num_spectral_points: int) -> torch.nn.Module:
    r""":func:`make_layer` through :func:`torch.compile` (dynamic
    shapes)."""
    return compiled(make_layer(key, in_channels, num_spectral_points))


def compiled_key(key: str) -> str:
    return f'{key}, compiled'


def measure_graph(graph: Graph, args: argparse.Namespace
                  ) -> Dict[str, Measurement]:
    r"""One session over :data:`LAYERS` and the ``--compiled`` ones on
    :obj:`graph` (peak memory of the eager layers only)."""
    # Dynamo counts the compiled variants of a layer class's forward over
    # every instance; a fresh start per graph keeps them under its
    # recompile limit (8), beyond which it would run the layer eagerly:
    torch._dynamo.reset()
    session = Session(args.reps, args.warmup, memory=args.memory,
                      seed=args.seed)
    in_channels = graph.x.size(1)
    for key, _ in LAYERS:
        make = partial(make_layer, key, in_channels,
                       args.num_spectral_points)
        session.add(key, step_maker(seeded(make, args.seed), graph,
                                    layer_step), memory=True)
    for key in args.compiled:
        make = partial(compiled_layer, key, in_channels,
                       args.num_spectral_points)
        session.add(compiled_key(key), step_maker(seeded(make, args.seed),
                                                  graph, layer_step))
    return session.run()


def time_range(result: Measurement) -> str:
    if not result.times:
        return f'failed: {result.note}' if result.note else 'n/a'
    return (f'{fmt_time(result.median)} [{fmt_time(min(result.times))}–'
            f'{fmt_time(max(result.times))}]')


def graph_rows(results: Dict[str, Measurement],
               compiled: Sequence[str] = ()) -> List[List[str]]:
    reference = results['transformer']
    labels = dict(LAYERS)
    rows = []
    for key, label in LAYERS + [(compiled_key(key), labels[key] +
                                 ', compiled') for key in compiled]:
        result = results[key]
        rows.append([label, time_range(result), fmt_speed(result, reference),
                     fmt_bytes(result.tensor_bytes),
                     fmt_ratio(result.tensor_bytes, reference.tensor_bytes),
                     fmt_bytes(result.rss_bytes),
                     fmt_ratio(result.rss_bytes, reference.rss_bytes)])
    return rows


def target_row(name: str, results: Dict[str, Measurement]) -> List[str]:
    r"""The ``direct`` targets on one graph: time and peak tensors as
    ratios to TransformerConv, and whether each is met."""
    reference, result = results['transformer'], results[TARGET_KERNEL]

    def verdict(value: Optional[float], ref: Optional[float],
                bound: float) -> str:
        if value is None or not ref or value != value or not result.times:
            return 'n/a'
        ratio = value / ref
        return f'{ratio:.2f}x ({"met" if ratio <= bound else "not met"})'

    row = [name,
           verdict(result.median, reference.median, TARGET_TIME_RATIO),
           verdict(result.tensor_bytes, reference.tensor_bytes,
                   TARGET_MEMORY_RATIO)]
    both = (compiled_key('transformer'), compiled_key(TARGET_KERNEL))
    if all(key in results for key in both):
        ours, theirs = results[both[1]], results[both[0]]
        row.append(f'{ours.median / theirs.median:.2f}x'
                   if ours.times and theirs.times else 'n/a')
    return row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--graphs', nargs='+',
                        default=['Cora', 'PubMed', 'arxiv'],
                        help="Planetoid names (from $IKGAT_DATA), 'arxiv' "
                        "(synthetic, ogbn-arxiv size) or 'tiny' (default: "
                        'Cora PubMed arxiv)')
    parser.add_argument('--num-spectral-points', type=int, default=64,
                        help='R of the random-feature kernels (default: 64)')
    parser.add_argument('--reps', type=int, default=3,
                        help='timed rounds per graph (default: 3; an '
                        'arxiv-size round of the five layers takes minutes '
                        'on one thread)')
    parser.add_argument('--warmup', type=int, default=1,
                        help='untimed rounds first (default: 1)')
    parser.add_argument('--threads', type=int, default=None,
                        help="torch's CPU threads (default: torch's; 1 for "
                        'the tables)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--memory', action=argparse.BooleanOptionalAction,
                        default=True, help='measure peak tensors (the '
                        'profiler costs a few steps per layer)')
    parser.add_argument('--compiled', nargs='*', default=COMPILED,
                        choices=[key for key, _ in LAYERS],
                        metavar='LAYER', help='layers also measured through '
                        "torch.compile: 'transformer' (TransformerConv), "
                        "'mikan' or a kernel (default: "
                        f"{' '.join(COMPILED)}; none: no compiled rows)")
    parser.add_argument('--smoke', action='store_true',
                        help="seconds: the 'tiny' graph, R = 8, 2 rounds")
    parser.add_argument('--out', default=DEFAULT_RESULTS)


def command_line(argv: Sequence[str]) -> str:
    return ' '.join(['python -m benchmarks.transformer_speed', *argv])


def run(args: argparse.Namespace, command: str) -> str:
    r"""Measure every graph of :obj:`args`, write ``args.out`` (after each
    graph, so a stopped run keeps its tables) and return its text."""
    if args.smoke:
        args.graphs, args.num_spectral_points = ['tiny'], 8
        args.reps, args.warmup = 2, 1
        if args.threads is None:
            args.threads = 1
    threads = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    lines: List[str] = []

    def emit(text: str = '') -> None:
        lines.append(text)
        print(text, flush=True)

    started = time.perf_counter()
    try:
        emit('# Speed and memory: kernel attention vs TransformerConv')
        emit()
        emit(f'Command: `{command}`')
        emit()
        for line in machine_info():
            emit(line)
        emit(f'- code: ikgat commit {git_commit()} (`+dirty`: tracked files '
             f'differed from it)')
        emit(f'- layer: {HEADS} heads x {CHANNELS} channels, R = '
             f'{args.num_spectral_points}; time = median of {args.reps} '
             f'forward+backward rounds after {args.warmup} warm-up (wall '
             f'clock, range in brackets; "cpu" = the ratio of process CPU '
             f'times); every layer on the same graph with one self-loop per '
             f'node; training mode, no KL term; "compiled": '
             f'torch.compile(layer, dynamic=True), compiled in the warm-up '
             f'(no peak memory measured)')
        emit('- peak tensors: peak bytes of live tensors during one step '
             '(torch.profiler memory timeline; input and parameters '
             'included). Peak RSS Δ: growth of the peak resident set over '
             'the resident set before the step (VmHWM reset via '
             '/proc/self/clear_refs after malloc_trim).')
        emit(f'- targets: `{TARGET_KERNEL}` within {TARGET_TIME_RATIO:g}x '
             f"TransformerConv's time and {TARGET_MEMORY_RATIO:g}x its peak "
             f'tensors at PubMed and arxiv size.')
        emit()
        targets = []
        for name in args.graphs:
            graph = with_self_loops(load_graph(name, args.seed))
            emit(f'## {graph.describe()}')
            emit()
            results = measure_graph(graph, args)
            emit(table(['layer', 'time', 'time / TransformerConv',
                        'peak tensors', 'ratio', 'peak RSS Δ', 'ratio'],
                       graph_rows(results, args.compiled)))
            emit()
            targets.append(target_row(graph.name, results))
            write_text(args.out, '\n'.join(lines) + '\n')
        emit(f'## Targets (`{TARGET_KERNEL}` / TransformerConv)')
        emit()
        header = ['graph', f'time (target ≤ {TARGET_TIME_RATIO:g}x)',
                  f'peak tensors (target ≤ {TARGET_MEMORY_RATIO:g}x)']
        if len(targets[0]) > len(header):
            header.append('time, both compiled')
        emit(table(header, targets))
        emit()
        emit(f'Total run time {time.perf_counter() - started:.0f} s; load '
             f'average (1, 5, 15 min) at the end: {load_average()}.')
    finally:
        torch.set_num_threads(threads)
    text = '\n'.join(lines) + '\n'
    write_text(args.out, text)
    return text


def main(argv: Optional[List[str]] = None) -> str:
    r"""``python -m benchmarks.transformer_speed ...``; returns the Markdown
    written."""
    import sys
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog='python -m benchmarks.transformer_speed',
        description=__doc__.split('\n\n')[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    text = run(args, command_line(argv))
    print(f'wrote {args.out}')
    return text


if __name__ == '__main__':
    main()
