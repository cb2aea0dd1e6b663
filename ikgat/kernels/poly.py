r"""The polynomial kernel of even degree."""
import math
from typing import Optional

import torch
from torch import Tensor

from ikgat.kernels.arguments import check_positive
from ikgat.kernels.draws import Draws
from ikgat.kernels.pair_statistic import PairStatisticKernel


class PolynomialKernel(PairStatisticKernel):
    r"""The polynomial kernel of even degree :math:`d`

    .. math::
        \mathrm{sim}(x, y) = (x^\top y + b)^d \ge 0,

    evaluated in log space as :math:`\log(\mathrm{sim} + \epsilon)`.

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        degree (int, optional): :math:`d`, a positive even integer so that the
            similarity is non-negative. (default: :obj:`2`)
        offset (float, optional): :math:`b \ge 0`. (default: :obj:`1.0`)
        eps (float, optional): :math:`\epsilon`. (default: :obj:`1e-5`)
    """
    statistic = 'dot'

    def __init__(self, heads: int, channels: int, degree: int = 2,
                 offset: float = 1.0, eps: float = 1e-5, *,
                 pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        owner = type(self).__name__
        if (not isinstance(degree, int) or isinstance(degree, bool)
                or degree < 2 or degree % 2):
            raise ValueError(f"{owner}: 'degree' must be a positive even "
                             f"integer so that the similarity is "
                             f"non-negative (got {degree!r})")
        if not isinstance(offset, (int, float)) or offset < 0:
            raise ValueError(f"{owner}: 'offset' must be >= 0 "
                             f"(got {offset!r})")
        self.degree = degree
        self.offset = float(offset)
        self.eps = check_positive(owner, 'eps', eps)

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        return ((x * y).sum(-1) + self.offset).pow(self.degree)

    def log_similarity_of(self, dot: Tensor) -> Tensor:
        # log((t^d) + eps) as logaddexp(d log|t|, log eps), t = dot + b: the
        # power overflows float32 where the logarithm does not (d even, so
        # t^d = |t|^d; the clamp keeps log|t| finite at t = 0).
        shifted = (dot + self.offset).abs()
        log_power = self.degree * shifted.clamp(
            min=torch.finfo(shifted.dtype).tiny).log()
        log_eps = math.log(self.eps)
        return (log_power.clamp(min=log_eps)
                + torch.log1p(torch.exp(-(log_power - log_eps).abs())))

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, degree={self.degree}, '
                f'offset={self.offset}')
