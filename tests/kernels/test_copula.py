"""MIKAN's copula: the factor is a row-normalised lower triangle, and the
correlated noise with its hand-written backward equals autograd's."""
import pytest
import torch

from ikgat.kernels.copula import cholesky_factor, correlated_noise


def test_factor_has_unit_rows_and_a_positive_diagonal():
    raw = torch.randn(5, 5, dtype=torch.float64)
    factor = cholesky_factor(raw)
    assert torch.equal(factor, factor.tril())
    assert (factor.diagonal() > 0).all()
    torch.testing.assert_close((factor @ factor.t()).diagonal(),
                               torch.ones(5, dtype=torch.float64))
    # Only the strict lower triangle counts; A = 0 is the identity:
    torch.testing.assert_close(cholesky_factor(raw.tril(-1)), factor)
    assert torch.equal(cholesky_factor(torch.zeros(3, 3)), torch.eye(3))


@pytest.mark.parametrize('shape', [(4, 7), (4, 2, 3), (1, 5), (3, 0)])
def test_noise_and_gradient_equal_autograd(shape):
    heads = shape[0]
    raw = torch.randn(heads, heads, dtype=torch.float64, requires_grad=True)
    noise = torch.randn(*shape, dtype=torch.float64)
    out = correlated_noise(raw, noise)
    expected = (cholesky_factor(raw) @ noise.reshape(heads, -1)).view(shape)
    torch.testing.assert_close(out, expected)
    upstream = torch.randn(shape, dtype=torch.float64)
    (grad, ) = torch.autograd.grad((out * upstream).sum(), [raw])
    (expected_grad, ) = torch.autograd.grad((expected * upstream).sum(),
                                            [raw])
    torch.testing.assert_close(grad, expected_grad)
    assert torch.equal(grad, grad.tril(-1))  # the rest is not used


@pytest.mark.parametrize('check', [torch.autograd.gradcheck,
                                   torch.autograd.gradgradcheck])
def test_gradcheck(check):
    raw = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    noise = torch.randn(4, 3, 2, dtype=torch.float64)
    assert check(lambda a: correlated_noise(a, noise), (raw, ))


def test_noise_without_gradient():
    raw = torch.randn(3, 3)
    noise = torch.randn(3, 4)
    out = correlated_noise(raw, noise)
    assert not out.requires_grad
    torch.testing.assert_close(out, cholesky_factor(raw) @ noise)

