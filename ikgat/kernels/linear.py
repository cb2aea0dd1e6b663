r"""A linear kernel on positive feature maps."""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from ikgat.kernels.anchor import split_anchor
from ikgat.kernels.base import Kernel
from ikgat.kernels.draws import Draws


def _positive_features(x: Tensor) -> Tensor:
    return F.elu(x) + 1.0


def _log_positive_features(x: Tensor) -> Tensor:
    r""":math:`\log\phi(x)` without forming :math:`\phi(x)`, which rounds
    to 0 in float32 below about :math:`-17` (``log`` then gives
    :math:`-\infty`): :math:`\phi(x) = e^x` for :math:`x \le 0` and
    :math:`1 + x` above, so :math:`\log\phi(x) = x` or
    :math:`\mathrm{log1p}(x)`, finite for every finite :math:`x` (the
    clamp keeps the branch not taken finite, and its gradient zero)."""
    return torch.where(x > 0, torch.log1p(x.clamp(min=0)), x)


class LinearKernel(Kernel):
    r"""The linear kernel on the positive feature map
    :math:`\phi(x) = \mathrm{elu}(x) + 1` (as in linear Transformers):

    .. math::
        \mathrm{sim}(x, y) = \phi(x)^\top \phi(y) > 0.

    A plain dot product :math:`x^\top y` can be negative and is therefore not
    a valid attention similarity; :math:`\phi > 0` makes it one.

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
    """
    pairs_vectors = True

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        return (_positive_features(x) * _positive_features(y)).sum(-1)

    def pair_log_similarity(self, query: Tensor, key: Tensor, *,
                            draws: Optional[Draws] = None) -> Tensor:
        # log sum_c phi(q_c) phi(k_c), in log space (finite at any scale):
        return torch.logsumexp(
            _log_positive_features(query) + _log_positive_features(key),
            dim=-1)

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor, *,
                       draws: Optional[Draws] = None) -> Tensor:
        own, other = split_anchor(anchor, is_source)
        log_own = _log_positive_features(slopes.view(-1, 1, 1) * own)
        log_other = _log_positive_features(slopes.view(-1, 1, 1) * other)
        # phi([x || 0])^T phi(c a) = phi(x)^T phi(c a_own) + sum phi(c a_other)
        # since phi(0) = 1; both sums in log space (finite at any scale):
        own_part = (_log_positive_features(x).unsqueeze(2) +
                    log_own.transpose(0, 1))  # [N, H, T, C]
        other_part = log_other.transpose(0, 1).expand(
            x.size(0), -1, -1, -1)  # [N, H, T, C]
        return torch.logsumexp(torch.cat([own_part, other_part], dim=-1),
                               dim=-1)
