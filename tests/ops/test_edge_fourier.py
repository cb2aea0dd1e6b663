"""The random-feature kernels between two vectors over a graph's edges
(ikgat.ops.edge_fourier): the estimate is unbiased for the RBF
kernel, each edge's value is fourier_estimate of its two vectors (shared
and per-graph points, with and without per-edge keys, in chunks), and the
gradients are those of the formula."""
import math

import pytest
import torch

from ikgat.kernels import RandomFourierKernel
from ikgat.kernels.random_features import fourier_estimate
from ikgat.ops import edge_fourier as pf
from ikgat.ops import edge_fourier_tables
from tests.helpers import DEVICE


def edges_of(num_src, num_dst, num_edges, seed, graph_src=None,
             graph_dst=None):
    """Random edges; with graphs, each edge inside one graph."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (num_edges, ), generator=generator)
    if graph_src is None:
        dst = torch.randint(0, num_dst, (num_edges, ), generator=generator)
        return src, dst
    dst = []
    for j in src.tolist():
        same = (graph_dst == graph_src[j]).nonzero().view(-1)
        pick = torch.randint(0, same.numel(), (1, ), generator=generator)
        dst.append(int(same[pick]))
    return src, torch.tensor(dst)


def reference(query, key, points, src, dst, eps, edge_key=None,
              graph_dst=None):
    """log(f^2 + eps) edge by edge from fourier_estimate."""
    keys = key[src] + (0 if edge_key is None else edge_key)
    graph = (torch.zeros_like(dst) if graph_dst is None else graph_dst[dst])
    sets = [points[graph, s] for s in range(points.size(1))]  # [E, H, R, C]
    estimate = fourier_estimate(query[dst], keys, sets)
    return (estimate * estimate + eps).log()


def case(num_graphs=1, num_sets=2, heads=3, channels=4, points=5, seed=0,
         edge_key=False, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(6, heads, channels, generator=generator, dtype=dtype)
    key = torch.randn(7, heads, channels, generator=generator, dtype=dtype)
    spectral = torch.randn(num_graphs, num_sets, heads, points, channels,
                           generator=generator, dtype=dtype) * 0.7
    graph_dst = graph_src = None
    if num_graphs > 1:
        graph_dst = torch.tensor([0, 0, 0, 1, 1, 1])
        graph_src = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    src, dst = edges_of(7, 6, 20, seed, graph_src, graph_dst)
    extra = None
    if edge_key:
        extra = torch.randn(src.numel(), heads, channels,
                            generator=generator, dtype=dtype)
    # Made on the CPU from the seed, then moved to the tests' device:
    return tuple(None if t is None else t.to(DEVICE)
                 for t in (query, key, spectral, src, dst, extra, graph_dst,
                           graph_src))


@pytest.mark.parametrize('num_graphs', [1, 2])
@pytest.mark.parametrize('num_sets', [1, 2])
@pytest.mark.parametrize('edge_key', [False, True])
def test_each_edge_is_fourier_estimate_of_its_vectors(num_graphs, num_sets,
                                                      edge_key):
    query, key, points, src, dst, extra, graph_dst, graph_src = case(
        num_graphs, num_sets, edge_key=edge_key)
    out = pf.edge_fourier_log_similarity(query, key, points, src, dst, 1e-5,
                                         extra, graph_dst, graph_src)
    expected = reference(query, key, points, src, dst, 1e-5, extra,
                         graph_dst)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('num_graphs', [1, 2])
@pytest.mark.parametrize('edge_key', [False, True])
def test_small_chunks_and_head_groups_change_nothing(num_graphs, edge_key,
                                                     monkeypatch):
    # In float64: the case has an edge whose estimate is near 0, where the
    # gradient of log(f^2 + eps) moves by 1e-3 in float32 when the sums'
    # order changes (as it does on CUDA between chunks and whole tables).
    query, key, points, src, dst, extra, graph_dst, graph_src = case(
        num_graphs, edge_key=edge_key, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (query, key, points)]
    if extra is not None:
        leaves.append(extra.clone().requires_grad_())

    def run():
        for t in leaves:
            t.grad = None
        out = pf.edge_fourier_log_similarity(
            leaves[0], leaves[1], leaves[2], src, dst, 1e-5,
            leaves[3] if extra is not None else None, graph_dst, graph_src)
        weights = torch.linspace(-1, 1, out.numel(), device=out.device)
        (out * weights.view(out.shape)).sum().backward()
        return out.detach(), [t.grad for t in leaves]

    whole, whole_grads = run()
    # One head per group and a few edges (and rows) per chunk:
    monkeypatch.setattr(edge_fourier_tables, 'TABLE_ELEMENTS', 1)
    monkeypatch.setattr(edge_fourier_tables, 'CHUNK_ELEMENTS', 64)
    chunked, chunked_grads = run()
    torch.testing.assert_close(chunked, whole, atol=1e-12, rtol=1e-10)
    for got, expected in zip(chunked_grads, whole_grads):
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('num_graphs', [1, 2])
@pytest.mark.parametrize('edge_key', [False, True])
def test_gradcheck(num_graphs, edge_key):
    query, key, points, src, dst, extra, graph_dst, graph_src = case(
        num_graphs, heads=2, channels=2, points=3, edge_key=edge_key,
        dtype=torch.float64)
    tensors = [query, key, points] + ([extra] if edge_key else [])
    tensors = tuple(t.requires_grad_() for t in tensors)

    def function(*args):
        return pf.edge_fourier_log_similarity(
            args[0], args[1], args[2], src, dst, 1e-2,
            args[3] if edge_key else None, graph_dst, graph_src)

    assert torch.autograd.gradcheck(function, tensors)


def test_no_edges_and_no_nodes():
    query, key, points, *_ = case()
    empty = torch.empty(0, dtype=torch.long, device=DEVICE)
    out = pf.edge_fourier_log_similarity(query, key, points, empty, empty,
                                         1e-5)
    assert out.shape == (0, 3)
    out = pf.edge_fourier_log_similarity(query[:0], key[:0], points, empty,
                                         empty, 1e-5)
    assert out.shape == (0, 3)


def test_bad_points_are_named():
    query, key, points, src, dst, *_ = case()
    with pytest.raises(ValueError, match=r"\(G, m, H, R, C\).*\(2, 3, 5, 4\)"):
        pf.edge_fourier_log_similarity(query, key, points[0], src, dst, 1e-5)
    with pytest.raises(ValueError, match='graph_dst and graph_src'):
        pf.edge_fourier_log_similarity(query, key, points.expand(2, -1, -1,
                                                                 -1, -1),
                                       src, dst, 1e-5)


@pytest.mark.parametrize('lengthscale', [1.0, 1.5])
def test_the_estimate_is_unbiased_for_the_rbf_kernel(lengthscale):
    # f = phi(q)^T phi(k) / R with w ~ N(0, I / (2 l^2)) has the mean
    # E cos(w^T (q - k)) = exp(-|q - k|^2 / (4 l^2)).  Each head draws its
    # own points: 400 heads x 10 redraws = 4000 independent estimates of
    # R = 4 points, whose mean is checked by a z-test at three (q, k):
    heads, channels = 400, 3
    kernel = RandomFourierKernel(heads, channels, num_spectral_points=4,
                                 lengthscale=lengthscale, pairing='vectors')
    generator = torch.Generator().manual_seed(0)
    query = torch.tensor([0.3, -0.2, 0.1])
    for distance in (0.5, 1.5, 3.0):
        direction = torch.tensor([1.0, 2.0, -2.0]) / 3.0
        key = query + distance * direction
        q = query.expand(1, heads, channels)
        k = key.expand(1, heads, channels)
        estimates = []
        for _ in range(10):
            kernel.redraw_spectral_points(generator)
            estimates.append(fourier_estimate(q, k,
                                              kernel.spectral_point_sets))
        estimates = torch.cat(estimates).double().view(-1)
        exact = math.exp(-distance**2 / (4 * lengthscale**2))
        error = estimates.std() / math.sqrt(estimates.numel())
        z = (estimates.mean() - exact) / error
        assert abs(float(z)) < 4.0, (distance, float(z))
        # and the edge path gives the same estimates' squares:
        src = dst = torch.zeros(1, dtype=torch.long)
        log = kernel.edge_log_similarity(q, k, src, dst)
        last = estimates[-heads:].float()
        torch.testing.assert_close((log.exp() - kernel.eps).view(-1),
                                   last * last, atol=1e-5, rtol=1e-4)


def test_low_precision_inputs_are_computed_in_float32():
    # The sparse products have no bfloat16 kernel on the CPU: the operator
    # computes in float32 and returns the inputs' dtype, values and
    # gradients within bfloat16's resolution of the float32 ones.
    query, key, points, src, dst, *_ = case(num_sets=2)
    leaves = [t.to(torch.bfloat16).requires_grad_()
              for t in (query, key, points)]
    out = pf.edge_fourier_log_similarity(*leaves, src, dst, 1e-2)
    out.sum().backward()
    assert out.dtype == torch.bfloat16
    assert all(t.grad.dtype == torch.bfloat16 for t in leaves)
    exact = [t.detach().float().requires_grad_() for t in leaves]
    expected = pf.edge_fourier_log_similarity(*exact, src, dst, 1e-2)
    expected.sum().backward()
    torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)
    for got, want in zip(leaves, exact):
        torch.testing.assert_close(got.grad.float(), want.grad, atol=5e-2,
                                   rtol=5e-2)
