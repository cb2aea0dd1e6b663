r"""Record of the fifth CUDA run of 2026-11-27 (not maintained, linted or
imported): one IKTransformerConv layer forward + backward on the synthetic
arxiv graph of ``benchmarks.gpu_speed`` (128 features, 8 heads x 8),
TransformerConv eager against ``direct`` with the tables' kernels at the
tilings of run 4 and of this commit (``table_tiling``), and ``direct`` with
R = 32 and R = 16 points (a prediction of ``benchmarks.gpu_model``),
interleaved; then the profile of three ``direct`` steps.

Then one side's tables (``ikgat::node_tables``, forward + backward, x and
the points) against a variant written here only: the angles of all heads
by one product with a block-diagonal matrix :math:`(HD, HmR)`, so that they
come out node-major (the shipped batched product makes them head-major, and
its backward copies them for the product of dL/dx), the same compiled
passes, dL/dx by the transposed product, dL/dW by ``angle_product``.

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


def interleaved(steps, rounds, warmup):
    r"""Median ms of each step over interleaved rounds after the warm-up."""
    times = {name: [] for name in steps}
    for round_ in range(warmup + rounds):
        for name, step in steps.items():
            ms = cuda_ms(step)
            if round_ >= warmup:
                times[name].append(ms)
    return {name: statistics.median(v) for name, v in times.items()}


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
                    forward=False):  # the backward's tiles for all three
        return current(num_edges, num_nodes, heads, width, channels)

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
    times = interleaved(steps, rounds, warmup)
    base = times['TransformerConv']
    print('| model | ms | / TransformerConv |\n|---|---:|---:|')
    for name, ms in times.items():
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


def block_diagonal(points):
    # W[h D + d, h' m R + s R + r] = points[s, h, r, d] where h = h'.
    m, heads, r, d = points.shape
    eye = torch.eye(heads, device=points.device, dtype=points.dtype)
    return torch.einsum('shrd,hg->hdgsr', points, eye).reshape(
        heads * d, heads * m * r)


def tables_study(rounds=10, warmup=3):
    import ikgat.nn.pair_tables as pair_tables
    from ikgat.nn.triton_transformer import angle_product
    n, heads, d, r, m = 169_343, 8, 8, 64, 2
    features = torch.compile(lambda a: torch.cat(
        [a.cos().sum(2), a.sin().sum(2)], -1), dynamic=False)
    gradient = torch.compile(lambda a, g: a.cos() * g[:, :, None, r:]
                             - a.sin() * g[:, :, None, :r], dynamic=False)

    def angles(x, w):
        return (x.reshape(n, -1) @ w).view(n, heads, m, r)

    class BlockDiagonal(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, points):
            ctx.save_for_backward(x, points)
            return features(angles(x, block_diagonal(points)))

        @staticmethod
        def backward(ctx, grad):
            x, points = ctx.saved_tensors
            w = block_diagonal(points)
            grad_a = gradient(angles(x, w), grad.contiguous())
            grad_x = (grad_a.reshape(n, -1) @ w.t()).view_as(x)
            return grad_x, angle_product(grad_a, x, True)

    torch.manual_seed(0)
    x = (0.3 * torch.randn(n, heads, d, device='cuda')).requires_grad_()
    points = torch.randn(m, heads, r, d, device='cuda', requires_grad=True)
    grad = torch.randn(n, heads, 2 * r, device='cuda')
    paths = {'shipped': pair_tables.node_tables,
             'block-diagonal product': BlockDiagonal.apply}
    results, steps = {}, {}
    for name, path in paths.items():
        def step(path=path):
            x.grad = points.grad = None
            path(x, points).backward(grad)
        step()
        results[name] = (path(x, points).detach(), x.grad.clone(),
                         points.grad.clone())
        steps[name] = step
    times = interleaved(steps, rounds, warmup)
    print('\n## One side\'s tables, forward + backward\n')
    print('| path | ms |\n|---|---:|')
    for name, ms in times.items():
        print(f'| {name} | {ms:.3f} |')
    diffs = [(a - b).abs().max().item() / b.abs().max().item() for a, b in
             zip(results['block-diagonal product'], results['shipped'])]
    print('\nlargest relative difference (table, grad x, grad points): '
          + ', '.join(f'{v:.2e}' for v in diffs))


if __name__ == '__main__':
    main()
    tables_study()
