r"""MIKAN's Gaussian copula across heads: the Cholesky factor of its
correlation, and the correlated noise with a hand-written backward pass.

The factor is the row-normalised lower triangle

.. math::
    \tilde L = I + \operatorname{tril}(A, -1), \qquad
    L_h = \tilde L_h / n_h, \quad n_h = \|\tilde L_h\|,

so that every row of :math:`L` has unit norm (the correlation
:math:`LL^\top` has a unit diagonal) and its diagonal is positive; it is
the identity at :math:`A = 0`.  The heads' noise is :math:`\eta = L
\epsilon` for :math:`\epsilon \sim \mathcal{N}(0, I)` of shape :math:`(H,
M)`.  By autograd the normalisation alone is a dozen small operations
backward, each a kernel launch on a GPU.

**Backward of** :math:`\eta = L\epsilon`.  With :math:`\Gamma = \partial
\mathcal{L} / \partial \eta` and :math:`B = \Gamma \epsilon^\top =
\partial \mathcal{L} / \partial L`, the normalisation gives, row by row,

.. math::
    \frac{\partial \mathcal{L}}{\partial \tilde L_h}
    = \frac{B_h - L_h\, (B_h \cdot L_h)}{n_h}, \qquad
    \frac{\partial \mathcal{L}}{\partial A}
    = \operatorname{tril}\left(\frac{\partial \mathcal{L}}{\partial \tilde
    L}, -1\right).

The backward pass is itself differentiable (it recomputes :math:`L` and
:math:`n` from :math:`A` when a double backward records it).
"""
from typing import Optional, Tuple

import torch
from torch import Tensor


def cholesky_factor(raw_correlation: Tensor) -> Tensor:
    r"""The factor :math:`L` :math:`(H, H)` from the raw parameter
    :math:`A` (only its strict lower triangle counts)."""
    return _factor(raw_correlation)[0]


def correlated_noise(raw_correlation: Tensor, noise: Tensor) -> Tensor:
    r""":math:`\eta = L \epsilon` for the noise :math:`\epsilon` of shape
    :math:`(H, *)`, correlated across its first dimension; differentiable
    with respect to :obj:`raw_correlation` (see the module docstring)."""
    return _CorrelatedNoise.apply(raw_correlation, noise)


def _factor(raw_correlation: Tensor) -> Tuple[Tensor, Tensor]:
    r""":math:`L` and the row norms :math:`n` :math:`(H, 1)` of
    :math:`\tilde L`."""
    lower = torch.tril(raw_correlation, diagonal=-1).fill_diagonal_(1.0)
    norm = lower.norm(dim=1, keepdim=True)
    return lower / norm, norm


class _CorrelatedNoise(torch.autograd.Function):
    @staticmethod
    def forward(ctx, raw_correlation: Tensor, noise: Tensor) -> Tensor:
        cholesky, norm = _factor(raw_correlation)
        flat = noise.reshape(noise.size(0), -1)
        ctx.save_for_backward(raw_correlation, cholesky, norm, flat)
        return (cholesky @ flat).view(noise.shape)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tuple[Optional[Tensor], None]:
        if not ctx.needs_input_grad[0]:
            return None, None
        raw_correlation, cholesky, norm, flat = ctx.saved_tensors
        if torch.is_grad_enabled():
            # A double backward (create_graph=True): L and n again from A,
            # so that autograd follows every term of this pass.
            cholesky, norm = _factor(raw_correlation)
        grad_cholesky = grad.reshape(flat.shape) @ flat.t()  # B
        inner = (grad_cholesky * cholesky).sum(1, keepdim=True)
        grad_lower = torch.addcmul(grad_cholesky, cholesky, inner,
                                   value=-1.0) / norm
        return grad_lower.tril(-1), None
