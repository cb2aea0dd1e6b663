r"""Record of this GPU session (not maintained, linted or imported): where
the time of IKTransformerConv ``direct``'s attention goes at arxiv size on a
GPU, and what gathering per-node feature tables instead would cost.

The operator alone (8 heads, D = 8, R = 64 points in m = 2 sets as the
layer's non-stationary map, C = 8; random graph of 169,343 nodes and
1,166,243 edges; forward + backward with the points' gradient):

* ``points``: the shipped path (phi made per edge inside the kernels of
  ikgat.nn.triton_fourier_pairs);
* ``tables, torch phi``: phi(q), phi(k) made by ikgat's fourier_features
  (N x H x 2R each, autograd), then the gathered-table kernels of
  ikgat.nn.triton_transformer;
* ``tables, compiled phi``: phi and its backward (angles recomputed) each
  one torch.compile'd function, the points' gradient one product per side;
* the table kernels alone (tables given), forward and backward timed apart,
  at the shipped tiling and others (B_H heads, B_E edges, warps), and with
  bfloat16 tables.

``--approx-trig`` (its own process: Triton's globals are bound on first
jit) replaces the kernels' sine and cosine (Cody-Waite reduction and two
polynomials) by a reduction to [-pi, pi] and PTX's sin.approx.f32 and
cos.approx.f32, and times the ``points`` path, with the largest difference
from the precise one.

    python benchmarks/results/cuda-2026-11-27-h100/tables.py [--approx-trig]
    python benchmarks/results/cuda-2026-11-27-h100/tables.py --quick  # CPU
"""
import argparse
import statistics
import sys

import torch

N, E, H, D, R, C, M = 169_343, 1_166_243, 8, 8, 64, 8, 2


def fast_sincos(theta):
    # theta - 2 pi round(theta / 2 pi) (2 pi in two parts), then PTX's
    # approximate sine and cosine (absolute error about 2^-21 on [-pi, pi]).
    import triton.language as tl
    j = tl.floor(theta * 0.15915494309189535 + 0.5)
    r = theta - j * 6.28125
    r = r - j * 1.9353071795864769e-3
    sin = tl.inline_asm_elementwise('sin.approx.f32 $0, $1;', '=r,r', [r],
                                    dtype=tl.float32, is_pure=True, pack=1)
    cos = tl.inline_asm_elementwise('cos.approx.f32 $0, $1;', '=r,r', [r],
                                    dtype=tl.float32, is_pure=True, pack=1)
    return sin, cos


def timed(steps, rounds, warmup, device):
    r"""Median ms of each named step's parts (a step returns {part: ms})
    over interleaved rounds after the warm-up."""
    times = {}
    for round_ in range(warmup + rounds):
        for name, step in steps.items():
            for part, ms in step().items():
                if round_ >= warmup:
                    times.setdefault((name, part), []).append(ms)
    return {key: statistics.median(value) for key, value in times.items()}


def events(device):
    if device.type == 'cuda':
        return [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    return None


def run_parts(forward, backward, device):
    r"""ms of the forward and the backward (and their sum)."""
    import time
    if device.type == 'cuda':
        start, middle, stop = events(device)
        start.record()
        out = forward()
        middle.record()
        backward(out)
        stop.record()
        torch.cuda.synchronize()
        fwd, bwd = start.elapsed_time(middle), middle.elapsed_time(stop)
    else:
        t0 = time.perf_counter()
        out = forward()
        t1 = time.perf_counter()
        backward(out)
        t2 = time.perf_counter()
        fwd, bwd = 1e3 * (t1 - t0), 1e3 * (t2 - t1)
    return {'forward': fwd, 'backward': bwd, 'total': fwd + bwd}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--approx-trig', action='store_true')
    parser.add_argument('--quick', action='store_true')
    args = parser.parse_args()
    global N, E, H, R
    if args.quick:
        N, E, H, R = 40, 120, 2, 8
    if args.approx_trig:
        import ikgat.kernels.triton_fourier as triton_fourier
        triton_fourier._sincos = fast_sincos
    import ikgat.nn.triton_transformer as transformer
    from ikgat.kernels.random_features import fourier_features
    from ikgat.nn.triton_attention import prepare_csr

    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    rounds, warmup = (10, 3) if not args.quick else (1, 1)
    torch.manual_seed(0)
    edge_index = torch.randint(0, N, (2, E), device=device)
    csr = prepare_csr(edge_index, N, N)
    q = (0.3 * torch.randn(N, H, D, device=device)).requires_grad_()
    k = (0.3 * torch.randn(N, H, D, device=device)).requires_grad_()
    points = torch.randn(M, H, R, D, device=device, requires_grad=True)
    s = torch.randn(N, H, device=device, requires_grad=True)
    x = torch.randn(N, H, C, device=device, requires_grad=True)
    scale, eps = 1.0 / (M * M * R), 1e-5
    grad_out = torch.randn(N, H, C, device=device)

    def attention(u, v, **kwargs):
        return transformer.fused_transformer_attention(
            u, v, s, x, csr, N, 'log_square', scale, eps, use_triton=True,
            **kwargs)

    def backward(out):
        out.backward(grad_out)

    def points_step():
        return run_parts(lambda: attention(q, k, points=points), backward,
                         device)

    print(f'# {torch.cuda.get_device_name() if device.type == "cuda" else "CPU"}'
          f': {N} nodes, {E} edges, H = {H}, D = {D}, R = {R} in m = {M} '
          f'sets, C = {C}; median of {rounds} interleaved rounds after '
          f'{warmup}\n')
    if args.approx_trig:
        precise = None
        out = attention(q, k, points=points)
        out.backward(grad_out)
        result = timed({'points, approx trig': points_step}, rounds, warmup,
                       device)
        table(result)
        torch.save({'out': out.detach().cpu(), 'grad_points':
                    points.grad.cpu()}, '/tmp/approx.pt')
        try:
            precise = torch.load('/tmp/precise.pt')
        except FileNotFoundError:
            print('(no /tmp/precise.pt to compare with)')
        if precise is not None:
            print(f'\nlargest |out - precise out|: '
                  f'{(out.detach().cpu() - precise["out"]).abs().max():.3e}'
                  f' (|out| up to {precise["out"].abs().max():.3e})')
        return

    # phi through torch.compile, its backward recomputing the angles.
    def phi(x_, points_):
        angle = torch.einsum('nhd,mhrd->nhmr', x_, points_)
        return torch.cat([angle.cos().sum(2), angle.sin().sum(2)], -1)

    def phi_angle_grad(grad, x_, points_):
        angle = torch.einsum('nhd,mhrd->nhmr', x_, points_)
        grad_cos, grad_sin = grad[..., :R], grad[..., R:]
        return (angle.cos() * grad_sin[:, :, None]
                - angle.sin() * grad_cos[:, :, None])

    compiled_phi = torch.compile(phi, dynamic=False)
    compiled_grad = torch.compile(phi_angle_grad, dynamic=False)

    class Phi(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x_, points_):
            ctx.save_for_backward(x_, points_)
            return compiled_phi(x_, points_)

        @staticmethod
        def backward(ctx, grad):
            x_, points_ = ctx.saved_tensors
            grad_angle = compiled_grad(grad.contiguous(), x_, points_)
            grad_x = torch.einsum('nhmr,mhrd->nhd', grad_angle, points_)
            grad_points = transformer._angle_product(grad_angle, x_, True)
            return grad_x, grad_points

    def tables_torch_step():
        return run_parts(lambda: attention(fourier_features(q, points),
                                           fourier_features(k, points)),
                         backward, device)

    def tables_compiled_step():
        return run_parts(lambda: attention(Phi.apply(q, points),
                                           Phi.apply(k, points)),
                         backward, device)

    # The kernels alone on given tables.
    with torch.no_grad():
        u0, v0 = fourier_features(q, points), fourier_features(k, points)
    u = u0.clone().requires_grad_()
    v = v0.clone().requires_grad_()
    u16 = u0.to(torch.bfloat16).requires_grad_()
    v16 = v0.to(torch.bfloat16).requires_grad_()
    shipped_tiling = transformer.tiling

    def kernels_step(tiles=None, bf16=False):
        def step():
            if tiles is not None:
                block_h, block_e, warps = tiles
                transformer.tiling = lambda *a, **kw: dict(
                    BLOCK_H=block_h, BLOCK_D=2 * R, BLOCK_C=C,
                    BLOCK_E=block_e, num_warps=warps)
            try:
                return run_parts(lambda: attention(*((u16, v16) if bf16
                                                     else (u, v))),
                                 backward, device)
            finally:
                transformer.tiling = shipped_tiling
        return step

    shipped = transformer.tiling(E, N, H, 2 * R, C)
    print(f'shipped table tiling: {shipped}\n')
    steps = {'points (shipped)': points_step,
             'tables, torch phi': tables_torch_step,
             'tables, compiled phi': tables_compiled_step,
             'table kernels, shipped tiling': kernels_step()}
    for tiles in [(8, 2, 8), (8, 2, 4), (8, 4, 8), (4, 4, 8), (2, 4, 4),
                  (2, 8, 4), (1, 8, 4), (1, 16, 4), (1, 8, 2)]:
        steps[f'table kernels, B_H {tiles[0]} B_E {tiles[1]} '
              f'{tiles[2]} warps'] = kernels_step(tiles)
    steps['table kernels, bf16 tables, shipped tiling'] = kernels_step(
        bf16=True)
    working = {}
    for name, step in steps.items():  # compile each once, keep what runs
        try:
            step()
            working[name] = step
        except Exception as error:  # noqa: BLE001 (a record of what failed)
            print(f'{name}: {type(error).__name__}: '
                  f'{str(error).splitlines()[0][:200]}')
        sys.stdout.flush()
    result = timed(working, rounds, warmup, device)
    table(result)
    out = attention(q, k, points=points)
    torch.save({'out': out.detach().cpu()}, '/tmp/precise.pt')

    peaks = {}
    for name in ('points (shipped)', 'tables, torch phi',
                 'tables, compiled phi', 'table kernels, shipped tiling'):
        if name in working and device.type == 'cuda':
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            working[name]()
            peaks[name] = (torch.cuda.max_memory_allocated() - base) / 2**20
    if peaks:
        print('\n| path | step MiB above the inputs |\n|---|---:|')
        for name, peak in peaks.items():
            print(f'| {name} | {peak:.0f} |')
    if device.type == 'cuda' and 'tables, compiled phi' in working:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                working['tables, compiled phi']()
            torch.cuda.synchronize()
        print('\n## CUDA time of `tables, compiled phi`, 3 steps\n\n```')
        print(prof.key_averages().table(sort_by='cuda_time_total',
                                        row_limit=14,
                                        max_name_column_width=50))
        print('```')


def table(result):
    names = list(dict.fromkeys(name for name, _ in result))
    print('| path | forward ms | backward ms | total ms |')
    print('|---|---:|---:|---:|')
    for name in names:
        print(f'| {name} | {result[(name, "forward")]:.3f} | '
              f'{result[(name, "backward")]:.3f} | '
              f'{result[(name, "total")]:.3f} |')
    sys.stdout.flush()


if __name__ == '__main__':
    main()
