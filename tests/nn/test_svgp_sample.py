"""KEPGATConv's SVGP pair sample: values and gradients of the hand-written
function and of its C kernels equal autograd through the formula, gradcheck
and gradgradcheck."""
import pytest
import torch

import ikgat.ops.native as native
import ikgat.ops.svgp_sample_native as svgp_sample_native
from ikgat.nn.svgp_sample import scale_tril, svgp_pair_sample

H, S, C = 3, 4, 5  # heads, rank, channels


def parameters(seed=0, requires_grad=True):
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape, scale=0.5):
        return (scale * torch.randn(*shape, generator=generator,
                                    dtype=torch.float64)
                ).requires_grad_(requires_grad)

    return (draw(H, S), draw(2, H, S, C, scale=1.0), draw(2, H, C, S, S),
            draw(2, H, C, S))


def reference(scores, log_singular_values, mean, offdiag, log_diag, noise):
    """The formula by autograd: einsums and norms per branch."""
    inverse = (-log_singular_values).exp()
    lower = torch.tril(offdiag, -1) + torch.diag_embed(log_diag.exp())
    samples = []
    for branch, score in enumerate(scores):
        v = score * inverse
        sample = torch.einsum('nhs,hsc->nhc', v, mean[branch])
        if noise is not None:
            spread = torch.einsum('nha,hdab->nhdb', v, lower[branch])
            sample = sample + spread.square().sum(-1).sqrt() * noise[branch]
        samples.append(sample)
    return samples


def scores_and_noise(num_dst, num_src, seed=1):
    generator = torch.Generator().manual_seed(seed)
    scores = tuple(
        torch.randn(n, H, S, generator=generator,
                    dtype=torch.float64).requires_grad_()
        for n in (num_dst, num_src))
    noise = tuple(torch.randn(n, H, C, generator=generator,
                              dtype=torch.float64) for n in (num_dst, num_src))
    return scores, noise


def test_scale_tril():
    offdiag, log_diag = parameters()[2:]
    lower = scale_tril(offdiag, log_diag)
    torch.testing.assert_close(
        lower, torch.tril(offdiag, -1) + torch.diag_embed(log_diag.exp()))


@pytest.mark.parametrize('with_noise', [True, False])
@pytest.mark.parametrize('sizes', [(7, 7), (6, 9), (0, 4), (5, 0)])
def test_values_and_gradients_equal_autograd(with_noise, sizes):
    params = parameters()
    scores, noise = scores_and_noise(*sizes)
    noise = noise if with_noise else None
    samples = svgp_pair_sample(scores, *params, noise=noise)
    expected = reference(scores, *params, noise)
    for sample, target in zip(samples, expected):
        assert sample.shape == target.shape
        torch.testing.assert_close(sample, target)
    upstream = [torch.randn_like(target) for target in expected]
    inputs = list(scores) + list(params if with_noise else params[:2])
    grads = torch.autograd.grad(
        sum((s * u).sum() for s, u in zip(samples, upstream)), inputs,
        allow_unused=True)
    expected_grads = torch.autograd.grad(
        sum((t * u).sum() for t, u in zip(expected, upstream)), inputs,
        allow_unused=True)
    for grad, target in zip(grads, expected_grads):
        torch.testing.assert_close(grad, target)


def test_zero_scores_give_finite_gradients():
    # |L^T v| = 0 at v = 0: the gradient of the norm is taken as zero there.
    params = parameters()
    scores, noise = scores_and_noise(4, 3)
    scores = tuple(torch.zeros_like(s).requires_grad_() for s in scores)
    samples = svgp_pair_sample(scores, *params, noise=noise)
    grads = torch.autograd.grad(sum(s.sum() for s in samples),
                                list(scores) + list(params))
    assert all(torch.isfinite(grad).all() for grad in grads)
    assert all(torch.equal(s, torch.zeros_like(s)) for s in samples)


@pytest.mark.parametrize('with_noise', [True, False])
@pytest.mark.parametrize('check', [
    torch.autograd.gradcheck,
    pytest.param(torch.autograd.gradgradcheck, marks=pytest.mark.slow)])
def test_gradcheck(check, with_noise):
    params = parameters(seed=2)
    scores, noise = scores_and_noise(3, 4, seed=3)
    if not with_noise:  # the means: no scale parameters
        noise, params = None, params[:2]

    def function(*inputs):
        extra = (None, None) if noise is None else ()
        return svgp_pair_sample(inputs[:2], *inputs[2:], *extra, noise=noise)

    assert check(function, scores + params)


def test_without_gradients():
    params = parameters(requires_grad=False)
    scores, noise = scores_and_noise(3, 2)
    scores = tuple(s.detach() for s in scores)
    samples = svgp_pair_sample(scores, *params, noise=noise)
    assert not any(s.requires_grad for s in samples)
    for sample, target in zip(samples, reference(scores, *params, noise)):
        torch.testing.assert_close(sample, target)


@pytest.mark.parametrize('with_noise', [True, False])
def test_node_chunks_give_the_same_values_and_gradients(monkeypatch,
                                                        with_noise):
    # Chunks of 2 and 3 nodes (the last one shorter) against the reference.
    import ikgat.nn.svgp_sample as svgp_sample
    params = parameters(seed=4)
    scores, noise = scores_and_noise(7, 8, seed=5)
    noise = noise if with_noise else None
    width = C + C * S if with_noise else C
    expected = reference(scores, *params, noise)
    upstream = [torch.randn_like(target) for target in expected]
    inputs = list(scores) + list(params if with_noise else params[:2])
    expected_grads = torch.autograd.grad(
        sum((t * u).sum() for t, u in zip(expected, upstream)), inputs,
        allow_unused=True)
    for nodes in (2, 3):
        monkeypatch.setattr(svgp_sample, 'CHUNK_ELEMENTS', nodes * H * width)
        chunks = svgp_sample._node_chunks(scores[1], width)
        assert len(chunks) == -(-8 // nodes)
        samples = svgp_pair_sample(scores, *params, noise=noise)
        for sample, target in zip(samples, expected):
            torch.testing.assert_close(sample, target)
        grads = torch.autograd.grad(
            sum((s * u).sum() for s, u in zip(samples, upstream)), inputs,
            allow_unused=True)
        for grad, target in zip(grads, expected_grads):
            torch.testing.assert_close(grad, target)


# The C kernels (ikgat.ops.svgp_sample_native) take float32 on CPU: the same
# values and gradients as the float64 formula on random shapes, whatever the
# threads, with zero spreads as in the PyTorch path.
needs_build = pytest.mark.skipif(
    not native.load('svgp_sample_native'),
    reason='no C kernels here (not Linux x86-64, or no compiler)')


def float32_case(seed, num_dst, num_src, heads, rank, channels):
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape, scale=0.5):
        return scale * torch.randn(*shape, generator=generator,
                                   dtype=torch.float64)

    params = (draw(heads, rank), draw(2, heads, rank, channels, scale=1.0),
              draw(2, heads, channels, rank, rank),
              draw(2, heads, channels, rank))
    scores = (draw(num_dst, heads, rank, scale=1.0),
              draw(num_src, heads, rank, scale=1.0))
    # Both branches' noise side by side, as the layer draws it (strided):
    noise = draw(max(num_dst, num_src), 2, heads, channels, scale=1.0)
    noise = (noise[:num_dst, 0], noise[:num_src, 1])
    return scores, params, noise


def sample_and_gradients(scores, params, noise, upstream):
    inputs = [t.detach().requires_grad_() for t in (*scores, *params)]
    samples = svgp_pair_sample(inputs[:2], *inputs[2:], noise=noise)
    grads = torch.autograd.grad(
        sum((s * u).sum() for s, u in zip(samples, upstream)), inputs)
    return [s.detach() for s in samples], list(grads)


@needs_build
@pytest.mark.parametrize('shape', [(40, 40, 8, 8, 8), (23, 37, 3, 4, 5),
                                   (0, 9, 2, 3, 3), (17, 1, 1, 1, 2),
                                   (19, 19, 2, 8, 8)])
def test_c_kernels_equal_the_formula(monkeypatch, shape):
    scores, params, noise = float32_case(6, *shape)
    expected = reference([s.requires_grad_() for s in scores], *params,
                         noise)
    upstream = [torch.randn_like(t) for t in expected]
    expected_grads = torch.autograd.grad(
        sum((t * u).sum() for t, u in zip(expected, upstream)),
        list(scores))
    calls = []
    real = svgp_sample_native.sample
    monkeypatch.setattr(svgp_sample_native, 'sample',
                        lambda *a: calls.append(1) or real(*a))

    def single(tensors):
        return [t.float() for t in tensors]

    samples, grads = sample_and_gradients(
        single(scores), single(params), single(noise), single(upstream))
    assert len(calls) == 2  # each branch through the C kernels
    for sample, target in zip(samples, expected):
        torch.testing.assert_close(sample, target.float(), atol=1e-5,
                                   rtol=1e-4)
    for grad, target in zip(grads, expected_grads):
        torch.testing.assert_close(grad, target.float(), atol=1e-5,
                                   rtol=1e-4)
    # The parameters' gradients as the PyTorch path's in float32:
    monkeypatch.setattr(svgp_sample_native, 'applies', lambda *a: False)
    _, torch_grads = sample_and_gradients(
        single(scores), single(params), single(noise), single(upstream))
    for grad, target in zip(grads[2:], torch_grads[2:]):
        torch.testing.assert_close(grad, target, atol=1e-4, rtol=1e-4)


@needs_build
def test_c_kernels_threads_and_zero_spreads():
    scores, params, noise = float32_case(7, 30, 30, 5, 8, 8)
    scores = [s.float() for s in scores]
    scores[0][3] = 0.0  # a node whose spreads are all zero
    params, noise = [p.float() for p in params], [n.float() for n in noise]
    upstream = [torch.ones(30, 5, 8), torch.ones(30, 5, 8)]
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 3):
            torch.set_num_threads(count)
            results.append(sample_and_gradients(scores, params, noise,
                                                upstream))
    finally:
        torch.set_num_threads(threads)
    (samples, grads), (samples_3, grads_3) = results
    for one, three in zip(samples + grads, samples_3 + grads_3):
        assert torch.equal(one, three)
    assert all(torch.isfinite(g).all() for g in grads)
    assert torch.equal(samples[0][3], torch.zeros(5, 8))
