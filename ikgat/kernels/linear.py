r"""A linear kernel on positive feature maps."""
import torch.nn.functional as F
from torch import Tensor

from ikgat.kernels.base import Kernel, split_anchor


def _positive_features(x: Tensor) -> Tensor:
    return F.elu(x) + 1.0


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

    def similarity(self, x: Tensor, y: Tensor) -> Tensor:
        return (_positive_features(x) * _positive_features(y)).sum(-1)

    def pair_log_similarity(self, query: Tensor, key: Tensor) -> Tensor:
        return self.similarity(query, key).log()

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor) -> Tensor:
        own, other = split_anchor(anchor, is_source)
        scaled_own = _positive_features(slopes.view(-1, 1, 1) * own)
        scaled_other = _positive_features(slopes.view(-1, 1, 1) * other)
        # phi([x || 0])^T phi(c a) = phi(x)^T phi(c a_own) + sum phi(c a_other)
        # since phi(0) = 1:
        own_part = (_positive_features(x).unsqueeze(2) *
                    scaled_own.transpose(0, 1)).sum(-1)  # [N, H, T]
        other_part = scaled_other.sum(-1).transpose(0, 1)  # [H, T]
        return (own_part + other_part).log()
