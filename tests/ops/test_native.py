"""The C kernels of the node terms (ikgat.ops.node_terms_native) and their
loader (ikgat.ops.native): the same numbers as the eager chunks on random
shapes, threads that change nothing, NaN rows that stay in their rows, and a
build that falls back to the PyTorch path where it cannot be made."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import ikgat.ops.native as native
import ikgat.ops.node_terms as node_terms
import ikgat.ops.node_terms_native as node_terms_native
from ikgat.ops.node_terms_chunks import (
    chunked_estimate,
    chunked_estimate_backward,
)

BUILT = native.load('node_terms_native') is not None
needs_build = pytest.mark.skipif(
    not BUILT, reason='no C kernels here (not Linux x86-64, or no compiler)')


def random_case(generator):
    r"""Projections, node-side points, tiled anchor features and G of a
    random shape (N, H, C, m, R, T)."""
    def draw(*shape, std=1.0):
        return std * torch.randn(*shape, generator=generator)

    def size(low, high):
        return int(torch.randint(low, high + 1, (), generator=generator))

    nodes, heads, channels = size(0, 40), size(1, 4), size(1, 12)
    sets, points, slopes = size(1, 2), size(1, 9), size(1, 2)
    x = draw(nodes, heads, channels, std=0.7)
    u = draw(heads, sets * points, channels, std=0.7)
    cos_weight, sin_weight = draw(heads, slopes, points), draw(
        heads, slopes, points)
    grad = draw(nodes, heads, slopes)
    return x, u, cos_weight, sin_weight, grad, sets


@needs_build
def test_equals_the_eager_chunks_on_random_shapes():
    generator = torch.Generator().manual_seed(0)
    for _ in range(25):
        x, u, cos_weight, sin_weight, grad, sets = random_case(generator)
        tiled = (cos_weight.repeat(1, 1, sets), sin_weight.repeat(1, 1, sets))
        expected = chunked_estimate(x, u, *tiled, 7, 'eager')
        torch.testing.assert_close(
            node_terms_native.estimate(x, u, *tiled), expected,
            atol=1e-5, rtol=1e-5)
        expected = chunked_estimate_backward(grad, x, u, cos_weight,
                                             sin_weight, sets, 7, 'eager',
                                             [True] * 4)
        got = node_terms_native.estimate_backward(grad, x, u, *tiled)
        heads, slopes, points = cos_weight.shape
        for name, value, target in zip(('x', 'points', 'A^c', 'A^s'), got,
                                       expected):
            if name.startswith('A'):  # the sets' tiles summed, as chunks
                value = value.view(heads, slopes, sets, points).sum(2)
                target = target.view(heads, slopes, sets, points).sum(2)
            torch.testing.assert_close(value, target, atol=1e-4, rtol=1e-4,
                                       msg=lambda m, n=name: f'{n}: {m}')


@needs_build
def test_threads_share_the_heads_without_changing_a_number():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(50, 5, 8, generator=generator)
    u = torch.randn(5, 12, 8, generator=generator)
    cos_weight, sin_weight = torch.randn(2, 5, 2, 12, generator=generator)
    grad = torch.randn(50, 5, 2, generator=generator)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 3):
            torch.set_num_threads(count)
            results.append((
                node_terms_native.estimate(x, u, cos_weight, sin_weight),
                *node_terms_native.estimate_backward(grad, x, u, cos_weight,
                                                     sin_weight)))
    finally:
        torch.set_num_threads(threads)
    for one, three in zip(*results):
        assert torch.equal(one, three)


def assert_equals_the_chunks(x, u, cos_weight, sin_weight, grad, tol):
    r"""The C kernels' estimate and gradients (one set) against the eager
    chunks', within :obj:`tol` of each output's largest magnitude."""
    torch.testing.assert_close(
        node_terms_native.estimate(x, u, cos_weight, sin_weight),
        chunked_estimate(x, u, cos_weight, sin_weight, 5, 'eager'),
        atol=tol, rtol=tol)
    got = node_terms_native.estimate_backward(grad, x, u, cos_weight,
                                              sin_weight)
    expected = chunked_estimate_backward(grad, x, u, cos_weight, sin_weight,
                                         1, 5, 'eager', [True] * 4)
    for value, target in zip(got, expected):
        scale = max(float(target.abs().max()), 1.0)
        torch.testing.assert_close(value / scale, target / scale,
                                   atol=10 * tol, rtol=10 * tol)


def cos_and_sin(theta):
    r"""cos and sin of :obj:`theta` :math:`(N,)` through the forward
    kernel: one channel and one point of 1 (the angle is the coordinate),
    slope 0 weighting the cosine alone and slope 1 the sine."""
    heads = 1
    x = theta.view(-1, heads, 1)
    u = torch.ones(heads, 1, 1)
    cos_weight = torch.tensor([[[1.0], [0.0]]])
    sin_weight = torch.tensor([[[0.0], [1.0]]])
    f = node_terms_native.estimate(x, u, cos_weight, sin_weight)
    return f[:, 0, 0], f[:, 0, 1]


@needs_build
def test_cosines_and_sines_are_accurate_inside_and_beyond_the_polynomials():
    # Inside the polynomials' range (|angle| <= 65536) every group of
    # angles takes them: absolute error within 1e-7 (float32's spacing
    # near 1 is 6e-8), every quadrant, both signs, tiny and huge angles.
    generator = torch.Generator().manual_seed(2)
    inside = torch.cat([
        torch.linspace(-7.0, 7.0, 4001),
        torch.linspace(-65536.0, 65536.0, 40001),
        torch.randn(4000, generator=generator) * 300,
        torch.tensor([0.0, -0.0, 1e-30, -1e-30, 65536.0, -65536.0]),
    ])
    cos, sin = cos_and_sin(inside)
    exact = inside.double()
    assert (cos.double() - exact.cos()).abs().max() <= 1e-7
    assert (sin.double() - exact.sin()).abs().max() <= 1e-7
    # A group with a larger angle, an infinity or a NaN goes to glibc's
    # vector functions (4 ulp): the same values, and NaN where they are.
    beyond = torch.cat([torch.linspace(-3e6, 3e6, 3001),
                        torch.tensor([float('inf'), float('nan'),
                                      -float('inf'), 1e30])])
    cos, sin = cos_and_sin(beyond)
    finite = beyond.isfinite()
    exact = beyond[finite].double()
    assert (cos[finite].double() - exact.cos()).abs().max() <= 2.5e-7
    assert (sin[finite].double() - exact.sin()).abs().max() <= 2.5e-7
    assert cos[~finite].isnan().all() and sin[~finite].isnan().all()


@needs_build
def test_large_angles_take_the_same_gradients_as_the_eager_chunks():
    # Angles up to about 4e5: groups on both sides of the polynomials'
    # range, forward and backward as the chunks (torch's cos and sin).
    # Whole numbers, so that both sum the same angles exactly.
    generator = torch.Generator().manual_seed(3)
    x = torch.randint(-3, 4, (70, 2, 4), generator=generator).float()
    x[:35] = torch.randint(-50000, 50001, (35, 2, 4),
                           generator=generator).float()
    u = torch.randint(-2, 3, (2, 10, 4), generator=generator).float()
    cos_weight, sin_weight = torch.randn(2, 2, 2, 10, generator=generator)
    grad = torch.randn(70, 2, 2, generator=generator)
    assert_equals_the_chunks(x, u, cos_weight, sin_weight, grad, tol=1e-4)


@needs_build
def test_a_nan_row_spoils_only_its_own_outputs():
    x = torch.randn(20, 2, 3)
    x[4, 1, 0] = float('nan')
    u, cos_weight, sin_weight = (torch.randn(2, 6, 3), torch.randn(2, 2, 6),
                                 torch.randn(2, 2, 6))
    f = node_terms_native.estimate(x, u, cos_weight, sin_weight)
    assert f[4, 1].isnan().all()
    f[4, 1] = 0.0
    assert f.isfinite().all()
    grad_x = node_terms_native.estimate_backward(torch.ones_like(f), x, u,
                                                 cos_weight, sin_weight)[0]
    assert grad_x[4, 1].isnan().all()
    grad_x[4, 1] = 0.0
    assert grad_x.isfinite().all()


@needs_build
def test_the_default_cpu_path_takes_the_c_kernels_in_float32_only():
    def resolved(x, slopes=2):
        return node_terms._resolve_node_path('eager', x, 10, slopes)

    assert resolved(torch.randn(3, 2, 8)) == 'native'
    assert resolved(torch.randn(3, 2, 8, dtype=torch.float64)) != 'native'
    assert resolved(torch.randn(3, 2, 65)) != 'native'  # more channels
    assert resolved(torch.randn(3, 2, 8), slopes=5) != 'native'
    assert node_terms._resolve_node_path('compile', torch.randn(3, 2, 8), 10,
                                         2) == 'compile'


@pytest.fixture
def fresh_loader(monkeypatch, tmp_path):
    r"""A loader with an empty cache folder and no library loaded yet."""
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path))
    native._load.cache_clear()
    yield tmp_path
    native._load.cache_clear()


def test_a_build_that_fails_warns_and_falls_back(fresh_loader, monkeypatch):
    monkeypatch.setattr(native, 'supported', lambda: True)
    monkeypatch.setenv('CC', str(fresh_loader / 'no-such-compiler'))
    with pytest.warns(RuntimeWarning, match='could not be built.*PyTorch'):
        assert native.load('node_terms_native') is None
    # The default path then runs the eager chunks, and says nothing more:
    x = torch.randn(4, 2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert not node_terms_native.applies(x, 2)
        assert node_terms._resolve_node_path('eager', x, 10, 2) == 'eager'


def test_an_unsupported_platform_falls_back_silently(fresh_loader,
                                                     monkeypatch):
    monkeypatch.setattr(native, 'supported', lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert native.load('node_terms_native') is None


def test_disabled_means_not_loaded(monkeypatch):
    monkeypatch.setattr(native, 'ENABLED', False)
    assert native.load('node_terms_native') is None


@needs_build
def test_builds_into_the_cache_once(fresh_loader):
    assert native.load('node_terms_native') is not None
    built = os.listdir(fresh_loader / 'native')
    assert len(built) == 1 and built[0].startswith('node_terms_native-')
    assert built[0].endswith('.so')  # no temporary file left behind
    stamp = os.stat(fresh_loader / 'native' / built[0]).st_mtime_ns
    native._load.cache_clear()  # a new process: loads, does not rebuild
    assert native.load('node_terms_native') is not None
    assert os.stat(fresh_loader / 'native' / built[0]).st_mtime_ns == stamp


def test_the_environment_switches_them_off():
    code = 'import ikgat.ops.native as n; print(n.ENABLED)'
    for value, expected in (('0', 'False'), ('1', 'True')):
        result = subprocess.run([sys.executable, '-c', code],
                                capture_output=True, text=True, check=True,
                                env={**os.environ, 'IKGAT_NATIVE': value})
        assert result.stdout.strip() == expected


@needs_build
@pytest.mark.parametrize('channels', [8, 16, 32, 64])
def test_the_sizes_compiled_apart_equal_the_eager_chunks(channels):
    # T = 2 with these C runs code compiled with C and T as constants.
    generator = torch.Generator().manual_seed(channels)
    x = 0.3 * torch.randn(21, 2, channels, generator=generator)
    u = 0.3 * torch.randn(2, 6, channels, generator=generator)
    cos_weight, sin_weight = torch.randn(2, 2, 2, 6, generator=generator)
    grad = torch.randn(21, 2, 2, generator=generator)
    assert_equals_the_chunks(x, u, cos_weight, sin_weight, grad, tol=1e-5)


@needs_build
def test_feature_tables_equal_the_eager_functions_on_random_shapes():
    # IKTransformerConv's tables phi = [sum_s cos; sum_s sin] and their
    # backward pass, against ikgat.ops.compiled_features' functions run
    # eagerly; float32 rows of shared points take them in NodeSide.
    from ikgat.ops.compiled_features import features, features_backward
    from ikgat.ops.edge_fourier_tables import NodeSide, Points
    generator = torch.Generator().manual_seed(4)

    def size(low, high):
        return int(torch.randint(low, high + 1, (), generator=generator))

    for case in range(20):
        rows, heads, channels = size(0, 40), size(1, 4), size(1, 12)
        sets, points = size(1, 3), size(1, 20)
        if case == 0:  # a size compiled apart, rows beyond a span
            rows, heads, channels, sets, points = 700, 2, 8, 2, 16
        x = 0.7 * torch.randn(rows, heads, channels, generator=generator)
        matrix = 0.7 * torch.randn(heads, channels, sets * points,
                                   generator=generator)
        table = node_terms_native.features(x, matrix, points)
        torch.testing.assert_close(table, features(x, matrix, points),
                                   atol=1e-5, rtol=1e-5)
        grad = torch.randn(table.shape, generator=generator)
        for value, target in zip(
                node_terms_native.features_backward(grad, x, matrix, points),
                features_backward(grad, x, matrix, points)):
            scale = max(float(target.abs().max()), 1.0)
            torch.testing.assert_close(value / scale, target / scale,
                                       atol=1e-5, rtol=1e-5)
    stacked = torch.randn(1, 2, 3, 5, 4)  # [G, m, H, R, C]
    side = NodeSide(torch.randn(6, 3, 4), Points(stacked, slice(0, 3)), None)
    assert side.native
    assert not NodeSide(torch.randn(6, 3, 4, dtype=torch.float64),
                        Points(stacked.double(), slice(0, 3)), None).native


@pytest.mark.slow  # a fresh interpreter that imports torch
@needs_build
def test_a_forked_child_makes_its_own_threads():
    # A child forked after the parent's threads shared a call has none of
    # them: without threads of its own its calls would wait for ever.
    code = '''
import os, torch
import ikgat.ops.node_terms_native as n
torch.set_num_threads(2)
args = (torch.randn(40, 4, 8), torch.randn(4, 6, 8), torch.randn(4, 2, 6),
        torch.randn(4, 2, 6))
first = n.estimate(*args)
pid = os.fork()
if pid == 0:
    os._exit(0 if torch.equal(n.estimate(*args), first) else 1)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
'''
    result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.strip() == '0', result.stderr[-500:]
