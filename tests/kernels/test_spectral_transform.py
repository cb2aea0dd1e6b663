"""IKAN's symmetric spectral points with a hand-written backward pass equal
their autograd composition, sign(z) g(|z|) and its negation."""
import pytest
import torch

from ikgat.kernels.implicit import ImplicitSpectralKernel
from ikgat.kernels.spectral_transform import symmetric_spectral_points


def parameters(kernel, dtype=torch.float64):
    r"""(u, b, v, c, rho) of the kernel's g, as leaf tensors of ``dtype``,
    moved away from their initial values so that every term counts."""
    generator = torch.Generator().manual_seed(1)
    tensors = [kernel.transform_hidden.weight.view(-1),
               kernel.transform_hidden.bias,
               kernel.transform_out.weight.view(-1),
               kernel.transform_out.bias, kernel.raw_transform_scale]
    return [(tensor.detach().to(dtype) + 0.3 * torch.randn(
        tensor.shape, generator=generator, dtype=dtype)).requires_grad_()
        for tensor in tensors]


def reference(latent, dim, weight_in, bias_in, weight_out, bias_out,
              raw_scale):
    magnitude = latent.abs().unsqueeze(-1)
    hidden = torch.tanh(magnitude * weight_in + bias_in)
    g = (torch.nn.functional.softplus(raw_scale) * magnitude.squeeze(-1) +
         hidden @ weight_out + bias_out)
    points = latent.sign() * g
    return torch.cat([points, -points], dim=dim)


@pytest.mark.parametrize('shape,dim', [((2, 3, 2, 4, 6), 3), ((5, ), 0),
                                       ((3, 4), 1), ((1, 2, 2, 0, 4), 3)])
def test_values_and_gradients_equal_autograd(shape, dim):
    kernel = ImplicitSpectralKernel(2, 3, num_spectral_points=4)
    params = parameters(kernel)
    latent = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    out = symmetric_spectral_points(latent, dim, *params)
    expected = reference(latent, dim, *params)
    torch.testing.assert_close(out, expected)
    weight = torch.randn(out.shape, dtype=torch.float64)
    grads = torch.autograd.grad((out * weight).sum(), [latent] + params)
    expected_grads = torch.autograd.grad((expected * weight).sum(),
                                         [latent] + params)
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)


@pytest.mark.parametrize('check', [torch.autograd.gradcheck,
                                   torch.autograd.gradgradcheck])
def test_gradcheck(check):
    # gradgradcheck too: the plain node path supports a double backward.
    kernel = ImplicitSpectralKernel(2, 3, num_spectral_points=4)
    latent = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    assert check(lambda z, *params: symmetric_spectral_points(z, 1, *params),
                 (latent, *parameters(kernel)))


def test_only_the_gradients_asked_for():
    kernel = ImplicitSpectralKernel(2, 3, num_spectral_points=4)
    params = [tensor.detach() for tensor in parameters(kernel)]
    latent = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    out = symmetric_spectral_points(latent, 1, *params)
    (grad, ) = torch.autograd.grad(out.square().sum(), [latent])
    expected = reference(latent, 1, *params)
    (expected_grad, ) = torch.autograd.grad(expected.square().sum(),
                                            [latent])
    torch.testing.assert_close(grad, expected_grad)


def test_the_kernel_transform_is_g():
    # The kernel's transform (g on magnitudes, for plots) is the map used
    # for the spectral points: w = g(t) for a positive latent t.
    kernel = ImplicitSpectralKernel(2, 3, num_spectral_points=4).double()
    latent = torch.rand(10, dtype=torch.float64) + 0.1
    dtype = latent.dtype
    points = symmetric_spectral_points(
        latent, 0, kernel.transform_hidden.weight.view(-1).to(dtype),
        kernel.transform_hidden.bias, kernel.transform_out.weight.view(-1),
        kernel.transform_out.bias, kernel.raw_transform_scale)
    torch.testing.assert_close(points[:10], kernel.transform(latent))
    torch.testing.assert_close(points[10:], -kernel.transform(latent))

