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

    With :math:`v_n = [x_n \| 0]` the squared distance splits into
    :math:`\|x_n - c_t a_{own}\|^2 + c_t^2 \|a_{other}\|^2`.
    """
    own, other = split_anchor(anchor, is_source)
    scaled_own = slopes.view(-1, 1, 1) * own  # [T, H, C]
    diff = x.unsqueeze(2) - scaled_own.transpose(0, 1)  # [N, H, T, C]
    other_sq = slopes.view(1, -1)**2 * (other * other).sum(-1, keepdim=True)
    return (diff * diff).sum(-1) + other_sq  # [N, H, T]


def scaled_anchor_dot(x: Tensor, anchor: Tensor, is_source: bool,
                      slopes: Tensor) -> Tensor:
    r"""Return :math:`v_n^\top (c_t a_h) = c_t\, x_n^\top a_{own}` of shape
    :math:`(N, H, T)`."""
    own, _ = split_anchor(anchor, is_source)
    return (x * own).sum(-1).unsqueeze(-1) * slopes
