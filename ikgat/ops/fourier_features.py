r"""The random Fourier feature map of the spectral kernels and the gradient
of its angles, in PyTorch: the reference of the fused operators that
compute them tile by tile (:mod:`ikgat.ops.node_tables`,
:mod:`ikgat.ops.transformer_attention`).

With :math:`m` sets of :math:`R` spectral points :math:`w_{s,r}`, a vector
:math:`x` has the features

.. math::
    \phi(x) = \sum_{s=1}^m \left[\cos w_{s,r}^\top x;\,
    \sin w_{s,r}^\top x\right]_{r=1}^R

(:func:`fourier_features`; the maths is in
:mod:`ikgat.kernels.random_features`), and the spectral points' gradient is
:math:`\partial L/\partial w_{s,r} = \sum_n (\partial L/\partial
a_{n,s,r})\, x_n` over the angles :math:`a_{n,s,r} = w_{s,r}^\top x_n`
(:func:`angle_product`).
"""
from typing import Sequence, Union

import torch
from torch import Tensor


def fourier_features(x: Tensor,
                     spectral_points: Union[Sequence[Tensor], Tensor]
                     ) -> Tensor:
    r"""Return :math:`\phi(x)` of shape :math:`(*, H, 2R)` for vectors
    :obj:`x` of shape :math:`(*, H, D)` and spectral point sets of shape
    :math:`(H, R, D)` or stacked, :math:`(m, H, R, D)` (the angles of every
    set in one contraction), or sets broadcastable to :math:`(*, H, R, D)`
    (points per row)."""
    if isinstance(spectral_points, Tensor) or all(
            points.dim() == 3 for points in spectral_points):
        stacked = (spectral_points if isinstance(spectral_points, Tensor)
                   else torch.stack(list(spectral_points)))
        angle = torch.einsum('...hd,mhrd->m...hr', x, stacked)
        return torch.cat([angle.cos(), angle.sin()], dim=-1).sum(0)
    features = 0
    for points in spectral_points:
        angle = (x.unsqueeze(-2) * points).sum(-1)  # [*, H, R]
        features = features + torch.cat([angle.cos(), angle.sin()], dim=-1)
    return features


def angle_product(grad_angles: Tensor, x: Tensor, one_product: bool
                  ) -> Tensor:
    r""":math:`\sum_n (\partial L/\partial a_{n,s})\, x_n^\top`,
    :math:`(m, H, R, D)`, from the angles' gradients :math:`(N, H, m, R)`
    and the vectors :math:`(N, H, D)` of one side.

    With :obj:`one_product`, one matrix product :math:`(H m R, N) \times
    (N, H D)` whose diagonal blocks (:math:`h = h'`) are the heads'
    products: :math:`H` times the FLOPs of the per-head batched product,
    but one that cuBLAS splits along :math:`N`.  On an H100 at arxiv size
    the batched product (8 products of 64 x 8 over 169,343 nodes) took 5.9
    ms per side, 12 of the layer step's 72 ms, and the one product about
    0.25 ms per side (``benchmarks/results/archive/cuda-2026-11-26-h100``).  Else
    the batched product (on CPU, the :math:`H` times fewer FLOPs)."""
    num_nodes, heads, num_sets, num_points = grad_angles.shape
    width = x.size(2)
    if not one_product or grad_angles.numel() == 0 or x.numel() == 0:
        return torch.einsum('nhsr,nhd->shrd', grad_angles, x)
    full = grad_angles.reshape(num_nodes, -1).t() @ x.reshape(num_nodes, -1)
    return full.view(heads, num_sets, num_points, heads, width).diagonal(
        dim1=0, dim2=3).permute(0, 3, 1, 2)  # (m, R, D, H) -> (m, H, R, D)
