r"""Mini-batch training throughput with neighbour sampling, in one process and
data-parallel over 1 and 2 processes with gloo (issue 17, item 4):
``python -m benchmarks.minibatch``.

The graph is :mod:`benchmarks.scale`'s synthetic one (its generator and
sizes): ogbn-products' counts (2,449,029 nodes, 61,859,140 uniformly random
directed edges, 100 Gaussian features, 47 random classes) or ogbn-arxiv's,
times ``--fraction``.  Every node is a training seed.  The models are the
registry's ``gat`` (PyG's GATConv) and ``ikan-direct`` (IKGATConv
``kernel='direct'``, :math:`R` = ``--num-spectral-points``, 64 by default),
both in
:class:`ikgat.models.TwoLayerGAT` with 8 heads x 8 hidden channels, one
output head, dropout 0.6 (the GAT protocol of the registry), trained with
Adam (lr 0.005, weight decay 5e-4).

Batches come from the library: :func:`ikgat.training.sampling.neighbor_sampler`
(PyG's :class:`~torch_geometric.loader.NeighborLoader`, fan-out
``--fan-out`` in-neighbours per hop) and
:func:`ikgat.training.sampling.sampled_batches` (epochs of shuffled global batches of
``--batch-size`` seeds, each rank sampling its share).  A training step is
the body of :func:`ikgat.training.train_node_classifier`'s mini-batch loop
(:func:`ikgat.training.minibatch_step`: forward,
:func:`ikgat.training.distributed.data_parallel_loss` on the seeds, backward, Adam
step).

**Part ``single``** (one process, ``--threads`` threads): one
:class:`~benchmarks.harness.measurement.Session` times, round-robin in a
shuffled order per round, after ``--warmup`` untimed rounds:

* ``sample``: drawing the next sampled subgraph;
* ``step`` of each model: one training step on the next subgraph of a pool
  sampled beforehand (the same subgraphs for every model);
* ``sample+step`` of each model: both, as training runs them.

Throughput is seed nodes per second, ``batch_size / median(sample+step)``.
Peak memory: live tensors of one step (:mod:`torch.profiler`) and the growth
of the peak resident set during one (both from
:mod:`benchmarks.harness.measurement`), and the process's resident set once
the graph and the sampler are built.

**Part ``ddp``** (1 and 2 processes, ``--threads`` threads each, gloo,
:class:`~torch.nn.parallel.DistributedDataParallel` with
``find_unused_parameters=False``): the same global batches (the same
epochs, shuffle seed and batch size) trained by 1 process and by 2, each
rank sampling and training on its half of each global batch.  The graph and
the sampler are built once, in this process, and the ranks are *forked*
from it (:func:`torch.multiprocessing.start_processes`), so they share them
copy-on-write instead of building two copies (sampling only reads them).
Runs of 1 and 2 processes alternate over ``--rounds`` rounds (shuffled per
round).  The time of a global step is the slowest rank's sample + step
(the ranks meet in the gradient all-reduce); the speed-up is the ratio of
the medians of 1 process to 2.

Results: rows in ``minibatch.csv`` (each fsynced as a part finishes;
``--resume`` skips a part already measured with the same settings) and
the Markdown summary ``minibatch.md``, both in ``--results-dir``.  The
summary shows the latest rows of every part measured with the run's
settings, each part with its commit, so the two parts may come from two
commands::

    # seconds, a tiny graph (what the test suite runs; results in /tmp):
    python -m benchmarks.minibatch --smoke
    # the full runs, on an otherwise idle machine (about 5 + 10 minutes,
    # 6-7 GB of memory at the most):
    OMP_NUM_THREADS=1 python -m benchmarks.minibatch --parts single \
        --threads 1
    OMP_NUM_THREADS=1 python -m benchmarks.minibatch --parts ddp \
        --threads 1
"""
import argparse
import datetime
import itertools
import json
import os
import os.path as osp
import random
import shlex
import signal
import statistics
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.data import Data

from benchmarks.harness.measurement import (
    Session,
    current_rss,
    fmt_bytes,
    fmt_time,
    machine_info,
    peak_rss_since,
    reset_peak_rss,
    table,
)
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.registry import MODELS, build_model, protocol_for
from benchmarks.harness.results import (
    RESULTS_DIR,
    ResultsWriter,
    read_results,
    write_text,
)
from benchmarks.harness.runtime import seed_everything, set_threads
from benchmarks.scale import GRAPHS, make_graph
from ikgat.training import minibatch_step
from ikgat.training.sampling import (
    neighbor_sampler,
    require_sampler,
    sampled_batches,
)

#: The models compared (names of :data:`benchmarks.harness.registry.MODELS`).
DEFAULT_MODELS = ('gat', 'ikan-direct')
PARTS = ('single', 'ddp')
#: Adam's settings, as ``train_node_classifier``'s defaults.
LR, WEIGHT_DECAY = 0.005, 5e-4
#: Spectral points of ``ikan-direct``.
NUM_SPECTRAL_POINTS = 64
#: What ``--smoke`` sets (a graph of ~1,200 nodes; seconds).
SMOKE = dict(graph='products', fraction=0.0005, batch_size=64, fan_out=[5, 5],
             steps=3, warmup=1, rounds=1)
#: Seconds a data-parallel run may take before its processes are killed.
DDP_TIMEOUT = 3600.0

COLUMNS = [
    'part', 'settings', 'graph', 'fraction', 'nodes', 'edges', 'model',
    'processes', 'threads', 'batch_size', 'fan_out', 'steps',
    'subgraph_nodes', 'subgraph_edges', 'sample_s', 'step_s', 'total_s',
    'cpu_total_s', 'seeds_per_s', 'speedup', 'tensor_bytes', 'rss_step_bytes',
    'rss_graph_bytes', 'part_s', 'sampler', 'git_commit', 'command', 'note'
]
KEY_COLUMNS = ('part', 'settings', 'model', 'processes', 'git_commit')
NUMERIC_COLUMNS = ('fraction', 'nodes', 'edges', 'processes', 'threads',
                   'batch_size', 'steps', 'subgraph_nodes', 'subgraph_edges',
                   'sample_s', 'step_s', 'total_s', 'cpu_total_s',
                   'seeds_per_s', 'speedup', 'tensor_bytes',
                   'rss_step_bytes', 'rss_graph_bytes', 'part_s')


# --------------------------------------------------------------------------
# Graph, batches, models, the step
# --------------------------------------------------------------------------


def sampler_name() -> str:
    r"""The package behind :class:`~torch_geometric.loader.NeighborLoader`
    here: pyg-lib when installed (PyG prefers it), else torch-sparse."""
    import torch_geometric.typing as pyg_typing
    if pyg_typing.WITH_PYG_LIB:
        import pyg_lib
        return f'pyg-lib {pyg_lib.__version__}'
    import torch_sparse
    return f'torch-sparse {torch_sparse.__version__}'


def build_graph(graph: str, fraction: float) -> Data:
    r""":mod:`benchmarks.scale`'s synthetic graph as a :class:`Data`."""
    x, edge_index, y = make_graph(graph, fraction)
    return Data(x=x, edge_index=edge_index, y=y)


def batch_stream(sampler, seeds: Tensor, batch_size: int, seed: int,
                 rank: int = 0, world_size: int = 1
                 ) -> Iterator[Tuple[Data, int]]:
    r""":func:`ikgat.training.sampling.sampled_batches` over epochs 1, 2, ...: this
    rank's subgraph of each global batch and the global batch's size."""
    for epoch in itertools.count(1):
        yield from sampled_batches(sampler, seeds, batch_size, epoch, seed,
                                   rank, world_size)


def make_model(name: str, in_channels: int, num_classes: int,
               seed: int, num_spectral_points: int = NUM_SPECTRAL_POINTS
               ) -> torch.nn.Module:
    r"""The registry's two-layer GAT with :obj:`name`'s layer (8 heads x 8
    hidden, the GAT protocol, :obj:`num_spectral_points` for a layer with
    spectral points), seeded; in training mode."""
    seed_everything(seed)
    protocol = protocol_for('ogbn-products')  # the GAT protocol
    model = build_model(name, in_channels, num_classes, protocol,
                        R=num_spectral_points)
    return model.train()


def adam(model: torch.nn.Module) -> torch.optim.Adam:
    return torch.optim.Adam(model.parameters(), lr=LR,
                            weight_decay=WEIGHT_DECAY)


# --------------------------------------------------------------------------
# Part 1: one process
# --------------------------------------------------------------------------


def run_single(args: argparse.Namespace, data: Data, sampler,
               common: Dict[str, Any]) -> List[Dict[str, Any]]:
    seeds = torch.arange(data.num_nodes)
    num_classes = GRAPHS[args.graph][3]
    def stream():
        return batch_stream(sampler, seeds, args.batch_size, args.seed)

    # The subgraphs that the ``step`` entries train on, sampled before the
    # session: the same ones, in the same order, for every model.
    pool_stream = stream()
    pool = [next(pool_stream) for _ in range(args.pool)]
    del pool_stream
    subgraph_nodes = statistics.mean(b.num_nodes for b, _ in pool)
    subgraph_edges = statistics.mean(b.num_edges for b, _ in pool)

    def make_sample():
        batches = stream()
        return lambda: next(batches)

    def make_step(name):
        model = make_model(name, data.num_features, num_classes, args.seed,
                           args.num_spectral_points)
        optimizer = adam(model)
        batches = itertools.cycle(pool)

        def step():
            minibatch_step(model, optimizer, *next(batches))
        return step

    def make_sample_step(name):
        model = make_model(name, data.num_features, num_classes, args.seed,
                           args.num_spectral_points)
        optimizer = adam(model)
        batches = stream()
        return lambda: minibatch_step(model, optimizer, *next(batches))

    session = Session(args.steps, args.warmup, memory=args.memory,
                      seed=args.seed)
    session.add(('sample', ), make_sample)
    for name in args.models:
        session.add((name, 'step'), lambda name=name: make_step(name),
                    memory=True)
        session.add((name, 'sample+step'),
                    lambda name=name: make_sample_step(name))
    say(f'single process: {len(session.entries)} entries x '
        f'({args.warmup} warm-up + {args.steps} timed rounds)')
    results = session.run()
    sample = results[('sample', )]
    rows = []
    for name in args.models:
        step, total = results[(name, 'step')], results[(name, 'sample+step')]
        notes = [m.note for m in (sample, step, total) if m.note]
        rows.append(dict(
            common, part='single', model=name, processes=1,
            subgraph_nodes=f'{subgraph_nodes:.1f}',
            subgraph_edges=f'{subgraph_edges:.1f}',
            sample_s=sample.median, step_s=step.median, total_s=total.median,
            cpu_total_s=total.cpu_median,
            seeds_per_s=args.batch_size / total.median,
            tensor_bytes=step.tensor_bytes, rss_step_bytes=step.rss_bytes,
            note='; '.join(notes)))
        say(f'  {name}: sample {fmt_time(sample.median)}, step '
            f'{fmt_time(step.median)}, sample+step {fmt_time(total.median)}'
            f' -> {args.batch_size / total.median:,.0f} seeds/s')
    return rows


# --------------------------------------------------------------------------
# Part 2: 1 and 2 processes
# --------------------------------------------------------------------------


def ddp_worker(rank: int, world_size: int, store: str, out: str,
               shared: Dict[str, Any]) -> None:
    r"""One rank: join the gloo group through the file :obj:`store`, train
    ``warmup + steps`` global batches under DDP, write the timings of the
    timed ones to ``{out}.{rank}.json``."""
    args, sampler = shared['args'], shared['sampler']
    set_threads(args.threads)
    dist.init_process_group(
        'gloo', init_method=f'file://{store}', rank=rank,
        world_size=world_size, timeout=datetime.timedelta(seconds=600))
    try:
        record = ddp_train(rank, world_size, args, sampler, shared)
        with open(f'{out}.{rank}.json', 'w') as file:
            json.dump(record, file)
    except BaseException as error:
        # The traceback's frames would keep DDP alive past the group's end
        # (see tests/test_distributed.py: freed after
        # destroy_process_group(), DDP's reducer can deadlock):
        traceback.clear_frames(error.__traceback__)
        raise
    finally:
        dist.destroy_process_group()


def ddp_train(rank: int, world_size: int, args: argparse.Namespace, sampler,
              shared: Dict[str, Any]) -> Dict[str, Any]:
    model = make_model(shared['model'], shared['num_features'],
                       shared['num_classes'], args.seed,
                       args.num_spectral_points)
    ddp = DistributedDataParallel(model, find_unused_parameters=False)
    optimizer = adam(ddp)
    batches = batch_stream(sampler, shared['seeds'], args.batch_size,
                           args.seed, rank, world_size)
    record: Dict[str, Any] = dict(sample=[], step=[], cpu=[])
    for index in range(args.warmup + args.steps):
        if index == args.warmup:
            dist.barrier()
            before = reset_peak_rss()
            wall_start = time.perf_counter()
        start, cpu_start = time.perf_counter(), time.process_time()
        batch, global_batch_size = next(batches)
        sampled = time.perf_counter()
        minibatch_step(ddp, optimizer, batch, global_batch_size)
        end = time.perf_counter()
        if index >= args.warmup:
            record['sample'].append(sampled - start)
            record['step'].append(end - sampled)
            record['cpu'].append(time.process_time() - cpu_start)
    dist.barrier()
    record['wall'] = time.perf_counter() - wall_start
    record['rss_step_bytes'] = peak_rss_since(before)
    del ddp  # before the group is destroyed (see ddp_worker)
    return record


def run_ddp_once(args: argparse.Namespace, shared: Dict[str, Any],
                 world_size: int) -> Dict[str, Any]:
    r"""Fork :obj:`world_size` ranks (sharing this process's graph and
    sampler), wait for them (killed after :data:`DDP_TIMEOUT` seconds) and
    return their timings: per timed step, the slowest rank's sample + step;
    medians; the throughput over the wall time of the timed steps."""
    import torch.multiprocessing as mp
    folder = tempfile.mkdtemp(prefix='ikgat-minibatch-')
    out = osp.join(folder, 'rank')
    context = mp.start_processes(
        ddp_worker, args=(world_size, osp.join(folder, 'store'), out,
                          shared), nprocs=world_size, join=False,
        start_method='fork')
    deadline = time.monotonic() + DDP_TIMEOUT
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            for process in context.processes:
                if process.is_alive():
                    os.kill(process.pid, signal.SIGKILL)
            return dict(note=f'{world_size} process(es): killed after '
                        f'{DDP_TIMEOUT:g} s')
    ranks = []
    for rank in range(world_size):
        with open(f'{out}.{rank}.json') as file:
            ranks.append(json.load(file))
    totals = [max(r['sample'][i] + r['step'][i] for r in ranks)
              for i in range(args.steps)]
    return dict(
        sample=[max(r['sample'][i] for r in ranks) for i in range(args.steps)],
        step=[max(r['step'][i] for r in ranks) for i in range(args.steps)],
        total=totals,
        cpu=[max(r['cpu'][i] for r in ranks) for i in range(args.steps)],
        wall=max(r['wall'] for r in ranks),
        rss_step_bytes=max(r['rss_step_bytes'] or 0 for r in ranks))


def run_ddp(args: argparse.Namespace, data: Data, sampler,
            common: Dict[str, Any]) -> List[Dict[str, Any]]:
    worlds = (1, 2)
    runs = {(name, w): [] for name in args.models for w in worlds}
    order = list(runs)
    shuffle = random.Random(args.seed).shuffle
    for round_ in range(args.rounds):
        shuffle(order)
        for name, world_size in order:
            shared = dict(args=args, sampler=sampler, model=name,
                          seeds=torch.arange(data.num_nodes),
                          num_features=data.num_features,
                          num_classes=GRAPHS[args.graph][3])
            result = run_ddp_once(args, shared, world_size)
            runs[(name, world_size)].append(result)
            outcome = result.get('note') or (
                f'median global step '
                f'{fmt_time(statistics.median(result["total"]))}')
            say(f'ddp round {round_ + 1}/{args.rounds}: {name}, '
                f'{world_size} process(es): {outcome}')
    rows = []
    for name in args.models:
        medians = {}
        for world_size in worlds:
            done = [r for r in runs[(name, world_size)] if 'note' not in r]
            notes = [r['note'] for r in runs[(name, world_size)]
                     if 'note' in r]
            pooled = {key: [t for r in done for t in r[key]]
                      for key in ('sample', 'step', 'total', 'cpu')}
            total = (statistics.median(pooled['total'])
                     if pooled['total'] else float('nan'))
            medians[world_size] = total
            rows.append(dict(
                common, part='ddp', model=name, processes=world_size,
                sample_s=median_or_nan(pooled['sample']),
                step_s=median_or_nan(pooled['step']), total_s=total,
                cpu_total_s=median_or_nan(pooled['cpu']),
                seeds_per_s=args.batch_size / total,
                speedup=medians[1] / total if world_size > 1 else 1.0,
                rss_step_bytes=max((r['rss_step_bytes'] for r in done),
                                   default=None),
                note='; '.join(notes)))
    return rows


def median_or_nan(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float('nan')


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def settings_of(args: argparse.Namespace) -> str:
    r"""What makes two runs of a part comparable (the ``settings`` column,
    matched by ``--resume``)."""
    settings = (f'{args.graph} x{args.fraction:g} batch {args.batch_size} '
                f'fan-out {"/".join(map(str, args.fan_out))} threads '
                f'{args.threads} steps {args.steps}+{args.warmup} rounds '
                f'{args.rounds} seed {args.seed}')
    # (R joined the settings after the first runs, all at 64:)
    if args.num_spectral_points != NUM_SPECTRAL_POINTS:
        settings += f' R {args.num_spectral_points}'
    return settings


def fmt_rate(value: Any) -> str:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 'n/a'
    return 'n/a' if value != value else f'{value:,.0f}'


def fmt_seconds(value: Any) -> str:
    try:
        return fmt_time(float(value))
    except (TypeError, ValueError):
        return 'n/a'


def fmt_size(value: Any) -> str:
    return fmt_bytes(int(float(value))) if value not in (None, '') else 'n/a'


def commands_of(rows: List[Dict[str, Any]]) -> List[str]:
    r"""``Command: `...``` (or a list of them) that measured :obj:`rows`."""
    commands = list(dict.fromkeys(row['command'] for row in rows))
    if len(commands) == 1:
        return [f'Command: `{commands[0]}`']
    return ['Commands:', ''] + [f'- `{command}`' for command in commands]


def markdown(args: argparse.Namespace, rows: List[Dict[str, Any]],
             machine: List[str]) -> str:
    nodes, edges, features, classes = GRAPHS[args.graph]
    first = rows[0] if rows else {}
    lines = [
        '# Mini-batch training throughput (neighbour sampling) and the '
        'speed-up from 1 to 2 processes', '',
        *commands_of(rows), '',
        '- commit: ' + ', '.join(
            f'{part} at {commit}' for part, commit in dict(
                (r['part'], r['git_commit']) for r in rows).items()),
        *machine,
        f'- sampler: PyG NeighborLoader on {sampler_name()} (pyg-lib is not '
        f'installable on this machine)',
        f'- graph: synthetic {args.graph}-size x {args.fraction:g} '
        f'({int(float(first.get("nodes", 0))):,} nodes, '
        f'{int(float(first.get("edges", 0))):,} uniformly random directed '
        f'edges; full size {nodes:,} / '
        f'{edges:,}), {features} Gaussian features, {classes} random '
        f'classes; every node a training seed',
        f'- models: TwoLayerGAT, 8 heads x 8 hidden, 1 output head, dropout '
        f'0.6; `gat` = GATConv, `ikan-direct` = IKGATConv direct, R = '
        f'{args.num_spectral_points} for the layers with spectral points; '
        f'Adam (lr {LR}, weight decay '
        f'{WEIGHT_DECAY})',
        f'- batches: {args.batch_size} seeds, fan-out '
        f'{" ".join(map(str, args.fan_out))}; {args.warmup} warm-up + '
        f'{args.steps} timed steps, {args.threads} thread(s) per process',
        '- time per part (graph building aside): ' + ', '.join(
            f'{part} {float(part_s):.0f} s' for part, part_s in dict(
                (r['part'], r['part_s']) for r in rows).items()), '',
    ]
    single = [r for r in rows if r['part'] == 'single']
    if single:
        lines += [
            '## One process', '',
            'Medians over interleaved rounds (one Session: `sample`, each '
            "model's `step` on pre-sampled subgraphs, and its "
            '`sample+step`).  Throughput = batch size / median '
            'sample+step.', '',
            table(['model', 'subgraph nodes / edges', 'sample', 'step',
                   'sample+step', 'CPU (sample+step)', 'seeds/s',
                   'peak tensors (step)', 'peak RSS Δ (step)',
                   'RSS with graph + sampler', 'note'],
                  [[r['model'],
                    f'{float(r["subgraph_nodes"]):,.0f} / '
                    f'{float(r["subgraph_edges"]):,.0f}',
                    fmt_seconds(r['sample_s']), fmt_seconds(r['step_s']),
                    fmt_seconds(r['total_s']), fmt_seconds(r['cpu_total_s']),
                    fmt_rate(r['seeds_per_s']), fmt_size(r['tensor_bytes']),
                    fmt_size(r['rss_step_bytes']),
                    fmt_size(r['rss_graph_bytes']), r.get('note', '')]
                   for r in single]), '']
    ddp = [r for r in rows if r['part'] == 'ddp']
    if ddp:
        lines += [
            '## 1 and 2 processes (gloo, DDP)', '',
            f'The same global batches of {args.batch_size} seeds; each rank '
            f'samples and trains on its half.  Ranks forked from one '
            f'process that built the graph and the sampler (shared '
            f'copy-on-write).  Per global step: the slowest rank; medians '
            f'over the timed steps of {args.rounds} interleaved round(s).',
            '',
            table(['model', 'processes', 'sample', 'step', 'sample+step',
                   'seeds/s', 'speed-up', 'peak RSS Δ per rank', 'note'],
                  [[r['model'], r['processes'], fmt_seconds(r['sample_s']),
                    fmt_seconds(r['step_s']), fmt_seconds(r['total_s']),
                    fmt_rate(r['seeds_per_s']),
                    f'{float(r["speedup"]):.2f}x', fmt_size(
                        r['rss_step_bytes']), r.get('note', '')]
                   for r in ddp]), '']
    return '\n'.join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='python -m benchmarks.minibatch',
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--parts', nargs='+', choices=PARTS,
                        default=list(PARTS),
                        help='single: one process; ddp: 1 and 2 processes')
    parser.add_argument('--graph', choices=sorted(GRAPHS), default=None,
                        help='synthetic graph size (default: products)')
    parser.add_argument('--fraction', type=float, default=None,
                        help='scale of the graph (default: 1)')
    parser.add_argument('--models', nargs='+', default=list(DEFAULT_MODELS),
                        choices=list(MODELS))
    parser.add_argument('--batch-size', type=int, default=None,
                        help='seeds per global batch (default: 1024)')
    parser.add_argument('--fan-out', type=int, nargs='+', default=None,
                        help='in-neighbours per hop (default: 15 10)')
    parser.add_argument('--steps', type=int, default=None,
                        help='timed steps (rounds) (default: 10)')
    parser.add_argument('--warmup', type=int, default=None,
                        help='untimed steps first (default: 2)')
    parser.add_argument('--rounds', type=int, default=None,
                        help='ddp: interleaved runs of 1 and 2 processes '
                        '(default: 3)')
    parser.add_argument('--pool', type=int, default=None,
                        help='single: subgraphs sampled before the session '
                        'for the step entries (default: steps + warmup)')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch threads per process (default: 1)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--num-spectral-points', type=int,
                        default=NUM_SPECTRAL_POINTS,
                        help='R of the layers with spectral points (default: '
                        f'{NUM_SPECTRAL_POINTS}, the Planetoid protocol\'s)')
    parser.add_argument('--no-memory', dest='memory', action='store_false',
                        help='skip the profiler pass for peak tensors')
    parser.add_argument('--results-dir', default=None,
                        help=f'where minibatch.csv and minibatch.md go '
                        f'(default: {RESULTS_DIR}; with --smoke, a folder in '
                        f'{tempfile.gettempdir()})')
    parser.add_argument('--resume', action='store_true',
                        help='skip a part whose rows with these settings '
                        'are in the CSV already')
    parser.add_argument('--smoke', action='store_true',
                        help='a tiny graph and few steps (seconds); only '
                        'the single part unless --parts is given')
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)
    defaults = dict(graph='products', fraction=1.0, batch_size=1024,
                    fan_out=[15, 10], steps=10, warmup=2, rounds=3)
    if args.smoke:
        defaults.update(SMOKE)
        if '--parts' not in args.argv:
            args.parts = ['single']
        if args.results_dir is None:
            args.results_dir = osp.join(tempfile.gettempdir(),
                                        'ikgat-minibatch-smoke')
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.results_dir is None:
        args.results_dir = RESULTS_DIR
    if args.pool is None:
        args.pool = args.steps + args.warmup
    if not 0 < args.fraction <= 1:
        parser.error(f'--fraction must be in (0, 1] (got {args.fraction})')
    for flag in ('batch_size', 'steps', 'rounds', 'pool', 'threads'):
        if getattr(args, flag) < 1:
            parser.error(f'--{flag.replace("_", "-")} must be at least 1 '
                         f'(got {getattr(args, flag)})')
    if args.warmup < 0:
        parser.error(f'--warmup must be at least 0 (got {args.warmup})')
    if 'ddp' in args.parts and args.batch_size < 2:
        parser.error('--batch-size must be at least 2 for the ddp part '
                     '(one seed per process)')
    if any(f == 0 or f < -1 for f in args.fan_out):
        parser.error(f'--fan-out takes a positive count or -1 per hop (got '
                     f'{" ".join(map(str, args.fan_out))})')
    cores = os.cpu_count() or 1
    if 'ddp' in args.parts and 2 * args.threads > cores:
        parser.error(f'--threads {args.threads}: 2 processes x '
                     f'{args.threads} threads exceed the {cores} cores; '
                     f'use --threads {max(1, cores // 2)}')
    try:
        require_sampler()
    except RuntimeError as error:
        parser.error(str(error))
    try:
        os.makedirs(args.results_dir, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=args.results_dir)
        probe.close()
    except OSError as error:
        parser.error(f'--results-dir {args.results_dir}: not writable '
                     f'({error.strerror}); give a writable folder')
    return args


def latest_rows(csv_path: str, settings: str,
                models: Sequence[str]) -> List[Dict[str, Any]]:
    r"""The last row of each part, model and number of processes in
    :obj:`csv_path` measured with :obj:`settings`, in the order of the
    report."""
    latest: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for row in read_results(csv_path, KEY_COLUMNS, NUMERIC_COLUMNS):
        if row['settings'] == settings and row['model'] in models:
            latest[(row['part'], row['model'], row['processes'])] = row
    return [latest[key] for key in sorted(
        latest, key=lambda k: (PARTS.index(k[0]), list(models).index(k[1]),
                               int(k[2])))]


def main(argv: Optional[List[str]] = None) -> str:
    args = parse_args(argv)
    start = time.perf_counter()
    set_threads(args.threads)
    csv_path = osp.join(args.results_dir, 'minibatch.csv')
    md_path = osp.join(args.results_dir, 'minibatch.md')
    writer = ResultsWriter(csv_path, COLUMNS)
    settings, commit = settings_of(args), git_commit()
    command = ' '.join(['python -m benchmarks.minibatch',
                        *(shlex.quote(a) for a in args.argv)])
    existing = latest_rows(csv_path, settings, args.models)
    machine = machine_info()
    todo = []
    for part in args.parts:
        done = [row for row in existing if row['part'] == part]
        if args.resume and done:
            say(f'resume: part {part} is in {csv_path} already '
                f'({len(done)} rows)')
        else:
            todo.append(part)
    if todo:
        say(f'building the graph: {args.graph} x {args.fraction:g} ...')
        data = build_graph(args.graph, args.fraction)
        sampler = neighbor_sampler(data, args.fan_out)
        common = dict(
            settings=settings, graph=args.graph, fraction=args.fraction,
            nodes=data.num_nodes, edges=data.num_edges, threads=args.threads,
            batch_size=args.batch_size,
            fan_out=' '.join(map(str, args.fan_out)), steps=args.steps,
            rss_graph_bytes=current_rss(), sampler=sampler_name(),
            git_commit=commit, command=command)
        say(f'graph and sampler built: {data.num_nodes:,} nodes, '
            f'{data.num_edges:,} edges, RSS '
            f'{fmt_bytes(common["rss_graph_bytes"])}, '
            f'{time.perf_counter() - start:.0f} s')
        for part in todo:
            part_start = time.perf_counter()
            run = run_single if part == 'single' else run_ddp
            rows = run(args, data, sampler, common)
            for row in rows:
                row['part_s'] = time.perf_counter() - part_start
                writer.write(row)
    # The report holds the latest rows of every part measured with these
    # settings, by this run or an earlier one, each with its commit:
    rows = latest_rows(csv_path, settings, args.models)
    text = markdown(args, rows, machine)
    write_text(md_path, text)
    print(text)
    print(f'wrote {md_path} and {csv_path}')
    return text


if __name__ == '__main__':
    main()
