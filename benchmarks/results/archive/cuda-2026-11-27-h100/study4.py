r"""Record of the fourth CUDA run of 2026-11-27 (not maintained, linted or
imported): what is left of IKTransformerConv ``direct``'s step at arxiv size.

1. ``tables``: the registered tables operator (``ikgat::node_tables`` and
   its backward) for one side, forward + backward (x and the points), with
   the angles by a matrix product (``UNROLLED = False``) against the angles
   made in the compiled pass (``UNROLLED = True``), interleaved.
2. ``sweep``: the three gathered-table kernels on given tables (random
   graph of arxiv size, H = 8, 2R = 128, C = 8), each kernel's CUDA time
   from the profiler at each tiling (B_H heads, B_E edges, warps, stages),
   and the largest difference of the outputs and gradients from the
   shipped tiling's.
3. ``layer``: one layer forward + backward on the synthetic arxiv graph of
   ``benchmarks.gpu_speed`` (128 features, 8 heads x 8): TransformerConv
   eager, ``direct`` with and without ``UNROLLED``, ``direct`` with R = 32
   and R = 16 points (a prediction of ``benchmarks.gpu_model``), interleaved;
   then the profile of three ``direct`` steps.

    python benchmarks/results/cuda-2026-11-27-h100/study4.py [--quick]
"""
import argparse
import statistics
import sys

import torch

N, E, H, D, R, C, M = 169_343, 1_166_243, 8, 8, 64, 8, 2
DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'  # CPU: a dry run


def cuda_ms(fn):
    if DEVICE == 'cpu':
        import time
        begin = time.perf_counter()
        fn()
        return 1e3 * (time.perf_counter() - begin)
    start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def interleaved(steps, rounds, warmup):
    times = {name: [] for name in steps}
    for round_ in range(warmup + rounds):
        for name, step in steps.items():
            ms = cuda_ms(step)
            if round_ >= warmup:
                times[name].append(ms)
    return {name: statistics.median(v) for name, v in times.items()}


def kernel_times(step, calls=5):
    r"""CUDA ms per step of each kernel name in :obj:`step` (profiled)."""
    from torch.profiler import ProfilerActivity, profile
    step()
    activity = ProfilerActivity.CUDA if DEVICE == 'cuda' \
        else ProfilerActivity.CPU
    with profile(activities=[activity]) as prof:
        for _ in range(calls):
            step()
        if DEVICE == 'cuda':
            torch.cuda.synchronize()
    out = {}
    for event in prof.key_averages():
        total = getattr(event, 'device_time_total', None)
        if total is None:
            total = event.cpu_time_total
        out[event.key] = total / 1e3 / calls
    return out, prof


def part_tables(rounds, warmup):
    import ikgat.nn.pair_tables as pair_tables
    torch.manual_seed(0)
    x = (0.3 * torch.randn(N, H, D, device=DEVICE)).requires_grad_()
    points = torch.randn(M, H, R, D, device=DEVICE, requires_grad=True)
    grad = torch.randn(N, H, 2 * R, device=DEVICE)
    results = {}

    def step(unrolled):
        def run():
            pair_tables.UNROLLED = unrolled
            x.grad = points.grad = None
            pair_tables.node_tables(x, points).backward(grad)
        return run

    for unrolled in (False, True):
        step(unrolled)()
        results[unrolled] = (pair_tables.node_tables(x, points).detach(),
                             x.grad.clone(), points.grad.clone())
    diffs = [(a - b).abs().max().item() / max(b.abs().max().item(), 1e-30)
             for a, b in zip(results[True], results[False])]
    times = interleaved({'matrix product': step(False),
                         'unrolled': step(True)}, rounds, warmup)
    print('## 1. Tables operator, one side, forward + backward\n')
    print('| angles | ms |\n|---|---:|')
    for name, ms in times.items():
        print(f'| {name} | {ms:.3f} |')
    print(f'\nlargest relative difference (table, grad x, grad points): '
          + ', '.join(f'{d:.2e}' for d in diffs))
    for unrolled in (False, True):
        pair_tables.UNROLLED = unrolled
        kernels, _ = kernel_times(step(unrolled), 3)
        top = sorted(kernels.items(), key=lambda kv: -kv[1])[:6]
        print(f'\nUNROLLED={unrolled}: ' + '; '.join(
            f'{name[:60]} {ms:.3f}' for name, ms in top))
    pair_tables.UNROLLED = True
    sys.stdout.flush()


def part_sweep():
    import ikgat.nn.triton_transformer as transformer
    from ikgat.nn.triton_attention import prepare_csr
    torch.manual_seed(0)
    edge_index = torch.randint(0, N, (2, E), device=DEVICE)
    csr = prepare_csr(edge_index, N, N)
    u0 = torch.randn(N, H, 2 * R, device=DEVICE) / R
    v0 = torch.randn(N, H, 2 * R, device=DEVICE) / R
    u, v = u0.requires_grad_(), v0.requires_grad_()
    s = torch.randn(N, H, device=DEVICE, requires_grad=True)
    x = torch.randn(N, H, C, device=DEVICE, requires_grad=True)
    grad_out = torch.randn(N, H, C, device=DEVICE)
    shipped = transformer.table_tiling

    def run():
        for t in (u, v, s, x):
            t.grad = None
        out = transformer.fused_transformer_attention(
            u, v, s, x, csr, N, 'log_square', 1.0, 1e-5, use_triton=True)
        out.backward(grad_out)
        return out

    configs = [None, (8, 1, 4, None), (8, 2, 2, None), (8, 4, 4, None),
               (8, 1, 2, None), (8, 2, 4, 1), (8, 2, 4, 2), (8, 2, 4, 4),
               (4, 2, 2, None), (4, 4, 4, None), (2, 4, 2, None),
               (2, 8, 4, None), (8, 4, 8, None)]
    reference = None
    print('\n## 2. Table kernels: CUDA ms per step by tiling\n')
    print(f'shipped: {shipped(E, N, H, 2 * R, C)}\n')
    print('| B_H | B_E | warps | stages | forward | backward dst | '
          'backward src | sum | largest difference |')
    print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for config in configs:
        if config is not None:
            block_h, block_e, warps, stages = config

            def tiles(*args, **kwargs):
                constants = dict(BLOCK_H=block_h, BLOCK_D=2 * R, BLOCK_C=C,
                                 BLOCK_E=block_e, num_warps=warps)
                if stages is not None:
                    constants['num_stages'] = stages
                return constants
            transformer.table_tiling = tiles
        try:
            out = run()
            values = [out.detach()] + [t.grad.clone() for t in (u, v, s, x)]
            if reference is None:
                reference = values
            diff = max((a - b).abs().max().item()
                       for a, b in zip(values, reference))
            kernels, _ = kernel_times(run)
            parts = [kernels.get(name, float('nan')) for name in
                     ('_forward_body', '_backward_dst_body',
                      '_backward_src_body')]
            label = ('shipped', '', '', '') if config is None else config
            print('| ' + ' | '.join(str(c) for c in label) + ' | '
                  + ' | '.join(f'{p:.3f}' for p in parts)
                  + f' | {sum(parts):.3f} | {diff:.1e} |')
        except Exception as error:  # noqa: BLE001 (a record)
            print(f'| {config} | {type(error).__name__}: '
                  f'{str(error).splitlines()[0][:150]} |')
        finally:
            transformer.table_tiling = shipped
        sys.stdout.flush()


def part_layer(rounds, warmup):
    import ikgat.nn.pair_tables as pair_tables
    from benchmarks.gpu_speed import build_model, layer_step, synthetic_graph
    from ikgat import IKTransformerConv
    device = torch.device(DEVICE)
    x, edge_index = synthetic_graph(N, E, 128, device, 0)
    models = {'TransformerConv': build_model('TransformerConv', 128),
              'direct': build_model('IKTransformerConv-direct', 128)}
    for points in (32, 16):
        models[f'direct R={points}'] = IKTransformerConv(
            128, 8, heads=8, kernel='direct', num_spectral_points=points)
    steps = {}
    for name, model in models.items():
        steps[name] = layer_step(model.to(device), x, edge_index, device,
                                 'float32')

    def with_unrolled(flag, step):
        def run():
            pair_tables.UNROLLED = flag
            try:
                step()
            finally:
                pair_tables.UNROLLED = True
        return run
    steps['direct, angles by matrix product'] = with_unrolled(
        False, steps['direct'])
    times = interleaved(steps, rounds, warmup)
    print('\n## 3. One layer, forward + backward, arxiv size\n')
    print('| model | ms | / TransformerConv |\n|---|---:|---:|')
    for name, ms in times.items():
        print(f'| {name} | {ms:.3f} | {ms / times["TransformerConv"]:.2f} |')
    sys.stdout.flush()
    _, prof = kernel_times(steps['direct'], 3)
    print('\n### Profile of `direct`, 3 steps\n\n```')
    print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=25,
                                    max_name_column_width=60))
    print('```')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--parts', nargs='+',
                        default=['tables', 'sweep', 'layer'])
    args = parser.parse_args()
    global N, E
    rounds, warmup = 10, 3
    if args.quick:
        N, E, rounds, warmup = 500, 3000, 2, 1
    name = torch.cuda.get_device_name() if DEVICE == 'cuda' else 'CPU'
    print(f'# {name}: {N} nodes, {E} edges, H = {H},'
          f' D = {D}, R = {R} in m = {M} sets, C = {C}; medians of {rounds} '
          f'interleaved rounds after {warmup}\n')
    for part in args.parts:
        try:
            {'tables': lambda: part_tables(rounds, warmup),
             'sweep': part_sweep,
             'layer': lambda: part_layer(rounds, warmup)}[part]()
        except Exception as error:  # noqa: BLE001 (a record)
            import traceback
            traceback.print_exc()
            print(f'\n{part}: {type(error).__name__}: {error}')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
