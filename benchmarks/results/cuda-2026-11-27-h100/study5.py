r"""Record of the fifth CUDA run of 2026-11-27 (not maintained, linted or
imported): one IKTransformerConv layer forward + backward on the synthetic
arxiv graph of ``benchmarks.gpu_speed`` (128 features, 8 heads x 8),
TransformerConv eager against ``direct`` with the tables' kernels at the
tilings of run 4 and of this commit (``table_tiling``), and ``direct`` with
R = 32 and R = 16 points (a prediction of ``benchmarks.gpu_model``),
interleaved; then the profile of three ``direct`` steps.

    python benchmarks/results/cuda-2026-11-27-h100/study5.py
"""
import statistics
import sys

import torch


def cuda_ms(fn):
    start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def main():
    import ikgat.nn.triton_transformer as transformer
    from benchmarks.gpu_speed import build_model, layer_step, synthetic_graph
    from ikgat import IKTransformerConv
    n, e, rounds, warmup = 169_343, 1_166_243, 10, 3
    device = torch.device('cuda')
    x, edge_index = synthetic_graph(n, e, 128, device, 0)
    models = {'TransformerConv': build_model('TransformerConv', 128),
              'direct': build_model('IKTransformerConv-direct', 128)}
    for points in (32, 16):
        models[f'direct R={points}'] = IKTransformerConv(
            128, 8, heads=8, kernel='direct', num_spectral_points=points)
    steps = {name: layer_step(model.to(device), x, edge_index, device,
                              'float32') for name, model in models.items()}
    current = transformer.table_tiling

    def run4_tiling(num_edges, num_nodes, heads, width, channels,
                    forward=False):
        constants = current(num_edges, num_nodes, heads, width, channels)
        return dict(constants, num_warps=4)

    def before():
        transformer.table_tiling = run4_tiling
        try:
            steps['direct']()
        finally:
            transformer.table_tiling = current
    steps['direct, tiling of run 4'] = before
    print(f'# {torch.cuda.get_device_name()}: {n} nodes, {e} edges; medians'
          f' of {rounds} interleaved rounds after {warmup}\n')
    print(f'tiling: forward {current(e, n, 8, 128, 8, True)}, backward '
          f'{current(e, n, 8, 128, 8)}; run 4: {run4_tiling(e, n, 8, 128, 8)}'
          '\n')
    times = {name: [] for name in steps}
    for round_ in range(warmup + rounds):
        for name, step in steps.items():
            ms = cuda_ms(step)
            if round_ >= warmup:
                times[name].append(ms)
    base = statistics.median(times['TransformerConv'])
    print('| model | ms | / TransformerConv |\n|---|---:|---:|')
    for name, values in times.items():
        ms = statistics.median(values)
        print(f'| {name} | {ms:.3f} | {ms / base:.2f} |')
    sys.stdout.flush()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            steps['direct']()
        torch.cuda.synchronize()
    print('\n## Profile of `direct`, 3 steps\n\n```')
    print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=16,
                                    max_name_column_width=60))
    print('```')


if __name__ == '__main__':
    main()
