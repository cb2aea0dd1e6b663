r"""Record of the ninth CUDA run of 2026-11-27 (not maintained, linted or
imported): the transformer drop-ins' node tables in Triton
(``ikgat.nn.triton_pair_tables`` of commit c202a1a, not kept on main: see the
README) against main's compiled passes around
cuBLAS angle products (``ikgat.nn.pair_tables`` before this commit,
reproduced here by compiling its eager functions as main did).

1. One IKTransformerConv layer forward + backward on the synthetic arxiv
   graph of ``benchmarks.gpu_speed`` (128 features, 8 heads x 8),
   interleaved: TransformerConv eager; ``direct`` with the Triton tables and
   with main's; ``direct`` with R = 32 and R = 16 (Triton tables); the
   largest differences of the output and the gradients between the two
   tables; the profile of three ``direct`` steps.
2. One side's tables forward + backward (169,343 nodes, 8 heads x 8, R =
   64, m = 1 and 2 sets), both paths, and their errors against float64.

    python benchmarks/results/cuda-2026-11-27-h100/study9.py
"""
import contextlib
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


def interleaved(steps, rounds, warmup):
    times = {name: [] for name in steps}
    for round_ in range(warmup + rounds):
        for name, step in steps.items():
            ms = cuda_ms(step)
            if round_ >= warmup:
                times[name].append(ms)
    return {name: statistics.median(v) for name, v in times.items()}


import ikgat.nn.pair_tables as pair_tables  # noqa: E402

_EAGER = (pair_tables.tables, pair_tables.angle_gradient)
_COMPILED = tuple(torch.compile(f, dynamic=True) for f in _EAGER)


@contextlib.contextmanager
def mains_tables():
    r"""main's CUDA path: the compiled eager functions, no Triton."""
    saved = (pair_tables._triton_applies, pair_tables.tables,
             pair_tables.angle_gradient)
    pair_tables._triton_applies = lambda x, points: False
    pair_tables.tables, pair_tables.angle_gradient = _COMPILED
    try:
        yield
    finally:
        (pair_tables._triton_applies, pair_tables.tables,
         pair_tables.angle_gradient) = saved


def main():
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

    def with_mains_tables():
        with mains_tables():
            steps['direct']()
    steps["direct, main's tables"] = with_mains_tables
    print(f'# {torch.cuda.get_device_name()}: {n} nodes, {e} edges; medians'
          f' of {rounds} interleaved rounds after {warmup}\n')
    times = interleaved(steps, rounds, warmup)
    base = times['TransformerConv']
    print('| model | ms | / TransformerConv |\n|---|---:|---:|')
    for name, ms in times.items():
        print(f'| {name} | {ms:.3f} | {ms / base:.2f} |')
    model = models['direct']
    results = []
    for context in (contextlib.nullcontext, mains_tables):
        with context():
            model.zero_grad(set_to_none=True)
            out = model(x, edge_index)
            out.square().sum().backward()
            results.append([out.detach()] + [p.grad.clone() for p in
                                             model.parameters()])
    diffs = [((a - b).abs().max() / b.abs().max()).item()
             for a, b in zip(*results)]
    print(f'\nTriton against main\'s tables, largest difference relative to '
          f'the largest entry: output {diffs[0]:.2e}, parameter gradients '
          f'up to {max(diffs[1:]):.2e}')
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


def tables_study(rounds=10, warmup=3):
    n, heads, d, r = 169_343, 8, 8, 64
    print('\n## One side\'s tables, forward + backward\n')
    print('| sets | path | ms | table error | grad x error | grad W error |')
    print('|---:|---|---:|---:|---:|---:|')
    for m in (1, 2):
        torch.manual_seed(m)
        x = (0.3 * torch.randn(n, heads, d, device='cuda')).requires_grad_()
        w = torch.randn(m, heads, r, d, device='cuda', requires_grad=True)
        grad = torch.randn(n, heads, 2 * r, device='cuda')
        x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
        reference = _EAGER[0](x64, w64)
        want = torch.autograd.grad(reference, (x64, w64), grad.double())
        steps, errors = {}, {}
        for name, context in (('Triton', contextlib.nullcontext),
                              ("main's", mains_tables)):
            def step(context=context):
                x.grad = w.grad = None
                with context():
                    pair_tables.node_tables(x, w).backward(grad)
            step()
            with context():
                table = pair_tables.node_tables(x, w).detach()
            errors[name] = [((a.double() - b).abs().max()
                             / b.abs().max()).item()
                            for a, b in zip((table, x.grad, w.grad),
                                            (reference.detach(), *want))]
            steps[name] = step
        times = interleaved(steps, rounds, warmup)
        for name, ms in times.items():
            print(f'| {m} | {name} | {ms:.3f} | '
                  + ' | '.join(f'{v:.1e}' for v in errors[name]) + ' |')


if __name__ == '__main__':
    main()
    tables_study()
