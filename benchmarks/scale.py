r"""Full-batch training steps on synthetic graphs of OGB size: step time and
peak memory of GATConv and IKGATConv (issue 7, item 3).

The graph is *synthetic*: the node, edge and feature counts of ogbn-products
(2,449,029 nodes, 61,859,140 directed edges, 100 features, 47 classes) or
ogbn-arxiv (169,343 nodes, 1,166,243 edges, 128 features, 40 classes), with
uniformly random edges, Gaussian features and random labels.  Memory and time
of one layer depend on the counts, not on which edges they are (the random
edges scatter more than real ones, so caches do slightly worse).

The model, the same for every layer: one attention layer with 8 heads x 8
channels (concatenated, self-loops added, no dropout), ELU, a linear
classifier; one training step is forward, cross-entropy over all nodes,
backward and an Adam step.  Models:

* ``gat``: :class:`torch_geometric.nn.GATConv`;
* ``ikgat``: :class:`ikgat.IKGATConv` (``kernel='direct'``, ``R = 64``),
  with its defaults for an ``edge_index`` tensor: attention weights from the
  chunked :func:`ikgat.ops.edge_softmax.kernel_edge_softmax` and the
  memory-lean :func:`ikgat.ops.aggregation.attention_aggregate`;
* ``ikgat-propagate``: the same layer forced onto PyG's ``propagate``
  (gather, multiply, scatter: an :math:`E \times H \times C` message tensor)
  and ``edge_updater``, to measure what the lean operators save;
* ``ikgat-edge-updater``: lean aggregation, but the attention weights from
  ``edge_update`` (:math:`E \times H \times 3` gathers, PyG's softmax)
  instead of :func:`ikgat.ops.edge_softmax.kernel_edge_softmax`.

Each model and size runs in its own subprocess (one thread by default), so
an out-of-memory or a crash is reported as such and the next one still runs.
The subprocess caps its address space (``RLIMIT_AS``) at ``--budget-gb`` (or
the available memory less ``--reserve-gb``, if smaller) above what it had
mapped after its imports, so it fails with an allocation error instead of
calling in the kernel's OOM killer.  Sizes run in ascending order;
before a size, the peak of each model is extrapolated from the sizes already
measured (linearly through the two largest, proportionally from one), and
the size is skipped when that exceeds the budget or the memory available.

Reported per run: the median wall-clock and process CPU time of a step over
the timed steps (after warm-up; on a shared machine the CPU time is the
steadier figure), the peak resident set of the whole process (``VmHWM`` of
``/proc/self/status``) and its growth over the resident set once the graph
and the model were built (what the training steps added)::

    python -m benchmarks.scale --graph products \
        --fractions 0.0625 0.25 1 --threads 1 --output /tmp/products.md
    python -m benchmarks.scale --graph arxiv --fractions 1 \
        --models gat ikgat ikgat-propagate --steps 5 --threads 1

``--breakdown`` instead lists the tensors alive at the memory peak of one
step (bytes per edge), which is where the memory of a step goes.  The
tables and notes of these runs are in ``benchmarks/results/scale.md``::

    python -m benchmarks.scale --breakdown --fraction 0.0078125 \
        --models gat ikgat ikgat-edge-updater ikgat-propagate
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional

GIB = 1 << 30
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: nodes, directed edges, features, classes
GRAPHS = {
    'products': (2_449_029, 61_859_140, 100, 47),
    'arxiv': (169_343, 1_166_243, 128, 40),
}
MODELS = ('gat', 'ikgat', 'ikgat-propagate', 'ikgat-edge-updater')
HEADS, CHANNELS, NUM_FEATURES = 8, 8, 64


def proc_status(field: str) -> int:
    r"""A ``/proc/self/status`` entry in bytes (``VmRSS``, ``VmHWM``, ...)."""
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def mem_available() -> int:
    with open('/proc/meminfo') as meminfo:
        for line in meminfo:
            if line.startswith('MemAvailable:'):
                return int(line.split()[1]) * 1024
    raise KeyError('MemAvailable')


def machine() -> Dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as info:
            names = [line.split(':', 1)[1].strip() for line in info
                     if line.startswith('model name')]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    with open('/proc/meminfo') as meminfo:
        total = int(meminfo.readline().split()[1]) * 1024
    import torch
    return {
        'cpu': cpu,
        'cores': str(os.cpu_count()),
        'ram': f'{total / GIB:.1f} GiB',
        'load average': ' '.join(f'{v:.2f}' for v in os.getloadavg()),
        'python': platform.python_version(),
        'torch': torch.__version__,
    }


# ------------------------------------------------------------------- child


def build_model(name: str, in_channels: int, num_classes: int):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GATConv

    from ikgat import IKGATConv

    class OneLayer(torch.nn.Module):
        def __init__(self, conv):
            super().__init__()
            self.conv = conv
            self.classifier = torch.nn.Linear(HEADS * CHANNELS, num_classes)

        def forward(self, x, edge_index):
            return self.classifier(F.elu(self.conv(x, edge_index)))

    if name == 'gat':
        conv = GATConv(in_channels, CHANNELS, heads=HEADS)
    else:
        conv = IKGATConv(in_channels, CHANNELS, heads=HEADS, kernel='direct',
                         num_spectral_points=NUM_FEATURES)
        if name == 'ikgat-propagate':  # force PyG's gather-multiply-scatter
            conv.lean_aggregation = False
        if name in ('ikgat-propagate', 'ikgat-edge-updater'):
            # force edge_update's [E, H, 3] gathers and PyG's softmax
            conv.lean_edge_softmax = False
    return OneLayer(conv)


def make_graph(graph: str, fraction: float):
    r"""Features, random edges and random labels of the synthetic graph."""
    import torch

    nodes, edges, features, classes = GRAPHS[graph]
    nodes, edges = round(nodes * fraction), round(edges * fraction)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(nodes, features, generator=generator)
    edge_index = torch.randint(0, nodes, (2, edges), generator=generator)
    y = torch.randint(0, classes, (nodes, ), generator=generator)
    return x, edge_index, y


def tensor_breakdown(args: argparse.Namespace, top: int = 10) -> None:
    r"""Print, per model, the peak of the bytes held by live tensors during
    one training step and the largest tensors alive at that peak, in bytes
    per edge (self-loops included): where the memory of a step goes."""
    import torch
    import torch.nn.functional as F

    from benchmarks.harness.live_tensors import LiveTensorBytes

    torch.set_num_threads(args.threads)
    x, edge_index, y = make_graph(args.graph, args.fraction)
    edges = edge_index.size(1) + x.size(0)
    for name in args.models:
        torch.manual_seed(0)
        model = build_model(name, x.size(1), GRAPHS[args.graph][3])
        tracker = LiveTensorBytes(keep_peak_tensors=True)
        tracker.phase = 'forward'
        with tracker:
            loss = F.cross_entropy(model(x, edge_index), y)
            tracker.phase = 'backward'
            loss.backward()
        print(f'{name}: peak of live tensors {tracker.peak / 2**20:.1f} MiB '
              f'= {tracker.peak / edges:.0f} bytes per edge ({edges:,} '
              f'edges with self-loops)')
        for size, phase, op, shape, dtype in sorted(tracker.at_peak)[::-1][
                :top]:
            print(f'  {size / edges:7.1f} B/edge  {phase:8s} {op:14s} '
                  f'{shape} {dtype}')


def run_child(args: argparse.Namespace) -> Dict[str, object]:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    # One step on a 10-node graph first: every lazy import and one-time
    # allocation happens before the cap, so that only the measured run can
    # meet it (a failed import under the cap crashes instead of raising).
    tiny_x, tiny_edges, tiny_y = make_graph(args.graph,
                                            10 / GRAPHS[args.graph][0])
    tiny = build_model(args.model, tiny_x.size(1), GRAPHS[args.graph][3])
    F.cross_entropy(tiny(tiny_x, tiny_edges), tiny_y).backward()
    del tiny, tiny_x, tiny_edges, tiny_y
    rss_imports = proc_status('VmRSS')
    limit = proc_status('VmSize') + int(args.budget_gb * GIB)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    row: Dict[str, object] = dict(model=args.model)
    stage = 'building the graph'
    try:
        x, edge_index, y = make_graph(args.graph, args.fraction)
        row.update(nodes=x.size(0), edges=edge_index.size(1))
        torch.manual_seed(0)
        model = build_model(args.model, x.size(1), GRAPHS[args.graph][3])
        optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
        rss_data = proc_status('VmRSS')
        times: List[float] = []
        cpu_times: List[float] = []
        for step in range(args.warmup + args.steps):
            stage = f'training step {step + 1}'
            start, cpu_start = time.perf_counter(), time.process_time()
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x, edge_index), y)
            loss.backward()
            optimizer.step()
            del loss
            times.append(time.perf_counter() - start)
            cpu_times.append(time.process_time() - cpu_start)
        row.update(status='ok', times=times[args.warmup:],
                   cpu_times=cpu_times[args.warmup:],
                   rss_imports=rss_imports, rss_data=rss_data,
                   peak=proc_status('VmHWM'))
    except (RuntimeError, MemoryError) as error:
        message = (str(error).splitlines() or [''])[0]
        out_of_memory = isinstance(error, MemoryError) or (
            "can't allocate memory" in message)
        if "can't allocate memory" in message:  # keep the size asked for
            message = message[message.index("can't allocate"):]
            message = message.split(' Error code')[0]
        message = message[:200]
        row.update(status='out of memory' if out_of_memory else 'error',
                   note=f'{stage}: {type(error).__name__}: {message}',
                   peak=proc_status('VmHWM'), rss_imports=rss_imports)
    row['cap'] = int(args.budget_gb * GIB)
    return row


# ------------------------------------------------------------------ parent


def predict_peak(measured: List[Dict[str, object]],
                 fraction: float) -> Optional[float]:
    r"""The peak at :obj:`fraction` of the graph, extrapolated linearly
    through the two largest sizes measured, proportionally from one."""
    points = sorted((row['fraction'], row['peak']) for row in measured
                    if row.get('status') == 'ok')
    if not points:
        return None
    if len(points) == 1:
        (f0, p0), = points
        return p0 * fraction / f0
    (f0, p0), (f1, p1) = points[-2:]
    return p1 + (p1 - p0) / (f1 - f0) * (fraction - f1)


def run_parent(args: argparse.Namespace) -> List[Dict[str, object]]:
    rows: List[Dict[str, object]] = []
    for fraction in sorted(args.fractions):
        for model in args.models:
            earlier = [row for row in rows if row['model'] == model]
            if any(row.get('status') == 'out of memory' for row in earlier):
                rows.append(dict(model=model, fraction=fraction,
                                 status='skipped',
                                 note='out of memory at a smaller size'))
                continue
            predicted = predict_peak(earlier, fraction)
            available = mem_available() - args.reserve_gb * GIB
            cap = min(args.budget_gb * GIB, available)
            if predicted is not None and predicted > cap:
                rows.append(dict(
                    model=model, fraction=fraction, status='skipped',
                    predicted=predicted,
                    note=(f'extrapolated peak {predicted / GIB:.1f} GiB > '
                          f'budget {args.budget_gb:g} GiB' if predicted >
                          args.budget_gb * GIB else
                          f'extrapolated peak {predicted / GIB:.1f} GiB > '
                          f'{available / GIB:.1f} GiB available')))
                print(f'[{fraction:g} {model}] {rows[-1]["note"]}',
                      flush=True)
                continue
            command = [
                sys.executable, '-m', 'benchmarks.scale', '--child',
                '--graph', args.graph, '--fraction', str(fraction),
                '--model', model, '--steps', str(args.steps), '--warmup',
                str(args.warmup), '--threads', str(args.threads),
                '--budget-gb', f'{cap / GIB:.2f}'
            ]
            print(f'[{fraction:g} {model}] running (cap {cap / GIB:.1f} '
                  f'GiB) ...', flush=True)
            start = time.perf_counter()
            try:
                done = subprocess.run(command, capture_output=True, text=True,
                                      timeout=args.timeout, cwd=REPOSITORY)
                lines = done.stdout.strip().splitlines()
                if lines and lines[-1].startswith('{'):
                    row = json.loads(lines[-1])
                else:
                    crash = (f'killed by signal {-done.returncode}'
                             if done.returncode < 0 else
                             f'exit code {done.returncode}')
                    tail = done.stderr.strip().splitlines()[-1:]
                    row = dict(model=model, status='crashed',
                               note=f'{crash} {" ".join(tail)[:200]}')
            except subprocess.TimeoutExpired:
                row = dict(model=model, status='timed out',
                           note=f'over {args.timeout} s')
            row.update(fraction=fraction, predicted=predicted,
                       wall=time.perf_counter() - start)
            rows.append(row)
            print(f'[{fraction:g} {model}] {summary(row)}', flush=True)
    return rows


def summary(row: Dict[str, object]) -> str:
    if row.get('status') != 'ok':
        return f"{row.get('status')}: {row.get('note', '')}"
    return (f"step {statistics.median(row['times']):.2f} s (CPU "
            f"{statistics.median(row['cpu_times']):.2f} s), peak "
            f"{row['peak'] / GIB:.2f} GiB, growth "
            f"{(row['peak'] - row['rss_data']) / GIB:.2f} GiB")


def markdown(args: argparse.Namespace, rows: List[Dict[str, object]],
             before: Dict[str, str], after: Dict[str, str]) -> str:
    nodes, edges, features, classes = GRAPHS[args.graph]
    lines = [
        f'## {args.graph}-size synthetic graph, full-batch training steps',
        '',
        f'Command: `python -m benchmarks.scale {" ".join(args.argv)}`',
        '',
        f'Graph: {nodes:,} nodes x fraction, {edges:,} random directed edges '
        f'x fraction (plus one self-loop per node, added by both layers), '
        f'{features} Gaussian features, {classes} random classes.  Model: '
        f'one layer, {HEADS} heads x {CHANNELS} channels, ELU, linear '
        f'classifier; step = forward + cross-entropy + backward + Adam.  '
        f'{args.warmup} warm-up step(s), median of {args.steps} timed steps; '
        f'{args.threads} thread(s); memory cap per run {args.budget_gb:g} '
        f'GiB or MemAvailable - {args.reserve_gb:g} GiB if less (RLIMIT_AS '
        f'above the mapped size after imports).',
        '',
        f'Machine: {before["cpu"]}, {before["cores"]} cores, {before["ram"]} '
        f'RAM; load average {before["load average"]} (start), '
        f'{after["load average"]} (end); Python {before["python"]}, '
        f'torch {before["torch"]}.',
        '',
        '| fraction | nodes | edges | model | step (s) | CPU (s) | '
        'steps (s) | peak RSS (GiB) | growth (GiB) | status |',
        '|---:|---:|---:|---|---:|---:|---|---:|---:|---|',
    ]
    for row in rows:
        fraction = row['fraction']
        n, e = round(nodes * fraction), round(edges * fraction)
        if row.get('status') == 'ok':
            times = row['times']
            cells = [
                f'{statistics.median(times):.2f}',
                f"{statistics.median(row['cpu_times']):.2f}",
                ' '.join(f'{t:.2f}' for t in times),
                f"{row['peak'] / GIB:.2f}",
                f"{(row['peak'] - row['rss_data']) / GIB:.2f}", 'ok'
            ]
        else:
            peak = row.get('peak')
            note = row.get('note', '')
            if row.get('status') == 'out of memory':
                note += f" (cap {row['cap'] / GIB:.1f} GiB)"
            cells = [
                '', '', '', f'{peak / GIB:.2f} (at failure)' if peak else '',
                '',
                f"{row.get('status')}: {note}"
            ]
        lines.append(f'| {fraction:g} | {n:,} | {e:,} | {row["model"]} | ' +
                     ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--graph', choices=sorted(GRAPHS),
                        default='products')
    parser.add_argument('--fractions', type=float, nargs='+',
                        default=[1 / 16, 1 / 4, 1.0],
                        help='graph sizes as fractions of the full graph')
    parser.add_argument('--models', nargs='+', choices=MODELS,
                        default=['gat', 'ikgat'])
    parser.add_argument('--steps', type=int, default=3)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--budget-gb', type=float, default=16.0,
                        help='memory cap of one run (GiB); lowered to what '
                        'is available minus --reserve-gb')
    parser.add_argument('--reserve-gb', type=float, default=3.0,
                        help='memory left to other work: skip a size whose '
                        'extrapolated peak exceeds MemAvailable minus this')
    parser.add_argument('--timeout', type=float, default=3600.0,
                        help='seconds per run')
    parser.add_argument('--output', help='write the Markdown table here')
    parser.add_argument('--breakdown', action='store_true',
                        help='instead of timing: the live tensors at the '
                        'memory peak of one step, in this process, at '
                        '--fraction of the graph (keep it small)')
    parser.add_argument('--fraction', type=float, default=1 / 128)
    parser.add_argument('--child', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--model', choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)

    if args.child:
        print(json.dumps(run_child(args)), flush=True)
        return
    if args.breakdown:
        tensor_breakdown(args)
        return
    before = machine()
    rows = run_parent(args)
    text = markdown(args, rows, before, machine())
    print(text)
    if args.output:
        with open(args.output, 'w') as out:
            out.write(text)


if __name__ == '__main__':
    main()
