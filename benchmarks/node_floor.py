r"""The node terms' time against a floor worked out from this machine's
measured sine, cosine and multiply-add throughput.

    python -m benchmarks.node_floor --threads 1

One side of one layer's random-feature node terms
(:func:`ikgat.ops.node_terms.fused_fourier_log_similarity`), forward and
backward, for :math:`N` nodes, :math:`H` heads of :math:`C` channels and
:math:`m` sets of :math:`R` points, has :math:`A = N H m R` angles.  Its
floor counts, per angle,

* transcendentals: a cosine and a sine in the forward pass, and again in
  the backward pass, which recomputes them (4), at the measured time per
  element of the faster of NumPy's and ATen's in-place loops;
* multiply-adds: the angle (:math:`C`), the reduction against the anchor
  features (:math:`2T`, :math:`T = 2` slopes) forward; backward the angle
  again (:math:`C`), :math:`U, V` (:math:`2T`), :math:`D` (2), the
  gradients of :math:`x` and of the points (:math:`2C`) and of the anchor
  features (:math:`2T`): :math:`4C + 6T + 2` in all, at the measured
  float32 matrix-product rate;

and ignores memory traffic (the chunks stay in cache).  The report gives
the measured time, the floor and their ratio, for the graph sizes of
Cora, CiteSeer and PubMed (the GAT recipe's first layer: 8 heads x 8,
2 sets of :math:`R` points, ``--num-spectral-points``, by default
``direct``'s default of 16), on the node path that the layers take by default
(the C kernels of :mod:`ikgat.ops.node_terms_native` where the machine
builds them, else eager chunks, compiled from PubMed's size) and on the
eager and the compiled chunks at every size; then the floor of a whole epoch's
node terms against GATConv's measured epoch, the least ratio to GATConv
that the random-feature layers can reach at these sizes (``direct`` at
:math:`R`, the implicit kernels at their default of 64 points, 32 of them
distinct).  Writes ``benchmarks/results/node_floor.md``.
"""
import argparse
import shlex
import statistics
import sys
import time
from typing import Callable, Dict, List

import numpy as np
import torch

import ikgat.ops.compiled_features as compiled_features
import ikgat.ops.native as native
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, write_text
from ikgat.kernels.direct import DirectSpectralKernel
from ikgat.kernels.implicit import ImplicitSpectralKernel
from ikgat.ops.node_terms import fused_fourier_log_similarity

GRAPHS = {'Cora': 2708, 'CiteSeer': 3327, 'PubMed': 19717}
HEADS, CHANNELS, SETS, SLOPES = 8, 8, 2, 2
#: Points a set of ``direct`` (the default of ``--num-spectral-points``) and
#: the distinct half of the implicit kernels' symmetric sample.
DIRECT_POINTS = DirectSpectralKernel.default_num_spectral_points
IMPLICIT_DISTINCT_POINTS = ImplicitSpectralKernel.default_num_spectral_points // 2


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_element_ns(repeats: int) -> Dict[str, float]:
    r"""Nanoseconds per float32 element of in-place cosine, sine and exp
    over chunks of :math:`2^{18}` angles (NumPy and ATen), and per
    multiply-add of a float32 matrix product."""
    angles = torch.randn(1 << 18) * 10
    out = torch.empty_like(angles)
    values, target = angles.numpy(), out.numpy()
    size = angles.numel()
    rates = {
        'numpy cos': median_seconds(lambda: np.cos(values, out=target),
                                    repeats),
        'numpy sin': median_seconds(lambda: np.sin(values, out=target),
                                    repeats),
        'torch cos': median_seconds(lambda: torch.cos(angles, out=out),
                                    repeats),
        'torch sin': median_seconds(lambda: torch.sin(angles, out=out),
                                    repeats),
        'torch exp': median_seconds(lambda: torch.exp(angles, out=out),
                                    repeats),
    }
    ns = {name: 1e9 * seconds / size for name, seconds in rates.items()}
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    ns['multiply-add'] = 1e9 * median_seconds(lambda: a @ b,
                                              repeats) / 512**3
    return ns


#: The node paths measured: the layers' default (``'eager'``: on CPU in
#: float32 the C kernels of :mod:`ikgat.ops.node_terms_native` where the
#: machine builds them, else chunks, compiled from ``COMPILE_FROM_ANGLES``
#: angles), the eager chunks at any size and the compiled chunks at any
#: size.
PATHS = {'default': 'eager', 'eager chunks': 'eager', 'compiled': 'compile'}


def node_terms_seconds(num_nodes: int, num_points: int, path: str,
                       repeats: int) -> float:
    node_path = PATHS[path]
    flags = compiled_features.ENABLED, native.ENABLED
    compiled_features.ENABLED = path != 'eager chunks'
    native.ENABLED = path == 'default'
    try:
        return _node_terms_seconds(num_nodes, num_points, node_path,
                                   repeats)
    finally:
        compiled_features.ENABLED, native.ENABLED = flags


def _node_terms_seconds(num_nodes: int, num_points: int, node_path: str,
                        repeats: int) -> float:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(num_nodes, HEADS, CHANNELS, generator=generator,
                    requires_grad=True)
    points = [torch.randn(HEADS, num_points, 2 * CHANNELS, generator=generator,
                          requires_grad=True) for _ in range(SETS)]
    anchor = torch.randn(HEADS, 2 * CHANNELS, generator=generator,
                         requires_grad=True)
    slopes = torch.tensor([1.0, 0.2])
    weight = torch.randn(num_nodes, HEADS, SLOPES, generator=generator)

    def step():
        out = fused_fourier_log_similarity(x, anchor, True, slopes, points,
                                           1e-5, node_path=node_path)
        torch.autograd.grad((out * weight).sum(), [x, anchor, *points])

    return median_seconds(step, repeats)


#: The GAT recipe's second layer per graph: output heads and classes.
SECOND_LAYER = {'Cora': (1, 7), 'CiteSeer': (1, 6), 'PubMed': (8, 3)}


def gat_epoch_seconds(graph: str, rounds: int) -> float:
    r"""The median epoch of the GAT recipe with GATConv
    (:mod:`benchmarks.epoch_speed`)."""
    from benchmarks.epoch_speed import measure
    return statistics.median(measure(graph, ['GATConv'], rounds,
                                     2)['GATConv'])


def epoch_floor_ms(graph: str, trig: float, fma: float,
                   distinct_points: int) -> float:
    r"""The floor of one epoch's node terms (both sides of both layers,
    two forward passes and one backward pass) with :obj:`distinct_points`
    points a set."""
    heads2, channels2 = SECOND_LAYER[graph]
    total = 0.0
    for heads, channels in ((HEADS, CHANNELS), (heads2, channels2)):
        angles = 2 * GRAPHS[graph] * heads * SETS * distinct_points
        forward = 2 * trig + (channels + 2 * SLOPES) * fma
        backward = 2 * trig + (3 * channels + 4 * SLOPES + 2) * fma
        total += angles * (2 * forward + backward)
    return total * 1e-6


def report(ns: Dict[str, float], rows: List[Dict[str, object]],
           threads: int, epochs: Dict[str, float], num_points: int) -> str:
    trig = min(ns['numpy cos'] + ns['numpy sin'],
               ns['torch cos'] + ns['torch sin']) / 2
    lines = [
        '# The node terms against their floor (CPU)', '',
        f'Command: `python -m benchmarks.node_floor '
        f'{shlex.join(sys.argv[1:])}`', '',
        f'Code: ikgat commit {git_commit()}; torch {torch.__version__}, '
        f'NumPy {np.__version__}; {threads} thread(s).', '',
        'Measured per float32 element (in-place, chunks of 2^18) and per '
        'multiply-add (512 x 512 matrix product):', '',
        '| operation | ns |', '|---|---|'
    ]
    lines += [f'| {name} | {value:.3f} |' for name, value in ns.items()]
    fma = 4 * CHANNELS + 6 * SLOPES + 2
    lines += [
        '',
        f'Floor per angle, forward and backward: 4 transcendentals x '
        f'{trig:.3f} ns (the faster cosine and sine) + {fma} multiply-adds '
        f'x {ns["multiply-add"]:.4f} ns = '
        f'{4 * trig + fma * ns["multiply-add"]:.2f} ns.', '',
        f'One side of the first layer of the GAT recipe ({HEADS} heads x '
        f'{CHANNELS}, {SETS} sets of {num_points} points), forward and '
        f'backward, median of the repeats:', '',
        '| graph | nodes | angles | node path | measured ms | floor ms | '
        'measured / floor |', '|---|---|---|---|---|---|---|'
    ]
    for row in rows:
        angles = row['nodes'] * HEADS * SETS * num_points
        floor = angles * (4 * trig + fma * ns['multiply-add']) * 1e-6
        lines.append(
            f'| {row["graph"]} | {row["nodes"]} | {angles / 1e6:.1f} M | '
            f'{row["path"]} | {1e3 * row["seconds"]:.1f} | {floor:.1f} | '
            f'{1e3 * row["seconds"] / floor:.2f}x |')
    if epochs:
        lines += [
            '', 'The floor of a whole epoch of the GAT recipe (both sides of '
            'both layers, the training and the evaluation forward passes and '
            'one backward pass; the second layer with its output heads and '
            'classes) against GATConv\'s measured epoch (median of 5, '
            '`benchmarks.epoch_speed`): the least ratio to GATConv that '
            f'these sines, cosines and multiply-adds allow, for `direct` '
            f'({SETS} sets of {num_points} points) and for the implicit '
            f'kernels (the {IMPLICIT_DISTINCT_POINTS} distinct points of '
            f'their symmetric sample).', '',
            '| graph | GATConv epoch ms | floor ms, direct | least ratio, '
            'direct | floor ms, implicit | least ratio, implicit |',
            '|---|---|---|---|---|---|'
        ]
        for graph, seconds in epochs.items():
            gat = 1e3 * seconds
            direct = epoch_floor_ms(graph, trig, ns['multiply-add'],
                                    num_points)
            implicit = epoch_floor_ms(graph, trig, ns['multiply-add'],
                                      IMPLICIT_DISTINCT_POINTS)
            lines.append(f'| {graph} | {gat:.1f} | {direct:.1f} | '
                         f'{(gat + direct) / gat:.2f}x | {implicit:.1f} | '
                         f'{(gat + implicit) / gat:.2f}x |')
    return '\n'.join(lines) + '\n'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--graphs', nargs='+', default=list(GRAPHS),
                        choices=list(GRAPHS))
    parser.add_argument('--paths', nargs='+', default=list(PATHS),
                        choices=list(PATHS))
    parser.add_argument('--num-spectral-points', type=int,
                        default=DIRECT_POINTS,
                        help='points a set, R (default: the direct '
                        "kernel's default)")
    parser.add_argument('--output', default=f'{RESULTS_DIR}/node_floor.md')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ns = per_element_ns(max(args.repeats, 20))
    rows = []
    for graph in args.graphs:
        for path in args.paths:
            seconds = node_terms_seconds(GRAPHS[graph],
                                         args.num_spectral_points, path,
                                         args.repeats)
            rows.append(dict(graph=graph, nodes=GRAPHS[graph], path=path,
                             seconds=seconds))
            print(graph, path, f'{1e3 * seconds:.1f} ms', flush=True)
    epochs = {graph: gat_epoch_seconds(graph, 5) for graph in args.graphs}
    text = report(ns, rows, args.threads, epochs, args.num_spectral_points)
    write_text(args.output, text)
    print(text)


if __name__ == '__main__':
    main()
