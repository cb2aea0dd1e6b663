import math

import pytest
import torch

from ikgat.kernels import (
    KERNELS,
    RandomFourierKernel,
    RBFKernel,
    resolve_kernel,
)
from ikgat.kernels.anchor import pad_node_vectors
from tests.helpers import reference_log_similarity, reference_similarity

H, C = 3, 4
KERNEL_NAMES = sorted(KERNELS)


def make(name, dtype=torch.float, **kwargs):
    """A kernel ready to evaluate: variational kernels draw their spectral
    points from a random graph summary first."""
    torch.manual_seed(0)
    kernel = resolve_kernel(name, H, C, 16, kwargs or None).to(dtype)
    if kernel.stochastic:
        nodes = torch.randn(5, H, C, dtype=dtype)
        kernel.draw(nodes, nodes)  # kept as kernel.last_draws
    return kernel


@pytest.mark.parametrize('name', KERNEL_NAMES)
def test_similarity_matches_documented_formula(name):
    kernel = make(name, torch.double)
    x = torch.randn(7, H, 2 * C, dtype=torch.double)
    y = torch.randn(7, H, 2 * C, dtype=torch.double)
    expected = reference_similarity(kernel, x, y)
    assert torch.allclose(kernel.similarity(x, y), expected, atol=1e-12)
    assert (kernel.similarity(x, y) >= 0).all()


@pytest.mark.parametrize('name', KERNEL_NAMES)
@pytest.mark.parametrize('side', [0, 1])
def test_node_wise_log_similarity_equals_pairwise(name, side):
    kernel = make(name, torch.double)
    x = torch.randn(9, H, C, dtype=torch.double)
    anchor = torch.randn(H, 2 * C, dtype=torch.double)
    slopes = torch.tensor([1.0, 0.2], dtype=torch.double)
    fast = kernel.log_similarity(x, anchor, side, slopes)
    assert fast.shape == (9, H, 2)
    vectors = pad_node_vectors(x, side)  # [N, H, 2C]
    for t, slope in enumerate(slopes):
        expected = reference_log_similarity(kernel, vectors, slope * anchor)
        assert torch.allclose(fast[..., t], expected, atol=1e-10), t


@pytest.mark.parametrize('name', KERNEL_NAMES)
def test_kernels_are_non_negative_on_large_inputs(name):
    kernel = make(name)
    x = 1e3 * torch.randn(64, H, 2 * C)
    y = 1e3 * torch.randn(64, H, 2 * C)
    value = kernel.similarity(x, y)
    assert (value >= 0).all()
    log_value = kernel.log_similarity(1e3 * torch.randn(64, H, C),
                                      torch.randn(H, 2 * C), 1,
                                      torch.tensor([1.0, 0.2]))
    assert not torch.isnan(log_value).any()


def test_rff_estimate_is_unbiased_and_converges_to_rbf():
    # f = mean_r cos(w_r^T d) with w ~ N(0, I/(2 l^2)) has mean
    # exp(-|d|^2 / (4 l^2)) and variance O(1/R), so sim = f^2 -> RBF_l.
    lengthscale = 1.5
    generator = torch.Generator().manual_seed(1)
    x = 0.6 * torch.randn(200, 1, 2 * C, generator=generator)
    y = 0.6 * torch.randn(200, 1, 2 * C, generator=generator)
    exact = RBFKernel(1, C, lengthscale=lengthscale).similarity(x, y)
    errors = {}
    for num_features in (16, 64, 256, 1024, 4096):
        kernel = RandomFourierKernel(1, C, num_spectral_points=num_features,
                                     lengthscale=lengthscale)
        trial_errors = []
        for seed in range(5):
            kernel.redraw_spectral_points(torch.Generator().manual_seed(seed))
            trial_errors.append((kernel.similarity(x, y) - exact).abs())
        errors[num_features] = torch.stack(trial_errors).mean().item()
    # Mean absolute error falls roughly like 1/sqrt(R): x16 points, /4 error.
    assert errors[4096] < 0.01, errors
    assert errors[256] < errors[16] / 2.5, errors
    assert errors[4096] < errors[256] / 2.5, errors
    # Bias of the estimate f itself: mean over many draws is close to the
    # exact characteristic function exp(-|d|^2 / (4 l^2)).
    kernel = RandomFourierKernel(1, C, num_spectral_points=64,
                                 lengthscale=lengthscale)
    d = (x - y)[:5]
    estimates = []
    for seed in range(400):
        kernel.redraw_spectral_points(torch.Generator().manual_seed(seed))
        (w, ) = kernel.spectral_point_sets
        estimates.append(((d.unsqueeze(-2) * w).sum(-1)).cos().mean(-1))
    mean = torch.stack(estimates).mean(0)
    target = torch.exp(-(d * d).sum(-1) / (4 * lengthscale**2))
    assert (mean - target).abs().max() < 0.02


def test_spectral_points_are_gaussian_with_the_documented_variance():
    kernel = RandomFourierKernel(4, 8, num_spectral_points=512,
                                 lengthscale=2.0)
    (w, ) = kernel.spectral_point_sets
    assert w.shape == (4, 512, 16)
    assert abs(w.mean().item()) < 0.01
    assert abs(w.var().item() - 1 / (2 * 2.0**2)) < 0.01


def test_redraw_is_reproducible_and_changes_points():
    kernel = make('rff')
    before = kernel.spectral_points.clone()
    kernel.redraw_spectral_points(torch.Generator().manual_seed(3))
    first = kernel.spectral_points.clone()
    kernel.redraw_spectral_points(torch.Generator().manual_seed(3))
    assert torch.equal(first, kernel.spectral_points)
    assert not torch.equal(before, first)


def test_spectral_points_live_in_the_state_dict():
    assert set(make('rff').state_dict()) == {'spectral_points'}
    assert set(make('rff_ns').state_dict()) == {
        'spectral_points_1', 'spectral_points_2'
    }
    direct = make('direct')
    assert {n for n, _ in direct.named_parameters()} == {
        'spectral_points_1', 'spectral_points_2'
    }
    assert not list(make('rff_ns').parameters())


@pytest.mark.parametrize('name, kwargs, match', [
    ('rbf', {'lengthscale': 0.0}, 'lengthscale'),
    ('rbf', {'lengthscale': -1.0}, 'lengthscale'),
    ('rff', {'num_spectral_points': 0}, 'num_spectral_points'),
    ('rff', {'eps': -1.0}, 'eps'),
    ('poly', {'degree': 3}, 'degree'),
    ('poly', {'offset': -1.0}, 'offset'),
    ('expsin', {'period': 0.0}, 'period'),
    ('exp', {'scale': float('nan')}, 'scale'),
])
def test_bad_kernel_options_are_named(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make(name, **kwargs)


def test_resolve_kernel_errors():
    with pytest.raises(ValueError, match="'gaussian'"):
        resolve_kernel('gaussian', H, C, 16)
    with pytest.raises(TypeError, match='bogus'):
        resolve_kernel('rbf', H, C, 16, {'bogus': 1})
    with pytest.raises(ValueError, match='heads=3'):
        resolve_kernel(RBFKernel(3, C), 2, C, 16)
    with pytest.raises(TypeError, match='int'):
        resolve_kernel(3, H, C, 16)
    kernel = RBFKernel(H, C)
    assert resolve_kernel(kernel, H, C, 16) is kernel
    assert math.isclose(resolve_kernel('rbf', H, C, 16, {
        'lengthscale': 2.0
    }).lengthscale, 2.0)
