"""The implicit density's parametrisation, which keeps the evaluation
output of IKAN and MIKAN steady in any training loop (the class docstring's
"Training"; measured in ``benchmarks.eval_stability``): the graph summary
carries no gradient to the projections, the inference network's readout is
divided by its width, log sigma is read relative to the prior's, and a
state dict of ikgat 0.1 loads as the same function."""
import math

import pytest
import torch

from ikgat.kernels import ImplicitSpectralKernel

H, C, R = 3, 4, 8


def kernel(copula=False):
    torch.manual_seed(0)
    module = ImplicitSpectralKernel(H, C, num_spectral_points=R,
                                    copula=copula).double()
    with torch.no_grad():  # a density that depends on the summary
        module.encoder_readout.weight.normal_(
            0, 0.3 * module.encoder_readout.in_features)
        module.encoder_readout.bias.normal_(0, 0.1)
    return module


def test_the_summary_carries_no_gradient_to_the_projections():
    module = kernel()
    x = torch.randn(6, H, C, dtype=torch.double, requires_grad=True)
    draws = module.draw(x, x, sample=True)
    points, = torch.autograd.grad(draws.points.square().sum(), x, allow_unused=True)
    assert points is None
    # ... while the density's own parameters get one:
    weight, = torch.autograd.grad(
        module.draw(x, x, sample=True).points.square().sum(),
        module.encoder_readout.weight)
    assert weight.abs().sum() > 0


def test_a_zero_readout_is_the_prior_scale_and_the_head_means():
    # Weight decay pulls the readout to zero: there sigma is the prior's
    # (the KL's optimum), not 1, and mu the head means.
    module = kernel()
    with torch.no_grad():
        module.encoder_readout.weight.zero_()
        module.encoder_readout.bias.zero_()
    draws = module.draw(torch.randn(5, H, C, dtype=torch.double))
    torch.testing.assert_close(draws.log_std.exp(),
                               torch.full_like(draws.log_std,
                                               module.prior_scale))
    torch.testing.assert_close(draws.mean[0], module.head_mean)


def test_the_readout_is_divided_by_its_width():
    module = kernel()
    x = torch.randn(5, H, C, dtype=torch.double)
    before = module.draw(x)
    with torch.no_grad():
        module.encoder_readout.weight.add_(1.0)  # one Adam-sized step
    after = module.draw(x)
    # The readout's input is an ELU of unit-scale units: one unit step of
    # every weight moves mu by about one unit, not by the width (64).
    moved = (after.mean - before.mean).abs().max()
    assert 0.05 < moved < 3.0


def test_a_freshly_built_density_is_the_prior_scale():
    module = ImplicitSpectralKernel(H, C, num_spectral_points=R)
    draws = module.draw(torch.randn(5, H, C))
    torch.testing.assert_close(draws.log_std.exp().mean(),
                               torch.tensor(module.prior_scale),
                               atol=1e-2, rtol=0)


@pytest.mark.parametrize('copula', [False, True])
def test_a_state_dict_of_ikgat_0_1_loads_as_the_same_function(copula):
    new = kernel(copula)
    x = torch.randn(7, H, C, dtype=torch.double)
    expected = new.draw(x)
    state = new.state_dict()
    # ikgat 0.1 read out V h + b under the name encoder_out, b holding
    # log sigma itself:
    weight = state.pop('encoder_readout.weight')
    bias = state.pop('encoder_readout.bias').clone()
    bias[bias.numel() // 2:] += math.log(new.prior_scale)
    state['encoder_out.weight'] = weight / weight.size(1)
    state['encoder_out.bias'] = bias
    old = ImplicitSpectralKernel(H, C, num_spectral_points=R,
                                 copula=copula).double()
    old.load_state_dict(state)
    loaded = old.draw(x)
    torch.testing.assert_close(loaded.mean, expected.mean)
    torch.testing.assert_close(loaded.log_std, expected.log_std)
    torch.testing.assert_close(loaded.points, expected.points)


@pytest.mark.parametrize('pairing', ['anchor', 'vectors'])
def test_the_distinct_half_gives_the_estimate_of_all_points(pairing):
    # w and -w add the same term: the similarities evaluate R/2 points,
    # and equal (values and gradients) the estimate over all R.
    from ikgat.kernels.random_features import (
        fourier_estimate,
        fourier_log_similarities,
    )
    torch.manual_seed(1)
    module = ImplicitSpectralKernel(H, C, num_spectral_points=R,
                                    pairing=pairing).double()
    x = torch.randn(6, H, C, dtype=torch.double, requires_grad=True)
    y = torch.randn(6, H, C, dtype=torch.double, requires_grad=True)
    draws = module.draw(x, y, sample=True)
    for points in draws.spectral_points():  # [w, -w], w the half held
        assert torch.equal(points[..., R // 2:, :], -points[..., :R // 2, :])
    assert draws.mirrored and draws.points.size(-2) == R // 2
    if pairing == 'vectors':
        fast = module.similarity(x, y, draws=draws)
        full = fourier_estimate(
            x, y, [w[0] for w in draws.spectral_points()])**2
    else:
        anchor = torch.randn(H, 2 * C, dtype=torch.double)
        slopes = torch.tensor([1.0, 0.2], dtype=torch.double)
        fast = torch.stack(module.node_log_similarities(
            x, y, anchor, slopes, False, draws=draws))
        full = torch.stack(fourier_log_similarities(
            x, y, anchor, slopes,
            torch.stack(draws.spectral_points(), 1).squeeze(0),
            module.eps))
    weights = torch.randn_like(full)
    grads = torch.autograd.grad((fast * weights).sum(),
                                (x, y, module.head_mean), retain_graph=True)
    expected = torch.autograd.grad((full * weights).sum(),
                                   (x, y, module.head_mean))
    torch.testing.assert_close(fast, full)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)
