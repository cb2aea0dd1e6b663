r"""GPU speed study (issue #16, item 1): one attention layer, forward and
backward, on synthetic graphs of Cora, PubMed, ogbn-arxiv and
ogbn-products size, against the GPU's copy bandwidth; and the fused Triton
attention alone against the bytes it must move.

Graphs are synthetic (uniformly random edges, Gaussian features) with the
real node, edge and feature counts; the layers add self-loops as usual.
Models: ``GATConv``, ``IKGATConv`` (``kernel='rbf'``), ``IKGATConv``
(``kernel='direct'``, the default :math:`R = 64` spectral points) and
``MIKANConv``, all 8 heads :math:`\times` 8 channels, in float32 and under
bfloat16 autocast.  On CUDA the ikgat layers run their attention through the
fused Triton kernel (``fused_attention``, see ``IKGATConv``'s *Fast paths*;
not in training with attention dropout, which these models do not use);
the ``-unfused`` variants switch it off (``fused_attention=False``: the
chunked edge softmax and aggregation), so both paths are timed in the same
rounds.  On CPU (``--smoke``) both variants run the unfused path.  One step
is ``zero_grad``, forward, ``out.sum()``, backward.

Timing: CUDA events around each step after warm-up steps; every round runs
each model once (interleaved, so that clock and thermal drift hit all models
alike), and the median over rounds is reported.  Memory: the peak of
``torch.cuda.max_memory_allocated`` during one step, and that peak less what
was allocated before the step (graph, features, parameters).

Copy bandwidth: a ``--copy-mib`` tensor copied with ``Tensor.copy_``, timed
with events, counting bytes read plus bytes written.

Training step (item 5): the two-layer model of the GAT paper
(``TwoLayerGAT``: the layer with 8 heads x 8, ELU, the layer with one head
of as many channels as classes; no dropout), full batch, cross-entropy
over every node against random labels, backward and an Adam step, in
float32, for ``--training-models`` (GATConv, IKGATConv ``direct`` fused and
unfused) on ``--training-graphs`` (the largest graph of the run by
default), one model at a time: the median time and the peak memory, or
OOM.  The layer study measures each model's peak with only its own graph
caches (self-loops and sorted edges, :mod:`ikgat.nn.graph_cache`).
:mod:`benchmarks.gpu_memory` predicts these peaks from the meta device.

Fused kernel: :func:`ikgat.ops.gat_attention.fused_attention` on random
node scores (:math:`N \times 8 \times 3`) and features (:math:`N \times 8
\times 8`) over the graph with self-loops, forward and forward+backward, in
float32 and bfloat16 inputs; reported with two byte counts for the forward
pass: *compulsory* (every node tensor and index array once, as if the
gathers hit the cache) and *gathered* (the source rows read once per edge);
their effective bandwidths bracket what the kernel achieves, to be compared
with the copy bandwidth.  The unfused path (``kernel_edge_softmax`` then
``attention_aggregate``) is timed beside it when importable.

Run on a GPU machine (see :mod:`benchmarks.gpu_memory` for the memory
each step should need; an OOM is reported as such)::

    python -m benchmarks.gpu_speed --output benchmarks/results/gpu_speed.md
    # or graph by graph, to stay within a time limit:
    python -m benchmarks.gpu_speed --graphs cora pubmed arxiv --output a.md
    python -m benchmarks.gpu_speed --graphs products --rounds 5 --output b.md
    # seconds on CPU, tiny graphs (checks the script, numbers meaningless):
    python -m benchmarks.gpu_speed --smoke --output /tmp/gpu_speed.md

Imports ikgat's public layers and atomic writes, torch and torch_geometric
(and the fused kernel module), and from ``benchmarks/`` only the commit of
the checkout
(:func:`benchmarks.harness.provenance.git_commit`, which a copy without its
``.git`` takes from ``IKGAT_GIT_COMMIT``).
"""
import argparse
import json
import os
import os.path as osp
import platform
import statistics
import sys
import time
from contextlib import nullcontext
from typing import Callable, Dict, List, Optional

import torch

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.runtime import compiled as compile_model

#: name -> (nodes, directed edges, features, classes): the real datasets'.
GRAPHS = {
    'cora': (2_708, 10_556, 1_433, 7),
    'pubmed': (19_717, 88_648, 500, 3),
    'arxiv': (169_343, 1_166_243, 128, 40),
    'products': (2_449_029, 61_859_140, 100, 47),
}
SMOKE_GRAPHS = {'tiny': (40, 160, 16, 4), 'small': (120, 600, 32, 5)}
LAYERS = ['GATConv', 'IKGATConv-rbf', 'IKGATConv-direct',
          'IKGATConv-implicit', 'MIKANConv']
#: Every layer eager and through torch.compile (suffix '-compiled'), and
#: the ikgat layers without the fused kernel (suffix '-unfused').
MODELS = (LAYERS + [f'{name}-compiled' for name in LAYERS] + [
    'IKGATConv-rbf-unfused', 'IKGATConv-direct-unfused', 'MIKANConv-unfused'
])
#: The graph transformers (opt-in, ``--models``): PyG's TransformerConv and
#: the ikgat drop-ins, eager; TransformerConv and ``direct`` compiled too;
#: ``direct`` also on its PyTorch path (``-unfused``).
TRANSFORMER_MODELS = ['TransformerConv', 'TransformerConv-compiled',
                      'IKTransformerConv-rbf', 'IKTransformerConv-direct',
                      'IKTransformerConv-direct-compiled',
                      'IKTransformerConv-direct-unfused',
                      'IKTransformerConv-implicit', 'MIKANTransformerConv']
#: The models of the two-layer training step (item 5).
TRAINING_MODELS = ['GATConv', 'GATConv-compiled', 'IKGATConv-direct',
                   'IKGATConv-direct-compiled', 'IKGATConv-direct-unfused']
PRECISIONS = ['float32', 'bf16-autocast']
HEADS, CHANNELS = 8, 8


class Timer:
    """Times a callable: CUDA events on a GPU, perf_counter on CPU."""
    def __init__(self, device: torch.device):
        self.cuda = device.type == 'cuda'

    def __call__(self, fn: Callable[[], object]) -> float:
        """Milliseconds of one call."""
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop)
        begin = time.perf_counter()
        fn()
        return (time.perf_counter() - begin) * 1e3


def synthetic_graph(num_nodes: int, num_edges: int, num_features: int,
                    device: torch.device, seed: int):
    generator = torch.Generator(device=device).manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), device=device,
                               generator=generator)
    x = torch.randn(num_nodes, num_features, device=device,
                    generator=generator)
    return x, edge_index


def build_model(name: str, in_channels: int,
                num_classes: Optional[int] = None,
                add_self_loops: bool = True,
                attention_dropout: float = 0.0) -> torch.nn.Module:
    """One layer of :obj:`name` (8 heads x 8), or with :obj:`num_classes`
    the two-layer model of the training step (``TwoLayerGAT``: the layer,
    8 heads x 8, ELU, the layer with one head of :obj:`num_classes`), with
    :obj:`attention_dropout` on the attention weights (and, in the
    two-layer model, on the features); a name ending in ``-compiled`` is
    the model through :func:`torch.compile` (dynamic shapes)."""
    from torch_geometric.nn import GATConv, TransformerConv

    from ikgat import (
        IKGATConv,
        IKTransformerConv,
        MIKANConv,
        MIKANTransformerConv,
    )
    from ikgat.models import TwoLayerGAT
    layers = {
        'GATConv': (GATConv, {}),
        'IKGATConv-rbf': (IKGATConv, dict(kernel='rbf')),
        # the default R = 64 spectral points:
        'IKGATConv-direct': (IKGATConv, dict(kernel='direct')),
        'MIKANConv': (MIKANConv, {}),
        # Transformers add no self-loops:
        'TransformerConv': (TransformerConv, {}),
        'MIKANTransformerConv': (MIKANTransformerConv, {}),
    }
    layers['IKGATConv-implicit'] = (IKGATConv, dict(kernel='implicit'))
    for kernel in ('rbf', 'direct', 'implicit'):
        layers[f'IKTransformerConv-{kernel}'] = (IKTransformerConv,
                                                 dict(kernel=kernel))
    if name not in MODELS + TRANSFORMER_MODELS:
        raise ValueError(f"unknown model {name!r}; choose from "
                         f"{MODELS + TRANSFORMER_MODELS}")
    compiled = name.endswith('-compiled')
    base = name[:-len('-compiled')] if compiled else name
    unfused = base.endswith('-unfused')  # the layer without the fused kernel
    base = base[:-len('-unfused')] if unfused else base
    conv, kwargs = layers[base]
    if 'Transformer' not in base:
        kwargs = dict(kwargs, add_self_loops=add_self_loops)
    if num_classes is None:
        model = conv(in_channels, CHANNELS, heads=HEADS,
                     dropout=attention_dropout, **kwargs)
    else:
        model = TwoLayerGAT(in_channels, CHANNELS, num_classes, conv,
                            heads=HEADS, dropout=attention_dropout,
                            conv_kwargs=kwargs)
    if unfused:
        for module in model.modules():
            if isinstance(module, (IKGATConv, IKTransformerConv)):
                module.fused_attention = False
    return compile_model(model) if compiled else model


def layer_step(model: torch.nn.Module, x: torch.Tensor,
               edge_index: torch.Tensor, device: torch.device,
               precision: str) -> Callable[[], None]:
    """One step of the layer study: zero_grad, forward, out.sum(),
    backward."""
    def step():
        model.zero_grad(set_to_none=True)
        with autocast(device, precision):
            out = model(x, edge_index)
        out.float().sum().backward()
    return step


def training_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                  x: torch.Tensor, edge_index: torch.Tensor,
                  y: torch.Tensor) -> Callable[[], None]:
    """One full-batch training step: zero_grad, forward, cross-entropy over
    every node, backward, optimizer step."""
    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x, edge_index), y)
        loss.backward()
        optimizer.step()
    return step


def autocast(device: torch.device, precision: str):
    if precision == 'float32':
        return nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def is_oom(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or (
        isinstance(error, RuntimeError) and 'out of memory' in str(error))


def free_memory(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def fits(step: Callable[[], object], device: torch.device) -> bool:
    """Run :obj:`step` once; :obj:`False` (and the memory freed) if it ran
    out of memory."""
    try:
        step()
    except Exception as error:  # noqa: BLE001
        if not is_oom(error):
            raise
        free_memory(device)
        return False
    return True


def measure_interleaved(steps: Dict[str, Callable[[], object]],
                        timer: Timer, warmup: int,
                        rounds: int) -> Dict[str, object]:
    """Median milliseconds per entry over interleaved rounds, after warm-up;
    'OOM' for an entry that ran out of memory in any of them."""
    device = timer_device(timer)
    results: Dict[str, object] = {}
    alive = {name: step for name, step in steps.items()
             if all(fits(step, device) for _ in range(warmup))}
    results.update({name: 'OOM' for name in steps if name not in alive})
    times: Dict[str, List[float]] = {name: [] for name in alive}
    for _ in range(rounds):
        for name, step in list(alive.items()):
            if not fits(lambda name=name, step=step: times[name].append(
                    timer(step)), device):
                results[name] = 'OOM'
                del alive[name], times[name]
    for name, values in times.items():
        results[name] = statistics.median(values)
    return results


def timer_device(timer: Timer) -> torch.device:
    return torch.device('cuda' if timer.cuda else 'cpu')


def isolated_peak(step: Callable[[], object], device: torch.device):
    """:func:`peak_memory` of :obj:`step` with only its own graph caches:
    the self-loops and sorted edges that other models left with the graph
    (:mod:`ikgat.nn.graph_cache`) are freed, and one step rebuilds those of
    this model before the measured one."""
    from ikgat.nn import graph_cache
    graph_cache.clear()
    free_memory(device)
    if not fits(step, device):
        return 'OOM', 'OOM'
    return peak_memory(step, device)


def peak_memory(step: Callable[[], object], device: torch.device):
    """(peak bytes during one step, peak less the bytes held before it)."""
    if device.type != 'cuda':
        return None, None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    if not fits(step, device):
        return 'OOM', 'OOM'
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    return peak, peak - before


def copy_bandwidth(device: torch.device, mib: int, timer: Timer,
                   rounds: int) -> float:
    """GB/s of Tensor.copy_, counting the bytes read and written."""
    numel = mib * (1 << 20) // 4
    source = torch.randn(numel, device=device)
    target = torch.empty_like(source)
    for _ in range(3):
        target.copy_(source)
    ms = statistics.median(timer(lambda: target.copy_(source))
                           for _ in range(rounds))
    return 2 * source.numel() * 4 / (ms * 1e-3) / 1e9


def layer_rows(graph: str, size, device: torch.device, timer: Timer,
               args) -> List[dict]:
    num_nodes, num_edges, num_features, _ = size
    x, edge_index = synthetic_graph(num_nodes, num_edges, num_features,
                                    device, args.seed)
    rows = []
    for precision in args.precisions:
        models, steps = {}, {}
        for name in args.models:
            torch.manual_seed(args.seed)
            model = build_model(
                name, num_features,
                attention_dropout=args.attention_dropout).to(device).train()
            models[name] = model
            steps[name] = layer_step(model, x, edge_index, device, precision)
        medians = measure_interleaved(steps, timer, args.warmup,
                                      args.rounds)
        for name in args.models:
            peak, extra = ('OOM', 'OOM') if medians[name] == 'OOM' else \
                isolated_peak(steps[name], device)
            rows.append(dict(graph=graph, nodes=num_nodes, edges=num_edges,
                             features=num_features, model=name,
                             precision=precision, ms=medians[name],
                             peak_bytes=peak, step_bytes=extra))
            # Each row as soon as it is known: a run cut off by a time limit
            # keeps what it measured in its log.
            ms = medians[name]
            print(f'  {graph} {name} {precision}: '
                  f'{ms if ms == "OOM" else f"{ms:.3f}"} ms, peak {peak} bytes',
                  file=sys.stderr, flush=True)
        del models, steps
        free_memory(device)
    return rows


def training_rows(graph: str, size, device: torch.device, timer: Timer,
                  args) -> List[dict]:
    """The two-layer full-batch training step (item 5) of each of
    ``args.training_models`` on one graph, float32, random labels.  One
    model at a time (built, timed, measured, freed with its graph caches):
    at this size another model's caches would change a peak, or the point
    where memory runs out."""
    from ikgat.nn import graph_cache
    num_nodes, num_edges, num_features, num_classes = size
    x, edge_index = synthetic_graph(num_nodes, num_edges, num_features,
                                    device, args.seed)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    y = torch.randint(0, num_classes, (num_nodes, ), device=device,
                      generator=generator)
    rows = []
    for name in args.training_models:
        torch.manual_seed(args.seed)
        model = build_model(name, num_features, num_classes,
                            attention_dropout=args.attention_dropout
                            ).to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
        step = training_step(model.train(), optimizer, x, edge_index, y)
        ms = measure_interleaved({name: step}, timer, args.warmup,
                                 args.rounds)[name]
        peak, extra = ('OOM', 'OOM') if ms == 'OOM' else peak_memory(
            step, device)
        rows.append(dict(graph=graph, nodes=num_nodes, edges=num_edges,
                         features=num_features, classes=num_classes,
                         model=name, ms=ms, peak_bytes=peak,
                         step_bytes=extra))
        del model, optimizer, step
        graph_cache.clear()
        free_memory(device)
    return rows


def fused_bytes(num_nodes: int, num_edges: int, element: int) -> Dict[str,
                                                                     int]:
    """Bytes the fused forward must move: compulsory (each array once) and
    gathered (source scores and features read once per edge)."""
    h, c = HEADS, CHANNELS
    index = 8 * (num_nodes + 1) + 8 * num_edges  # rowptr, sources
    node = element * num_nodes * h * (3 + 3 + c)  # score_src/dst, x_src
    written = element * num_nodes * h * c + 8 * num_nodes * h  # out, m, Z
    gathered = (element * num_edges * h * (3 + c) + index
                + element * num_nodes * h * 3 + written)
    return dict(compulsory=index + node + written, gathered=gathered)


def attention_steps(attention: Callable[..., torch.Tensor],
                    leaves: List[torch.Tensor],
                    name: str) -> Dict[str, Callable[[], object]]:
    """Forward only, and forward + backward, of attention(*leaves)."""
    def forward():
        with torch.no_grad():
            attention(*leaves)

    def forward_backward():
        out = attention(*leaves)
        torch.autograd.grad(out.float().sum(), leaves)

    return {f'{name} forward': forward,
            f'{name} forward+backward': forward_backward}


def fused_rows(graph: str, size, device: torch.device, timer: Timer,
               args) -> List[dict]:
    try:
        import triton  # noqa: F401

        from ikgat.ops.gat_attention import fused_attention, prepare_csr
    except ImportError as error:
        return [dict(graph=graph, path='fused', note=f'skipped: {error}')]
    if device.type == 'cpu' and os.environ.get('TRITON_INTERPRET') != '1':
        return [dict(graph=graph, path='fused',
                     note='skipped: no CUDA and TRITON_INTERPRET unset')]
    try:
        from ikgat.ops.aggregation import attention_aggregate
        from ikgat.ops.edge_softmax import kernel_edge_softmax
    except ImportError:
        attention_aggregate = kernel_edge_softmax = None
    from torch_geometric.utils import add_self_loops, remove_self_loops

    num_nodes, num_edges, _, _ = size
    _, edge_index = synthetic_graph(num_nodes, num_edges, 1, device,
                                    args.seed)
    edge_index, _ = remove_self_loops(edge_index)
    edge_index, _ = add_self_loops(edge_index, num_nodes=num_nodes)
    total_edges = edge_index.size(1)
    csr = prepare_csr(edge_index, num_nodes, num_nodes)  # warm
    csr_ms = timer(lambda: prepare_csr(edge_index, num_nodes, num_nodes))
    generator = torch.Generator(device=device).manual_seed(args.seed)
    unfused = None
    if kernel_edge_softmax is not None:
        def unfused(score_src, score_dst, x_src):
            alpha = kernel_edge_softmax(score_src, score_dst, edge_index,
                                        num_nodes)
            return attention_aggregate(alpha, x_src, edge_index, num_nodes)
    # The interpreter is slow: one untimed and one timed call in --smoke.
    warmup, rounds = (0, 1) if args.smoke else (args.warmup, args.rounds)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        leaves = [torch.randn(*shape, device=device, generator=generator)
                  .to(dtype).requires_grad_()
                  for shape in [(num_nodes, HEADS, 3), (num_nodes, HEADS, 3),
                                (num_nodes, HEADS, CHANNELS)]]
        steps = attention_steps(
            lambda s, d, x: fused_attention(s, d, x, csr, num_nodes), leaves,
            'fused')
        if unfused is not None:
            steps.update(attention_steps(unfused, leaves, 'unfused'))
        medians = measure_interleaved(steps, timer, warmup, rounds)
        element = torch.finfo(dtype).bits // 8
        moved = fused_bytes(num_nodes, total_edges, element)
        for name, ms in medians.items():
            peak, extra = ('OOM', 'OOM') if ms == 'OOM' else \
                peak_memory(steps[name], device)
            row = dict(graph=graph, nodes=num_nodes, edges=total_edges,
                       path=name, dtype=str(dtype).replace('torch.', ''),
                       ms=ms, csr_ms=csr_ms, peak_bytes=peak,
                       step_bytes=extra)
            if name == 'fused forward' and ms != 'OOM':
                for kind, count in moved.items():
                    row[f'{kind}_bytes'] = count
                    row[f'{kind}_gbps'] = count / (ms * 1e-3) / 1e9
            rows.append(row)
        free_memory(device)
    return rows


def fmt(value, kind: str = 'ms') -> str:
    if value is None:
        return '-'
    if isinstance(value, str):
        return value
    if kind == 'ms':
        return f'{value:.3f}'
    if kind == 'bytes':
        return f'{value / 2**20:.1f}'
    return f'{value:.1f}'


def markdown(header: Dict[str, str], layers: List[dict], fused: List[dict],
             training: List[dict], bandwidth: float) -> str:
    lines = ['# GPU speed study (issue #16)', '']
    lines += [f'- {key}: {value}' for key, value in header.items()]
    lines += [f'- copy bandwidth (read + write): {bandwidth:.1f} GB/s', '']
    lines += ['## One layer, forward + backward (8 heads x 8)', '',
              ('| graph | nodes | edges | model | precision | median ms | '
               'peak MiB | step MiB |'), '|---|---|---|---|---|---|---|---|']
    for r in layers:
        lines.append(f"| {r['graph']} | {r['nodes']} | {r['edges']} | "
                     f"{r['model']} | {r['precision']} | {fmt(r['ms'])} | "
                     f"{fmt(r['peak_bytes'], 'bytes')} | "
                     f"{fmt(r['step_bytes'], 'bytes')} |")
    lines += ['', ('## Two-layer full-batch training step (8 heads x 8, '
                   'then 1 head x classes; Adam; float32)'), '',
              ('| graph | nodes | edges | model | median ms | peak MiB | '
               'step MiB |'), '|---|---|---|---|---|---|---|']
    for r in training:
        lines.append(f"| {r['graph']} | {r['nodes']} | {r['edges']} | "
                     f"{r['model']} | {fmt(r['ms'])} | "
                     f"{fmt(r['peak_bytes'], 'bytes')} | "
                     f"{fmt(r['step_bytes'], 'bytes')} |")
    lines += ['', '## Fused attention alone (H = 8, C = 8, self-loops added)',
              '', ('Forward bandwidth: bytes / median time, for the '
                   'compulsory and the gathered byte counts (see the '
                   "script's docstring); compare with the copy bandwidth "
                   'above.'), '',
              ('| graph | edges | path | inputs | median ms | CSR prep ms | '
               'compulsory GB/s | gathered GB/s | step MiB |'),
              '|---|---|---|---|---|---|---|---|---|']
    for r in fused:
        if 'note' in r:
            lines.append(f"| {r['graph']} | - | {r['path']} | - | "
                         f"{r['note']} | - | - | - | - |")
            continue
        lines.append(f"| {r['graph']} | {r['edges']} | {r['path']} | "
                     f"{r['dtype']} | {fmt(r['ms'])} | {fmt(r['csr_ms'])} | "
                     f"{fmt(r.get('compulsory_gbps'), 'gbps')} | "
                     f"{fmt(r.get('gathered_gbps'), 'gbps')} | "
                     f"{fmt(r['step_bytes'], 'bytes')} |")
    return '\n'.join(lines) + '\n'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='GPU speed study: attention layers and the fused '
        'Triton kernel on synthetic graphs, against the copy bandwidth.')
    parser.add_argument('--output', required=True,
                        help='Markdown file to write (rows go to the same '
                        'path with .json)')
    parser.add_argument('--graphs', nargs='+', default=None,
                        help=f'graphs to run (default: all of '
                        f'{list(GRAPHS)}; with --smoke: {list(SMOKE_GRAPHS)})')
    parser.add_argument('--rounds', type=int, default=10,
                        help='interleaved timed rounds (default: 10)')
    parser.add_argument('--warmup', type=int, default=3,
                        help='untimed steps per model first (default: 3)')
    parser.add_argument('--copy-mib', type=int, default=1024,
                        help='size of the copied tensor (default: 1024)')
    parser.add_argument('--models', nargs='+', default=MODELS,
                        choices=MODELS + TRANSFORMER_MODELS, metavar='MODEL',
                        help=f'models to time (default: all of {MODELS}; '
                        f'the graph transformers: {TRANSFORMER_MODELS})')
    parser.add_argument('--training-graphs', nargs='*', default=None,
                        metavar='GRAPH',
                        help='graphs of the two-layer training step '
                        '(default: the largest of --graphs; none when given '
                        'without a value)')
    parser.add_argument('--training-models', nargs='+',
                        default=TRAINING_MODELS, choices=MODELS,
                        metavar='MODEL', help=f'models of the training step '
                        f'(default: {TRAINING_MODELS})')
    parser.add_argument('--attention-dropout', type=float, default=0.0,
                        help='dropout on the attention weights of every '
                        'layer, in training (the GAT recipe: 0.6); in the '
                        'two-layer step also on the features (default: 0)')
    parser.add_argument('--precisions', nargs='+', default=PRECISIONS,
                        choices=PRECISIONS, metavar='PRECISION',
                        help=f'precisions of the layer study (default: '
                        f'{PRECISIONS})')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--no-fused', action='store_true',
                        help='skip the fused kernel section')
    parser.add_argument('--smoke', action='store_true',
                        help='tiny graphs on CPU in seconds (checks the '
                        'script; the numbers mean nothing)')
    args = parser.parse_args(argv)
    catalogue = SMOKE_GRAPHS if args.smoke else GRAPHS
    args.graphs = args.graphs or list(catalogue)
    if args.training_graphs is None:
        args.training_graphs = [max(args.graphs,
                                    key=lambda g: catalogue[g][1])] if all(
            g in catalogue for g in args.graphs) else []
    unknown = [g for g in args.graphs + args.training_graphs
               if g not in catalogue]
    if unknown:
        parser.error(f"unknown graph(s) {unknown}; choose from "
                     f"{list(catalogue)}")
    if args.rounds < 1 or args.warmup < 0 or args.copy_mib < 1:
        parser.error('--rounds and --copy-mib must be positive and '
                     '--warmup non-negative')
    folder = osp.dirname(osp.abspath(args.output))
    if not osp.isdir(folder) or not os.access(folder, os.W_OK):
        parser.error(f"cannot write --output {args.output!r}: {folder!r} is "
                     f"not a writable folder")
    if not args.smoke and not torch.cuda.is_available():
        parser.error('no CUDA device; this study needs a GPU (use --smoke '
                     'to check the script on CPU)')
    if args.smoke:
        args.rounds, args.warmup = min(args.rounds, 2), min(args.warmup, 1)
        args.copy_mib = min(args.copy_mib, 16)
        # Compiling takes minutes on a CPU: only where asked for by name.
        if args.models == MODELS:
            args.models = [name for name in MODELS
                           if not name.endswith('-compiled')]
        if args.training_models == TRAINING_MODELS:
            args.training_models = [name for name in TRAINING_MODELS
                                    if not name.endswith('-compiled')]
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if args.smoke and not torch.cuda.is_available():
        # The fused kernel on CPU runs in Triton's interpreter, which must
        # be switched on before Triton is first imported.
        os.environ.setdefault('TRITON_INTERPRET', '1')
    device = torch.device('cpu' if args.smoke else 'cuda')
    timer = Timer(device)
    import torch_geometric

    from ikgat.atomic_writes import write_text_atomic
    header = {
        'device': torch.cuda.get_device_name() if device.type == 'cuda'
        else f'CPU ({platform.processor() or platform.machine()}, smoke)',
        'torch': torch.__version__,
        'torch_geometric': torch_geometric.__version__,
        'triton': _triton_version(),
        'cuda': str(torch.version.cuda),
        'git commit': git_commit(),
        'command': ' '.join([osp.basename(sys.argv[0])] + sys.argv[1:]),
        'protocol': f'{args.warmup} warm-up steps, median of {args.rounds} '
        f'interleaved rounds',
    }
    bandwidth = copy_bandwidth(device, args.copy_mib, timer,
                               max(args.rounds, 5))
    catalogue = SMOKE_GRAPHS if args.smoke else GRAPHS
    layers, fused = [], []
    for graph in args.graphs:
        print(f'{graph}: layers', file=sys.stderr, flush=True)
        layers += layer_rows(graph, catalogue[graph], device, timer, args)
        # --smoke: the interpreted kernel on the first graph only (slow).
        if not args.no_fused and not (args.smoke and graph != args.graphs[0]):
            print(f'{graph}: fused kernel', file=sys.stderr, flush=True)
            fused += fused_rows(graph, catalogue[graph], device, timer, args)
    training = []
    for graph in args.training_graphs:
        print(f'{graph}: training step', file=sys.stderr, flush=True)
        training += training_rows(graph, catalogue[graph], device, timer,
                                  args)
    write_text_atomic(args.output, markdown(header, layers, fused,
                                            training, bandwidth))
    stem = osp.splitext(args.output)[0]
    write_text_atomic(stem + '.json', json.dumps(
        dict(header=header, copy_gbps=bandwidth, layers=layers,
             fused=fused, training=training), indent=1) + '\n')
    print(f'wrote {args.output}', file=sys.stderr)


def _triton_version() -> str:
    try:
        import triton
    except ImportError:
        return 'not installed'
    return triton.__version__


if __name__ == '__main__':
    main()
