r"""IKAN's symmetric spectral points from a latent sample, with a
hand-written backward pass.

The implicit density (:class:`~ikgat.kernels.ImplicitSpectralKernel`) turns
a latent sample :math:`\tilde z` into spectral points through the
element-wise map

.. math::
    s(z) = \operatorname{sign}(z)\, g(|z|), \qquad
    g(t) = \mathrm{softplus}(\rho)\, t + v^\top \tanh(t\, u + b) + c,

with :math:`u, b, v \in \mathbb{R}^K` (a :math:`1 \to K \to 1` MLP) and the
sample made symmetric, :math:`w = [s(\tilde z) \,\|\, -s(\tilde z)]`.  By
autograd its backward pass is a chain of small operations (those of the
MLP's two linear maps with their broadcasts, of the sign, the absolute value
and the concatenation), each a kernel launch on a GPU; written out below, it
is one product per parameter and a few element-wise operations.

**Backward.**  With :math:`t = |z|`, :math:`h = \tanh(t u + b)`, the
incoming gradient :math:`G = \partial L / \partial w` split into its halves
:math:`G = [G^+ \| G^-]`, and :math:`\Gamma = G^+ - G^-` (the gradient of
:math:`s(\tilde z)`), let :math:`\gamma = \Gamma \operatorname{sign}(z)` be
the gradient of :math:`g` and :math:`P = (\gamma\, v^\top) \odot (1 - h^2)`
that of the MLP's pre-activation.  Then

.. math::
    \frac{\partial L}{\partial z} = \operatorname{sign}(z)
    \left(\mathrm{softplus}(\rho)\, \gamma + P u\right), \quad
    \frac{\partial L}{\partial u} = P^\top t, \quad
    \frac{\partial L}{\partial b} = P^\top \mathbf{1}, \quad
    \frac{\partial L}{\partial v} = h^\top \gamma, \quad
    \frac{\partial L}{\partial c} = \mathbf{1}^\top \gamma, \quad
    \frac{\partial L}{\partial \rho} = \sigma(\rho)\, \gamma^\top t,

summed over all elements (:math:`\sigma` the logistic function, the
derivative of softplus).  At :math:`z = 0` the gradient is zero, as
autograd gives it (:math:`\operatorname{sign}'(0) = 0`).  The backward pass
is itself differentiable (it recomputes :math:`h` from the inputs when a
double backward records it).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor


def symmetric_spectral_points(latent: Tensor, dim: Optional[int],
                              weight_in: Tensor, bias_in: Tensor,
                              weight_out: Tensor, bias_out: Tensor,
                              raw_scale: Tensor) -> Tensor:
    r"""Return :math:`w = [s(\tilde z) \,\|\, -s(\tilde z)]` along
    :obj:`dim` (see the module docstring), or :math:`s(\tilde z)` alone,
    the distinct half, for :obj:`dim` :obj:`None` (:math:`G^- = 0` in the
    backward pass).

    Args:
        latent (torch.Tensor): :math:`\tilde z`, any shape.
        dim (int, optional): The dimension along which :math:`s(\tilde z)`
            and :math:`-s(\tilde z)` are concatenated, or :obj:`None`.
        weight_in (torch.Tensor): :math:`u`, shape :math:`(K,)`.
        bias_in (torch.Tensor): :math:`b`, shape :math:`(K,)`.
        weight_out (torch.Tensor): :math:`v`, shape :math:`(K,)`.
        bias_out (torch.Tensor): :math:`c`, shape :math:`(1,)`.
        raw_scale (torch.Tensor): :math:`\rho`, a scalar.
    """
    return _SymmetricSpectralPoints.apply(latent, dim, weight_in, bias_in,
                                          weight_out, bias_out, raw_scale)


def _hidden(magnitude: Tensor, weight_in: Tensor, bias_in: Tensor) -> Tensor:
    r""":math:`h = \tanh(t u + b)`, shape :math:`(M, K)` for :math:`M`
    elements."""
    return torch.tanh(torch.addcmul(bias_in, magnitude.reshape(-1, 1),
                                    weight_in))


class _SymmetricSpectralPoints(torch.autograd.Function):
    @staticmethod
    def forward(ctx, latent: Tensor, dim: int, weight_in: Tensor,
                bias_in: Tensor, weight_out: Tensor, bias_out: Tensor,
                raw_scale: Tensor) -> Tensor:
        sign = latent.sign()
        magnitude = latent.abs()
        hidden = _hidden(magnitude, weight_in, bias_in)
        mlp = torch.addmv(bias_out.expand(hidden.size(0)), hidden,
                          weight_out).view(latent.shape)
        points = sign * torch.addcmul(mlp, F.softplus(raw_scale), magnitude)
        ctx.save_for_backward(latent, hidden, weight_in, bias_in,
                              weight_out, raw_scale)
        ctx.dim = dim
        if dim is None:
            return points
        return torch.cat([points, -points], dim=dim)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tuple[Optional[Tensor], ...]:
        (latent, hidden, weight_in, bias_in, weight_out,
         raw_scale) = ctx.saved_tensors
        (need_latent, _, need_weight_in, need_bias_in, need_weight_out,
         need_bias_out, need_raw_scale) = ctx.needs_input_grad
        sign = latent.sign()
        if ctx.dim is None:
            grad_g = (grad * sign).reshape(-1)  # gamma
        else:
            positive, negative = grad.chunk(2, dim=ctx.dim)
            grad_g = ((positive - negative) * sign).reshape(-1)
        magnitude = latent.abs().reshape(-1)
        if torch.is_grad_enabled():
            # A double backward (create_graph=True): h again from the
            # inputs, so that autograd follows every term of this pass.
            hidden = _hidden(magnitude, weight_in, bias_in)
        grad_pre = torch.ops.aten.tanh_backward(
            torch.outer(grad_g, weight_out), hidden)  # P
        scale = F.softplus(raw_scale)
        grad_latent = grad_weight_in = grad_bias_in = None
        grad_weight_out = grad_bias_out = grad_raw_scale = None
        if need_latent:
            grad_latent = sign * torch.addmv(grad_g * scale, grad_pre,
                                             weight_in).view(latent.shape)
        if need_weight_in:
            grad_weight_in = grad_pre.t() @ magnitude
        if need_bias_in:
            grad_bias_in = grad_pre.sum(0)
        if need_weight_out:
            grad_weight_out = hidden.t() @ grad_g
        if need_bias_out:
            grad_bias_out = grad_g.sum(0, keepdim=True)
        if need_raw_scale:
            grad_raw_scale = torch.sigmoid(raw_scale) * torch.dot(grad_g,
                                                                  magnitude)
        return (grad_latent, None, grad_weight_in, grad_bias_in,
                grad_weight_out, grad_bias_out, grad_raw_scale)
