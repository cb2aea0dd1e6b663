r"""The exponential (softmax) kernel of dot-product attention."""
from typing import Optional

from torch import Tensor

from ikgat.kernels.arguments import check_positive
from ikgat.kernels.base import PairFeatureMap
from ikgat.kernels.draws import Draws
from ikgat.kernels.pair_statistic import PairStatisticKernel


class ExpKernel(PairStatisticKernel):
    r"""The exponential kernel of dot-product attention

    .. math::
        \mathrm{sim}(x, y) = \exp(s\, x^\top y) > 0.

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        scale (float, optional): :math:`s`. (default: :obj:`1.0`)
    """
    statistic = 'dot'
    has_pair_feature_map = True

    def __init__(self, heads: int, channels: int, scale: float = 1.0, *,
                 pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        self.scale = check_positive(type(self).__name__, 'scale', scale)

    def log_similarity_of(self, dot: Tensor) -> Tensor:
        return self.scale * dot

    def pair_feature_map(self, query: Tensor, key: Tensor, *,
                         draws: Optional[Draws] = None) -> PairFeatureMap:
        return PairFeatureMap(query, key, 'identity', self.scale, 0.0)

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, scale={self.scale}'
