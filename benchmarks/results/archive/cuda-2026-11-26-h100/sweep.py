r"""Record of this GPU session (not maintained, linted or imported): the
tiles of the transformer random-feature kernels
(:mod:`ikgat.nn.triton_fourier_pairs`) at arxiv size, one
IKTransformerConv-direct layer (8 heads x 8, R = 64) forward + backward,
against TransformerConv and IKTransformerConv-rbf in the same process.

    python sweep.py warm NAME   # compile one variant (one step; run in parallel)
    python sweep.py time        # time them all, interleaved (Markdown on stdout)

A variant overrides the constants of ikgat.nn.triton_transformer's
fourier_tiling (edge block, warps, chunk of points).
"""
import json
import statistics
import sys

import torch

import ikgat.nn.triton_transformer as transformer
from benchmarks.gpu_speed import GRAPHS, build_model, layer_step, synthetic_graph

DEFAULT_TILING = transformer.fourier_tiling
VARIANTS = {
    'default': {},
    'E2 w2': dict(BLOCK_E=2, num_warps=2),
    'E2 w1': dict(BLOCK_E=2, num_warps=1),
    'E4 w4': dict(BLOCK_E=4, num_warps=4),
    'E4 w2': dict(BLOCK_E=4, num_warps=2),
    'E8 w4': dict(BLOCK_E=8, num_warps=4),
    'E8 w8': dict(BLOCK_E=8, num_warps=8),
    'R32x2 E2 w4': dict(BLOCK_R=32, CHUNKS=2, BLOCK_E=2, num_warps=4),
}


def use(variant):
    def tiling(*args, **kwargs):
        return dict(DEFAULT_TILING(*args, **kwargs), **VARIANTS[variant])
    transformer.fourier_tiling = tiling


def setup():
    num_nodes, num_edges, features, _ = GRAPHS['arxiv']
    device = torch.device('cuda')
    x, edge_index = synthetic_graph(num_nodes, num_edges, features, device, 0)
    return x, edge_index, device


def step_of(name, x, edge_index, device):
    torch.manual_seed(0)
    model = build_model(name, x.size(1)).to(device).train()
    return layer_step(model, x, edge_index, device, 'float32')


def timed(step):
    start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    step()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop)


def main():
    x, edge_index, device = setup()
    if sys.argv[1] == 'warm':
        use(sys.argv[2])
        step_of('IKTransformerConv-direct', x, edge_index, device)()
        torch.cuda.synchronize()
        return
    entries = {name: (None, step_of(name, x, edge_index, device))
               for name in ('TransformerConv', 'IKTransformerConv-rbf')}
    for variant in VARIANTS:
        entries[f'direct {variant}'] = (variant, step_of(
            'IKTransformerConv-direct', x, edge_index, device))
    times = {name: [] for name in entries}
    for round_ in range(13):
        for name, (variant, step) in entries.items():
            use(variant or 'default')
            ms = timed(step)
            if round_ >= 3:
                times[name].append(ms)
    base = statistics.median(times['TransformerConv'])
    print(f'# Tile sweep, {torch.cuda.get_device_name()}, arxiv size '
          f'({x.size(0)} nodes, {edge_index.size(1)} edges), one layer fwd+bwd, '
          f'float32; median of 10 interleaved rounds after 3\n')
    print('| model | tiles | ms | / TransformerConv eager |')
    print('|---|---|---:|---:|')
    for name, values in times.items():
        variant = entries[name][0]
        tiles = json.dumps(VARIANTS[variant]) if variant else '-'
        ms = statistics.median(values)
        print(f'| {name} | {tiles} | {ms:.3f} | {ms / base:.2f} |')


if __name__ == '__main__':
    main()
