r"""The geometry of the node-against-anchor pairing
(:data:`~ikgat.kernels.base.PAIRINGS` ``'anchor'``): a target enters as
:math:`v = [x \,\|\, 0]` and a source as :math:`[0 \,\|\, x]`
(:func:`pad_node_vectors`), against the anchor :math:`c_t a` with
:math:`a = [a_{dst} \,\|\, a_{src}]` (:func:`split_anchor`), so that
distances and dot products need only the half of :math:`a` that meets the
node's coordinates.
"""
from typing import Tuple

import torch
from torch import Tensor


def split_anchor(anchor: Tensor, is_source: bool) -> Tuple[Tensor, Tensor]:
    r"""Split :math:`a = [a_{dst} \| a_{src}]` into the half that meets the
    node coordinates (as :obj:`is_source` says) and the other half, each
    :math:`(H, C)`."""
    first, second = anchor.chunk(2, dim=-1)
    return (first, second) if not is_source else (second, first)


def pad_node_vectors(x: Tensor, is_source: bool) -> Tensor:
    r"""Embed node projections as :math:`[x \| 0]` (``is_source=False``) or
    :math:`[0 \| x]` (``is_source=True``) in :math:`\mathbb{R}^{2C}`."""
    zeros = torch.zeros_like(x)
    return torch.cat([x, zeros] if not is_source else [zeros, x], dim=-1)


def scaled_anchor_distance_sq(x: Tensor, anchor: Tensor, is_source: bool,
                              slopes: Tensor) -> Tensor:
    r"""Return :math:`\|v_n - c_t a_h\|^2` of shape :math:`(N, H, T)`.

    With :math:`v_n = [x_n \| 0]` the squared distance expands into

    .. math::
        \|x_n\|^2 - 2 c_t\, x_n^\top a_{own} + c_t^2 \|a\|^2,

    clamped at zero, so that no :math:`(N, H, T, C)` difference is formed:
    two reductions over the channels of :math:`(N, H, C)` for all slopes
    instead of one of :math:`(N, H, T, C)` per slope pair (forward and
    backward at PubMed's size, 8 heads of 8 channels, two slopes, one
    thread: 17.6 against 51.7 ms).  The expansion loses digits where
    :math:`\|x_n\|` is far larger than the distance: an absolute error of
    about float32's :math:`\epsilon (\|x_n\|^2 + c_t^2\|a\|^2)`, far
    below what changes a softmax.
    """
    own, _ = split_anchor(anchor, is_source)
    x_sq = x.square().sum(-1, keepdim=True)  # [N, H, 1]
    x_dot_a = torch.einsum('nhc,hc->nh', x, own).unsqueeze(-1)  # [N, H, 1]
    a_sq = anchor.square().sum(-1, keepdim=True)  # [H, 1]
    return torch.addcmul(x_sq + slopes**2 * a_sq, x_dot_a, slopes,
                         value=-2.0).clamp_min(0.0)


def scaled_anchor_dot(x: Tensor, anchor: Tensor, is_source: bool,
                      slopes: Tensor) -> Tensor:
    r"""Return :math:`v_n^\top (c_t a_h) = c_t\, x_n^\top a_{own}` of shape
    :math:`(N, H, T)`."""
    own, _ = split_anchor(anchor, is_source)
    return torch.einsum('nhc,hc->nh', x, own).unsqueeze(-1) * slopes
