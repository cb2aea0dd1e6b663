"""KEPGATConv's SVGP pair sample: values and gradients of the hand-written
function equal autograd through the formula, gradcheck and gradgradcheck."""
import pytest
import torch

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
