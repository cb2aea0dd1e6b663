"""The per-node random-feature tables of ikgat.ops.compiled_features:
the backward formula is autograd's, the compiled functions compute what
the eager ones do, the pairwise estimate gives the same values and
gradients through them, and a failing compiler falls back to the eager
path with one warning."""
import pytest
import torch

from ikgat.ops import compiled_features as cf
from ikgat.ops import edge_fourier as pf
from ikgat.ops import edge_fourier_tables
from tests.ops.test_edge_fourier import case


def tables_case(rows=37, heads=2, channels=3, num_sets=2, num_points=5,
                dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, heads, channels, generator=generator, dtype=dtype)
    matrix = torch.randn(heads, channels, num_sets * num_points,
                         generator=generator, dtype=dtype)
    grad = torch.randn(heads, rows, 2 * num_points, generator=generator,
                       dtype=dtype)
    return x, matrix, grad


def naive_features(x, matrix, num_points):
    """phi = [sum_s cos a_s; sum_s sin a_s], head by head and set by set."""
    heads = []
    for head in range(x.size(1)):
        angles = x[:, head] @ matrix[head]
        sets = angles.split(num_points, dim=1)
        heads.append(torch.cat([sum(a.cos() for a in sets),
                                sum(a.sin() for a in sets)], dim=1))
    return torch.stack(heads)


@pytest.mark.parametrize('num_sets', [1, 2, 3])
@pytest.mark.parametrize('heads', [1, 2])
def test_features_and_their_backward_are_the_formula(num_sets, heads):
    x, matrix, grad = tables_case(heads=heads, num_sets=num_sets)
    x.requires_grad_()
    matrix.requires_grad_()
    expected = naive_features(x, matrix, 5)
    expected_grads = torch.autograd.grad(expected, (x, matrix), grad)
    with torch.no_grad():
        out = cf.features(x, matrix, 5)
        grads = cf.features_backward(grad, x, matrix, 5)
    torch.testing.assert_close(out, expected)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)


def test_the_rule_names_cpu_float_inputs_with_enough_angles(monkeypatch):
    monkeypatch.setattr(cf, 'ENABLED', True)
    x = torch.randn(4, 1, 2)
    assert cf.use_compiled(x, cf.MIN_ANGLES)
    assert not cf.use_compiled(x, cf.MIN_ANGLES - 1)
    assert not cf.use_compiled(x.half(), cf.MIN_ANGLES)
    assert not cf.use_compiled(x.to('meta'), cf.MIN_ANGLES)
    monkeypatch.setattr(cf, 'ENABLED', False)
    assert not cf.use_compiled(x, cf.MIN_ANGLES)


@pytest.mark.slow
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_compiled_functions_equal_the_eager_ones(dtype):
    tolerance = dict(atol=2e-5, rtol=2e-5) if dtype == torch.float32 else {}
    # Two sizes and head counts through the same dynamic-shape function:
    for rows, heads in [(37, 2), (1000, 3)]:
        x, matrix, grad = tables_case(rows, heads, dtype=dtype)
        torch.testing.assert_close(
            cf.compiled_features(x, matrix, 5), cf.features(x, matrix, 5),
            **tolerance)
        for got, want in zip(
                cf.compiled_features_backward(grad, x, matrix, 5),
                cf.features_backward(grad, x, matrix, 5)):
            torch.testing.assert_close(got, want, **tolerance)


def run_estimate(num_graphs, edge_key):
    """Values and gradients of the pairwise estimate (float64, on CPU:
    the compiled tables are a CPU path)."""
    query, key, points, src, dst, extra, graph_dst, graph_src = (
        None if t is None else t.cpu() for t in case(
            num_graphs, edge_key=edge_key, dtype=torch.float64))
    leaves = [t.requires_grad_() for t in (query, key, points)
              + ((extra, ) if edge_key else ())]
    out = pf.edge_fourier_log_similarity(
        leaves[0], leaves[1], leaves[2], src, dst, 1e-5,
        leaves[3] if edge_key else None, graph_dst, graph_src)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype)
    grads = torch.autograd.grad((out * weights.view(out.shape)).sum(),
                                leaves)
    return out.detach(), grads


@pytest.mark.slow
@pytest.mark.parametrize('num_graphs', [1, 2])
@pytest.mark.parametrize('edge_key', [False, True])
@pytest.mark.parametrize('small_chunks', [False, True])
def test_the_estimate_is_the_same_through_compiled_tables(
        num_graphs, edge_key, small_chunks, monkeypatch):
    monkeypatch.setattr(cf, 'ENABLED', False)
    expected, expected_grads = run_estimate(num_graphs, edge_key)
    if small_chunks:  # one head per group, edge and row chunks of
        # unequal sizes (the compiled functions on row chunks too)
        monkeypatch.setattr(edge_fourier_tables, 'TABLE_ELEMENTS', 1)
        monkeypatch.setattr(edge_fourier_tables, 'CHUNK_ELEMENTS', 150)
        monkeypatch.setattr(edge_fourier_tables, 'COMPILED_WHOLE_ANGLES', 0)
        monkeypatch.setattr(edge_fourier_tables, 'COMPILED_CHUNK_ANGLES', 25)
    monkeypatch.setattr(cf, 'ENABLED', True)
    monkeypatch.setattr(cf, 'MIN_ANGLES', 0)
    calls = []
    compiled = torch.compile(cf.features, dynamic=True)

    def spy(*args):
        calls.append(args[0].shape)
        return compiled(*args)

    monkeypatch.setattr(cf.compiled_features, 'failed', False)
    monkeypatch.setattr(cf.compiled_features, 'compiled', spy)
    out, grads = run_estimate(num_graphs, edge_key)
    # Shared points: the queries and the keys (or the one chunk of edge
    # keys), in the forward and again in the backward pass; per-graph
    # points: never.
    if not small_chunks:
        assert len(calls) == (0 if num_graphs > 1 else 4)
    elif num_graphs == 1:  # row chunks of 2 rows (25 // 10 angles)
        assert len(calls) > 4
        assert min(shape[0] for shape in calls) <= 2
    torch.testing.assert_close(out, expected)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)


def test_a_failing_compiler_falls_back_with_one_warning(monkeypatch):
    monkeypatch.setattr(cf, 'ENABLED', True)
    monkeypatch.setattr(cf, 'MIN_ANGLES', 0)

    def broken(*args):
        raise RuntimeError('no C++ compiler')

    for function in (cf.compiled_features, cf.compiled_features_backward):
        # (failed, set by the fallback, is restored after the test too)
        monkeypatch.setattr(function, 'failed', False)
        monkeypatch.setattr(function, 'compiled', broken)
    with pytest.warns(RuntimeWarning,
                      match='no C.. compiler.*eager path') as record:
        out, grads = run_estimate(1, False)
    assert len(record) == 1
    assert not cf.ENABLED
    monkeypatch.setattr(cf, 'ENABLED', False)
    expected, expected_grads = run_estimate(1, False)
    torch.testing.assert_close(out, expected)
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want)
