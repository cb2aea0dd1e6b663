r"""Speed and memory of kernel attention against GATConv, in one process:
``python -m benchmarks.speed``.

    # the full run, writes benchmarks/results/speed.md:
    IKGAT_DATA=../shared/data python -m benchmarks.speed --threads 1
    # seconds, tiny synthetic graphs (what the test suite runs):
    python -m benchmarks.speed --smoke --out /tmp/speed.md

Every number is measured in this one process, and every table is one
:class:`~benchmarks.harness.measurement.Session` (round-robin over its
models, in a
shuffled order per round), so the ratios to GATConv compare like with like
on whatever machine and load the run sees.

* **time**: forward + backward of one layer (8 heads x 8 channels, a fixed
  upstream gradient), the median of ``--reps`` rounds after ``--warmup``
  untimed ones, wall clock and process CPU time;
* **peak memory**: live tensors (:mod:`torch.profiler`) and peak RSS growth
  during one step (:mod:`benchmarks.harness.measurement`);
* **rest of the layer**: IKGATConv with the kernel's output precomputed
  (:func:`~benchmarks.speed_steps.without_kernel`): projection, norms, per-edge
  work, aggregation; **node-wise kernel part**: the layer minus its rest,
  the median over rounds of the paired differences;
* **node paths** of the random-feature kernels, the kernels' own option
  ``node_path``: ``plain`` stores :math:`N \times H \times 2R` features,
  ``eager`` and ``compile`` are the fused path (DESIGN.md section 3);
* **naive edge-wise**: the ``direct`` kernel evaluated per edge,
  :math:`E \times H \times R` sines and cosines
  (:class:`~benchmarks.speed_steps.NaiveEdgeWise`), on the same node path
  as the
  factorised layer, so the ratio isolates the factorisation;
* **edge doubling**: at fixed :math:`N` (ogbn-arxiv's) and :math:`R`, the
  time that doubling the average degree adds to GATConv, IKGATConv and the
  rest of IKGATConv, from per-round paired differences, and the
  least-squares cost per edge.
"""
import argparse
import os.path as osp
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from benchmarks.harness.measurement import (
    Measurement,
    Session,
    Step,
    fmt_bytes,
    fmt_ratio,
    fmt_speed,
    fmt_time,
    load_average,
    machine_info,
    paired_differences,
    quantile,
    table,
)
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, write_text
from benchmarks.harness.runtime import compiled
from benchmarks.speed_steps import (
    ARXIV,
    CHANNELS,
    HEADS,
    Graph,
    NaiveEdgeWise,
    layer_step,
    load_graph,
    make_gat,
    make_ikgat,
    make_mikan,
    random_edges,
    random_features,
    rest_step,
    seeded,
    step_maker,
    takes_node_path,
)
from ikgat.kernels import KERNELS
from ikgat.kernels.random_features import NODE_PATHS

DEFAULT_SPEED_RESULTS = osp.join(RESULTS_DIR, 'speed.md')

Key = Tuple


def ikgat_key(kernel: str, node_path: str) -> Key:
    return ('ikgat', kernel, node_path if takes_node_path(kernel) else None)


def naive_plain_bytes(graph: Graph, num_features: int) -> int:
    r"""About six :math:`E \times H \times 2R` float tensors are live at the
    peak of the plain naive evaluation (measured 2.7 GiB on PubMed at
    :math:`R = 64`)."""
    edges = graph.num_edges + graph.num_nodes  # with self-loops
    return 6 * edges * HEADS * 2 * num_features * 4


def fmt_seconds_pair(wall: float, cpu: float) -> str:
    return f'{fmt_time(wall)} (cpu {fmt_time(cpu)})'


def fmt_ratio_pair(wall: Tuple[float, float], cpu: Tuple[float, float]
                   ) -> str:
    return f'{fmt_ratio(*wall)} (cpu {fmt_ratio(*cpu)})'


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    r"""The least-squares slope of :obj:`ys` against :obj:`xs`."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x)**2 for x in xs)
    if not spread:
        return float('nan')
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


class Report:
    r"""Runs the sections and collects the Markdown lines (printed as they
    come) and the key ratios."""
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.lines: List[str] = []
        self.summary: Dict[str, str] = {}

    def emit(self, text: str = '') -> None:
        self.lines.append(text)
        print(text, flush=True)

    def session(self, reps: Optional[int] = None, memory: bool = True,
                warmup: Optional[int] = None) -> Session:
        args = self.args
        return Session(args.reps if reps is None else reps,
                       args.warmup if warmup is None else warmup,
                       memory=memory and args.memory, seed=args.seed)

    def layer(self, make: Callable[[], torch.nn.Module], graph: Graph,
              kind: Callable[[torch.nn.Module, Graph], Step] = layer_step
              ) -> Callable[[], Step]:
        r"""A deferred step of :obj:`kind` on a model from :obj:`make`
        (seeded: every model of a kind starts from the same parameters)."""
        return step_maker(seeded(make, self.args.seed), graph, kind)

    # ---- one graph: every layer, and the split ---------------------------
    def graph_section(self, graph: Graph, split: bool, plain: bool) -> None:
        r"""The layer table of :obj:`graph`; with :obj:`split` also the
        split of IKGATConv over the node paths (``plain`` only if
        :obj:`plain`)."""
        args = self.args
        F, R, path = graph.x.size(1), args.num_features, args.node_path
        session = self.session()
        session.add(('gat', ), self.layer(lambda: make_gat(F), graph), True)
        rows: List[Tuple[str, Key]] = [('GATConv', ('gat', ))]
        for kernel in args.kernels:
            # The profiler costs up to ~5x a step: peak tensors only for the
            # kernels of the split (peak RSS for all).
            key = ikgat_key(kernel, path)
            session.add(key, self.layer(
                lambda kernel=kernel: make_ikgat(F, kernel, R, path), graph),
                kernel in args.split_kernels)
            rows.append((f'IKGATConv `{kernel}`', key))
        if args.mikan:
            session.add(('mikan', ), self.layer(
                lambda: make_mikan(F, R, path), graph), True)
            rows.append(('MIKANConv', ('mikan', )))
        if args.compiled is None:
            args.compiled = ['rbf', 'direct']
        if args.compiled:
            # torch.compile'd models (dynamic shapes; the warm-up rounds
            # compile): GATConv, and IKGATConv with each kernel of
            # --compiled (MIKANConv for 'mikan').
            session.add(('compiled', 'gat'), self.layer(
                lambda: compiled(make_gat(F)), graph))
            rows.append(('GATConv, compiled', ('compiled', 'gat')))
            for kernel in args.compiled:
                def make(kernel=kernel):
                    return compiled(make_mikan(F, R, path) if kernel == 'mikan'
                                    else make_ikgat(F, kernel, R, path))

                session.add(('compiled', kernel), self.layer(make, graph))
                rows.append((('MIKANConv' if kernel == 'mikan' else
                              f'IKGATConv `{kernel}`') + ', compiled',
                             ('compiled', kernel)))
        skipped = []
        for naive_path in args.naive:
            name = f'naive edge-wise `direct` (node path `{naive_path}`)'
            needed = naive_plain_bytes(graph, R)
            if naive_path == 'plain' and needed > args.naive_plain_max:
                skipped.append([name, 'skipped', '', '', '', '', '',
                                f'needs ~{fmt_bytes(needed)} '
                                f'(> --naive-plain-max)'])
                continue
            session.add(('naive', naive_path), self.layer(
                lambda naive_path=naive_path: NaiveEdgeWise(
                    make_ikgat(F, 'direct', R, naive_path)), graph))
            rows.append((name, ('naive', naive_path)))
        split_rows: List[Tuple[str, Optional[str]]] = []
        if split:
            for kernel in args.split_kernels:
                session.add(('rest', kernel), self.layer(
                    lambda kernel=kernel: make_ikgat(F, kernel, R), graph,
                    rest_step))
                paths = [p for p in args.node_paths if plain or p != 'plain']
                if not takes_node_path(kernel):
                    paths = [None]
                for node_path in paths:
                    def make(kernel=kernel, node_path=node_path):
                        return make_ikgat(F, kernel, R, node_path or 'eager')

                    session.add(ikgat_key(kernel, node_path),
                                self.layer(make, graph), True)
                    split_rows.append((kernel, node_path))
        results = session.run()
        gat = results[('gat', )]

        self.emit(f'### {graph.describe()}')
        self.emit()
        self.emit(table(['model', 'fwd+bwd (median)', 'vs GATConv',
                         'peak tensors', 'vs GATConv', 'peak RSS Δ',
                         'vs GATConv', 'note'],
                        [self.row(name, results[key], gat)
                         for name, key in rows] + skipped))
        self.emit()
        direct = results.get(ikgat_key('direct', path))
        mikan = results.get(('mikan', ))
        if direct is not None and mikan is not None:
            self.summary[f'{graph.name}: MIKANConv / IKGATConv direct time '
                         f'(node path `{path}`)'] = fmt_speed(mikan, direct)
        for naive_path in args.naive:
            naive = results.get(('naive', naive_path))
            factorised = results.get(ikgat_key('direct', naive_path))
            if naive is not None and factorised is not None:
                self.summary[f'{graph.name}: naive edge-wise / factorised '
                             f'direct time (node path `{naive_path}`)'] = \
                    fmt_speed(naive, factorised)
        if split_rows:
            self.split_table(graph, results, split_rows)

    def split_table(self, graph: Graph, results: Dict[Key, Measurement],
                    split_rows: List[Tuple[str, Optional[str]]]) -> None:
        gat = results[('gat', )]
        self.emit(f'Split of IKGATConv on {graph.name} '
                  f'(R={self.args.num_features}): the rest of the layer is '
                  f'the layer with its kernel output precomputed (projection, '
                  f'norms, per-edge work, aggregation), timed in the same '
                  f'session; the node-wise kernel part (both sides, forward '
                  f'and backward) is the median over rounds of layer - rest.')
        self.emit()
        rows = []
        for kernel, node_path in split_rows:
            total = results[ikgat_key(kernel, node_path)]
            rest = results[('rest', kernel)]
            node = Measurement(paired_differences(total, rest),
                               paired_differences(total, rest, cpu=True))
            label = f'`{kernel}`' + (f' ({node_path})' if node_path else '')
            rows.append([
                label, fmt_time(total.median), fmt_speed(total, gat),
                fmt_time(node.median), fmt_time(rest.median),
                fmt_speed(node, gat), fmt_speed(rest, gat),
                fmt_bytes(total.tensor_bytes),
                fmt_ratio(total.tensor_bytes, gat.tensor_bytes),
                fmt_ratio(total.rss_bytes, gat.rss_bytes),
                total.note or rest.note
            ])
            if kernel == 'direct':
                name = (f'{graph.name}: IKGATConv direct ({node_path}) / '
                        f'GATConv')
                self.summary[f'{name} time'] = fmt_speed(total, gat)
                self.summary[f'{name} peak memory (tensors; RSS)'] = (
                    f'{fmt_ratio(total.tensor_bytes, gat.tensor_bytes)}; '
                    f'{fmt_ratio(total.rss_bytes, gat.rss_bytes)}')
                self.summary[f'{graph.name}: node-wise part of direct '
                             f'({node_path}) / GATConv time'] = fmt_speed(
                                 node, gat)
        self.emit(table(['IKGATConv kernel (node path)', 'layer fwd+bwd',
                         'vs GATConv', 'node-wise kernel part',
                         'rest of the layer', 'node part vs GATConv',
                         'rest vs GATConv', 'peak tensors', 'vs GATConv',
                         'peak RSS Δ vs GATConv', 'note'], rows))
        self.emit()

    @staticmethod
    def row(name: str, result: Measurement,
            gat: Measurement) -> List[str]:
        if not result.times:
            return [name, 'failed', '', '', '', '', '', result.note]
        spread = (f' ({fmt_time(min(result.times))}–'
                  f'{fmt_time(max(result.times))})')
        return [
            name, fmt_time(result.median) + spread, fmt_speed(result, gat),
            fmt_bytes(result.tensor_bytes),
            fmt_ratio(result.tensor_bytes, gat.tensor_bytes),
            fmt_bytes(result.rss_bytes),
            fmt_ratio(result.rss_bytes, gat.rss_bytes), result.note
        ]

    # ---- R sweep ---------------------------------------------------------
    def r_sweep(self, graph: Graph) -> None:
        args = self.args
        F, path = graph.x.size(1), args.node_path
        session = self.session(memory=False)
        session.add(('gat', ), self.layer(lambda: make_gat(F), graph))
        session.add(('rest', ), self.layer(
            lambda: make_ikgat(F, 'direct', args.num_features), graph,
            rest_step))
        for R in args.r_sweep:
            session.add(('direct', R), self.layer(
                lambda R=R: make_ikgat(F, 'direct', R, path), graph))
        results = session.run()
        gat, rest = results[('gat', )], results[('rest', )]
        self.emit(f'### R sweep on {graph.name} (IKGATConv `direct`, node '
                  f'path `{path}`)')
        self.emit()
        rows = [['GATConv', '', fmt_time(gat.median), '', '',
                 fmt_bytes(gat.rss_bytes), '', gat.note]]
        for R in args.r_sweep:
            total = results[('direct', R)]
            node = quantile(paired_differences(total, rest), 0.5)
            rows.append([
                'IKGATConv `direct`', str(R), fmt_time(total.median),
                fmt_speed(total, gat), fmt_time(node),
                fmt_bytes(total.rss_bytes),
                fmt_ratio(total.rss_bytes, gat.rss_bytes), total.note
            ])
        self.emit(table(['model', 'R', 'fwd+bwd', 'vs GATConv',
                         'node-wise part (layer - rest)', 'peak RSS Δ',
                         'vs GATConv', 'note'], rows))
        self.emit()
        self.emit(f'The rest of the layer (projection, norms, per-edge work, '
                  f'aggregation; the kernel output precomputed) does not '
                  f'depend on R: {fmt_time(rest.median)} in this session.')
        self.emit()

    # ---- edge doubling at fixed N and R ----------------------------------
    def edge_doubling(self) -> None:
        args = self.args
        N, F, R = args.degree_nodes, args.degree_features, args.num_features
        path = args.node_path
        x = random_features(N, F, args.seed)
        graphs = {
            degree: Graph(f'degree {degree}', x,
                          random_edges(N, N * degree, args.seed))
            for degree in args.degrees
        }
        models = [('GATConv', 'gat', lambda: make_gat(F), layer_step),
                  ('IKGATConv `direct`', 'ikgat',
                   lambda: make_ikgat(F, 'direct', R, path), layer_step),
                  ('rest of IKGATConv', 'rest',
                   lambda: make_ikgat(F, 'direct', R, path), rest_step)]
        # No warm-up round: no compile here, and each step's setup already
        # runs a forward pass; medians and paired differences absorb the
        # rest.
        session = self.session(args.degree_reps, memory=False, warmup=0)
        for degree, graph in graphs.items():
            for _, name, make, kind in models:
                session.add((name, degree), self.layer(make, graph, kind))
        results = session.run()

        self.emit(f'### Edge doubling at fixed N: {N:,} nodes, {F} features, '
                  f'R={R}, random edges (node path `{path}`)')
        self.emit()
        self.emit(f'One session, {args.degree_reps} rounds (no warm-up '
                  f'round), every (model, degree) once per '
                  f'round in a shuffled order. *Added* = the median over '
                  f'rounds of the paired difference time(d) - time(d/2) '
                  f'within a round (wall clock; process CPU time in '
                  f'brackets); the ratio column divides the medians; '
                  f'*per round* gives the median and quartiles of the '
                  f'per-round ratio of the wall-clock differences. The rest '
                  f'of IKGATConv is the layer with the kernel output '
                  f'precomputed: the edge work without the node part.')
        self.emit()
        rows = []
        for degree, graph in graphs.items():
            gat = results[('gat', degree)]
            ikgat = results[('ikgat', degree)]
            rest = results[('rest', degree)]
            rows.append([
                str(degree), f'{graph.num_edges:,}',
                fmt_seconds_pair(gat.median, gat.cpu_median),
                fmt_seconds_pair(ikgat.median, ikgat.cpu_median),
                fmt_seconds_pair(rest.median, rest.cpu_median),
                fmt_speed(ikgat, gat), gat.note or ikgat.note or rest.note
            ])
        self.emit(table(['degree', 'edges', 'GATConv', 'IKGATConv `direct`',
                         'rest of IKGATConv', 'IKGATConv / GATConv', 'note'],
                        rows))
        self.emit()
        rows = []
        degrees = list(graphs)
        for low, high in zip(degrees, degrees[1:]):
            added = {}
            for _, name, _, _ in models:
                pair = results[(name, high)], results[(name, low)]
                added[name] = (paired_differences(*pair),
                               paired_differences(*pair, cpu=True))
            median = {name: (quantile(wall, 0.5), quantile(cpu, 0.5))
                      for name, (wall, cpu) in added.items()}
            per_round = [b / a for a, b in zip(added['gat'][0],
                                               added['ikgat'][0]) if a > 0]
            ratio_ikgat = fmt_ratio_pair(
                (median['ikgat'][0], median['gat'][0]),
                (median['ikgat'][1], median['gat'][1]))
            ratio_rest = fmt_ratio_pair(
                (median['rest'][0], median['gat'][0]),
                (median['rest'][1], median['gat'][1]))
            rows.append([
                f'{low} → {high}', f'{N * (high - low):,}',
                fmt_seconds_pair(*median['gat']),
                fmt_seconds_pair(*median['ikgat']),
                ratio_ikgat,
                (f'{quantile(per_round, 0.5):.2f}x '
                 f'[{quantile(per_round, 0.25):.2f}–'
                 f'{quantile(per_round, 0.75):.2f}]'
                 if per_round else 'n/a'),
                fmt_seconds_pair(*median['rest']), ratio_rest
            ])
            self.summary[f'edge doubling {low} → {high} ({N:,} nodes): '
                         f'added time IKGATConv / GATConv'] = ratio_ikgat
            self.summary[f'edge doubling {low} → {high} ({N:,} nodes): '
                         f'added time rest of IKGATConv / GATConv'] = \
                ratio_rest
        self.emit(table(['doubling', 'added edges', 'GATConv: added',
                         'IKGATConv: added', 'IKGATConv / GATConv',
                         'per round', 'rest of IKGATConv: added',
                         'rest / GATConv'], rows))
        self.emit()
        edges = [float(graphs[d].num_edges) for d in degrees]
        costs = {}
        for _, name, _, _ in models:
            medians = [results[(name, d)] for d in degrees]
            costs[name] = (
                slope(edges, [m.median for m in medians]),
                slope(edges, [m.cpu_median for m in medians]))
        parts = []
        for label, name, _, _ in models:
            wall, cpu = costs[name]
            text = f'{label} {wall * 1e6:.2f} µs (cpu {cpu * 1e6:.2f} µs)'
            if name != 'gat':
                text += ', ' + fmt_ratio_pair(
                    (wall, costs['gat'][0]), (cpu, costs['gat'][1]))
            parts.append(text)
        self.emit('Cost per edge, the least-squares slope of the median time '
                  'against the number of edges over all degrees: ' +
                  '; '.join(parts) + '.')
        self.emit()
        self.summary[f'per-edge cost (slope over degrees {degrees[0]}-'
                     f'{degrees[-1]}, {N:,} nodes): IKGATConv / GATConv'] = \
            fmt_ratio_pair((costs['ikgat'][0], costs['gat'][0]),
                           (costs['ikgat'][1], costs['gat'][1]))

    # ---- naive versus factorised over the average degree -----------------
    def naive_degree_sweep(self) -> None:
        args = self.args
        N, F, R = args.naive_degree_nodes, args.degree_features, \
            args.num_features
        path = args.node_path
        x = random_features(N, F, args.seed)
        session = self.session(memory=False)
        graphs = {}
        for degree in args.degrees:
            graph = Graph(f'degree {degree}', x,
                          random_edges(N, N * degree, args.seed))
            graphs[degree] = graph
            session.add(('gat', degree), self.layer(lambda: make_gat(F),
                                                    graph))
            session.add(('factorised', degree), self.layer(
                lambda: make_ikgat(F, 'direct', R, path), graph))
            if path == 'plain' and (naive_plain_bytes(graph, R) >
                                    args.naive_plain_max):
                continue
            session.add(('naive', degree), self.layer(
                lambda: NaiveEdgeWise(make_ikgat(F, 'direct', R, path)),
                graph))
        results = session.run()
        self.emit(f'### Naive edge-wise versus factorised: {N:,} nodes, {F} '
                  f'features, R={R}, random edges (node path `{path}`)')
        self.emit()
        rows = []
        for degree, graph in graphs.items():
            gat = results[('gat', degree)]
            factorised = results[('factorised', degree)]
            naive = results.get(('naive', degree), Measurement(
                note='skipped (> --naive-plain-max)'))
            rows.append([
                str(degree), f'{graph.num_edges:,}', fmt_time(gat.median),
                fmt_time(factorised.median), fmt_time(naive.median),
                fmt_speed(naive, factorised), fmt_speed(factorised, gat),
                gat.note or factorised.note or naive.note
            ])
            self.summary[f'naive / factorised direct, degree {degree} '
                         f'({N:,} nodes)'] = fmt_speed(naive, factorised)
        self.emit(table(['degree', 'edges', 'GATConv', 'IKGATConv `direct` '
                         '(factorised)', 'naive edge-wise',
                         'naive / factorised', 'factorised / GATConv',
                         'note'], rows))
        self.emit()


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def add_speed_arguments(parser: argparse.ArgumentParser) -> None:
    r"""The flags of ``python -m benchmarks.speed``."""
    parser.add_argument('--out', default=DEFAULT_SPEED_RESULTS,
                        help='Markdown output file (default: %(default)s)')
    parser.add_argument('--smoke', action='store_true',
                        help='tiny synthetic graphs, 2 rounds: seconds')
    parser.add_argument('--graphs', nargs='+',
                        default=['Cora', 'PubMed', 'arxiv'],
                        help='Cora, CiteSeer, PubMed (from $IKGAT_DATA) '
                        'and/or arxiv (synthetic, ogbn-arxiv size)')
    parser.add_argument('--kernels', nargs='+', default=list(KERNELS),
                        choices=list(KERNELS), metavar='KERNEL',
                        help='IKGATConv kernels of the layer tables '
                        '(default: all)')
    parser.add_argument('--num-features', type=int, default=64,
                        help='R of the random-feature kernels')
    parser.add_argument('--reps', type=int, default=5,
                        help='timed rounds per session (default: 5)')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--threads', type=int, default=None,
                        help='torch.set_num_threads (default: torch\'s)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--node-path', choices=list(NODE_PATHS),
                        default='eager',
                        help='node path of the random-feature kernels in the '
                        'layer tables and sweeps (default: eager)')
    parser.add_argument('--node-paths', nargs='+',
                        default=[path for path in NODE_PATHS
                                 if path != 'triton'],  # CUDA's
                        choices=list(NODE_PATHS),
                        help='node paths compared in the split tables')
    parser.add_argument('--split-graphs', nargs='+',
                        default=['Cora', 'PubMed', 'arxiv'])
    parser.add_argument('--plain-graphs', nargs='*',
                        default=['Cora', 'PubMed'],
                        help='split graphs that also time the plain node '
                        'path (on the arxiv-size graph it costs ~7x a '
                        'GATConv step per round)')
    parser.add_argument('--split-kernels', nargs='+', default=['rbf',
                                                               'direct'],
                        choices=list(KERNELS), metavar='KERNEL')
    parser.add_argument('--mikan', action=argparse.BooleanOptionalAction,
                        default=True, help='time MIKANConv')
    parser.add_argument('--compiled', nargs='*', default=None,
                        choices=list(KERNELS) + ['mikan'], metavar='KERNEL',
                        help='also time GATConv and IKGATConv with these '
                        'kernels (mikan: MIKANConv) through torch.compile '
                        '(default: rbf direct; none with --smoke unless '
                        'given)')
    parser.add_argument('--naive', nargs='*', default=['plain', 'eager'],
                        choices=list(NODE_PATHS),
                        help='node paths of the naive edge-wise rows in the '
                        'layer tables')
    parser.add_argument('--naive-plain-max', type=float, default=1e9,
                        help='skip the plain naive evaluation when it would '
                        'need more bytes than this (default: %(default)s)')
    parser.add_argument('--r-sweep', nargs='*', type=int,
                        default=[16, 32, 64, 128, 256])
    parser.add_argument('--r-sweep-graph', default='PubMed')
    parser.add_argument('--degrees', nargs='*', type=int,
                        default=[4, 8, 16, 32],
                        help='average degrees of the edge-doubling and naive '
                        'sweeps, each double the last')
    parser.add_argument('--degree-nodes', type=int,
                        default=ARXIV['num_nodes'],
                        help='N of the edge-doubling sweep')
    parser.add_argument('--degree-features', type=int,
                        default=ARXIV['num_features'])
    parser.add_argument('--degree-reps', type=int, default=5,
                        help='rounds of the edge-doubling sweep')
    parser.add_argument('--naive-degree-nodes', type=int, default=10_000,
                        help='N of the naive-versus-factorised sweep')
    parser.add_argument('--memory', action=argparse.BooleanOptionalAction,
                        default=True, help='measure peak memory')


def expand_smoke(args: argparse.Namespace) -> argparse.Namespace:
    r"""``--smoke``: the sections asked for (every one by default) on tiny
    synthetic graphs, 2 rounds, no ``compile`` node path."""
    args.graphs = args.split_graphs = ['tiny']
    if args.compiled is None:  # compiling takes minutes on a CPU
        args.compiled = []
    args.plain_graphs = ['tiny'] if args.plain_graphs else []
    args.node_paths = [p for p in args.node_paths if p != 'compile']
    args.naive = [p for p in args.naive if p != 'compile']
    if args.node_path == 'compile':
        args.node_path = 'eager'
    args.r_sweep = [4, 8] if args.r_sweep else []
    args.r_sweep_graph = 'tiny'
    args.degrees = [2, 4] if args.degrees else []
    args.degree_nodes = args.naive_degree_nodes = 100
    args.degree_features = 16
    args.num_features = 8
    args.reps = args.degree_reps = 2
    args.warmup = 1
    if args.threads is None:  # tiny ops: no thread start-up noise
        args.threads = 1
    return args


def speed_defaults() -> Dict[str, object]:
    parser = argparse.ArgumentParser()
    add_speed_arguments(parser)
    return vars(parser.parse_args([]))


def command_line(args: argparse.Namespace) -> str:
    r"""``python -m benchmarks.speed`` with the flags of :obj:`args` that
    differ from
    the defaults (before ``--smoke`` expands)."""
    defaults = speed_defaults()
    words = ['python -m benchmarks.speed']
    for name, value in vars(args).items():
        if name not in defaults or value == defaults[name]:
            continue
        flag = '--' + name.replace('_', '-')
        if isinstance(value, bool):
            words.append(flag if value else f'--no-{flag[2:]}')
        elif isinstance(value, list):
            words.append(' '.join([flag] + [str(v) for v in value]))
        else:
            words.append(f'{flag} {value}')
    return ' '.join(words)


def run_speed(args: argparse.Namespace) -> str:
    r"""Run every section, write ``args.out`` and return its text."""
    command = command_line(args)
    if args.smoke:
        args = expand_smoke(args)
    threads = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        return _run(args, command)
    finally:
        torch.set_num_threads(threads)


def _run(args: argparse.Namespace, command: str) -> str:
    report = Report(args)
    emit = report.emit
    started = time.perf_counter()
    emit('# Speed and memory: kernel attention vs GATConv')
    emit()
    emit(f'Command: `{command}`')
    emit()
    for line in machine_info():
        emit(line)
    emit(f'- code: ikgat commit {git_commit()} (`+dirty`: tracked files '
         f'differed from it)')
    emit('- options: ' + ', '.join(
        f'{name}={value}' for name, value in sorted(vars(args).items())
        if name in speed_defaults() and name not in ('out', 'run')))
    emit(f'- layer: {HEADS} heads x {CHANNELS} channels; time = median of '
         f'{args.reps} forward+backward rounds after {args.warmup} warm-up '
         f'(wall clock, range in brackets; "cpu" = the ratio of process CPU '
         f'times); random-feature node path in the layer tables and '
         f'sweeps: `{args.node_path}`')
    emit('- peak tensors: peak bytes of live tensors during one step '
         '(torch.profiler memory timeline; input and parameters included; '
         'measured for GATConv, MIKANConv and the --split-kernels only, as '
         'the profiler costs up to ~5x a step). '
         'Peak RSS Δ: growth of the peak resident set over the resident '
         'set before the step (VmHWM reset via /proc/self/clear_refs after '
         'malloc_trim).')
    emit()

    graphs: Dict[str, Graph] = {}

    def graph(name: str) -> Graph:
        if name not in graphs:
            graphs[name] = load_graph(name, args.seed)
        return graphs[name]

    emit('## Layers (forward + backward)')
    emit()
    emit('Each graph is one session: every round runs every model once, in '
         'a shuffled order, so load changes on a shared machine hit all '
         'rows alike. Node paths: `plain` stores N x H x 2R features, '
         '`eager`/`compile` are the fused node path (cosines recomputed in '
         'backward) with eager or torch.compile chunk kernels. The '
         'node-wise part and the rest are timed separately, so they need '
         'not add up exactly to the layer.')
    emit()
    for name in args.graphs:
        report.graph_section(graph(name), name in args.split_graphs,
                             name in args.plain_graphs)
    if args.r_sweep:
        emit('## R sweep')
        emit()
        report.r_sweep(graph(args.r_sweep_graph))
    graphs.clear()
    if args.degrees:
        emit('## Average degree at fixed N')
        emit()
        report.edge_doubling()
        report.naive_degree_sweep()
    if report.summary:
        emit('## Key ratios')
        emit()
        emit(table(['quantity', 'value'], list(report.summary.items())))
        emit()
    emit(f'Total run time {time.perf_counter() - started:.0f} s; load '
         f'average (1, 5, 15 min) at the end: {load_average()}.')
    text = '\n'.join(report.lines) + '\n'
    write_text(args.out, text)
    return text


def main(argv: Optional[List[str]] = None) -> str:
    r"""``python -m benchmarks.speed ...``; returns the Markdown
    written."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.speed',
                                     description=__doc__.split('\n\n')[0])
    add_speed_arguments(parser)
    args = parser.parse_args(argv)
    text = run_speed(args)
    print(f'wrote {args.out}')
    return text


if __name__ == '__main__':
    main()
