r"""Record of this GPU session (not maintained, linted or imported): the
transformer attention operator alone at arxiv size (8 heads, D = 8,
R = 64, C = 8; forward + backward with the points' gradient), three ways:

* ``points``: the shipped path, phi made inside the kernels
  (ikgat.nn.triton_fourier_pairs), points' gradient as one product per side;
* ``points, batched points gradient``: the same with the per-head batched
  product (einsum) of the previous commit;
* ``tables``: phi(q), phi(k) made by torch (N x H x 2R each), then the
  gathered-table kernels of ikgat.nn.triton_transformer.

Then torch.profiler's CUDA time per kernel of the ``points`` path.
"""
import statistics

import torch

import ikgat.nn.triton_transformer as transformer
from ikgat.kernels.random_features import fourier_features
from ikgat.nn.triton_attention import prepare_csr

N, E, H, D, R, C = 169_343, 1_166_243, 8, 8, 64, 8
SHIPPED = transformer._points_gradient


def batched(points, u, v, grad_angles_u, grad_angles_v):
    grad = torch.einsum('nhsr,nhd->shrd', grad_angles_u, u)
    grad += torch.einsum('nhsr,nhd->shrd', grad_angles_v, v)
    return grad.contiguous()


def main():
    torch.manual_seed(0)
    device = torch.device('cuda')
    edge_index = torch.randint(0, N, (2, E), device=device)
    csr = prepare_csr(edge_index, N, N)
    q = (0.3 * torch.randn(N, H, D, device=device)).requires_grad_()
    k = (0.3 * torch.randn(N, H, D, device=device)).requires_grad_()
    points = torch.randn(1, H, R, D, device=device, requires_grad=True)
    s = torch.randn(N, H, device=device, requires_grad=True)
    x = torch.randn(N, H, C, device=device, requires_grad=True)
    scale, eps = 1.0 / R, 1e-5

    def points_step():
        out = transformer.fused_transformer_attention(
            q, k, s, x, csr, N, 'log_square', scale, eps, points=points)
        out.sum().backward()

    def tables_step():
        out = transformer.fused_transformer_attention(
            fourier_features(q, points), fourier_features(k, points), s, x,
            csr, N, 'log_square', scale, eps)
        out.sum().backward()

    def with_batched():
        transformer._points_gradient = batched
        try:
            points_step()
        finally:
            transformer._points_gradient = SHIPPED

    steps = {'points': points_step,
             'points, batched points gradient': with_batched,
             'tables': tables_step}
    times = {name: [] for name in steps}
    for round_ in range(13):
        for name, step in steps.items():
            start, stop = (torch.cuda.Event(enable_timing=True)
                           for _ in range(2))
            start.record()
            step()
            stop.record()
            torch.cuda.synchronize()
            if round_ >= 3:
                times[name].append(start.elapsed_time(stop))
    print(f'# The attention operator alone, {torch.cuda.get_device_name()}: '
          f'{N} nodes, {E} edges, H = {H}, D = {D}, R = {R}, C = {C}; '
          f'forward + backward (points need a gradient); median of 10 '
          f'interleaved rounds after 3\n')
    print('| path | ms | peak MiB |')
    print('|---|---:|---:|')
    for name, step in steps.items():
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**20
        print(f'| {name} | {statistics.median(times[name]):.3f} | '
              f'{peak:.0f} |')
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            points_step()
        torch.cuda.synchronize()
    print('\n## CUDA time of the `points` path, 3 steps\n')
    print('```')
    print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=12,
                                    max_name_column_width=50))
    print('```')


if __name__ == '__main__':
    main()
