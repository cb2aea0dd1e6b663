r"""The periodic (exp-sine-squared) kernel."""
import math

from torch import Tensor

from ikgat.kernels.arguments import check_positive
from ikgat.kernels.pair_statistic import PairStatisticKernel


class ExpSinKernel(PairStatisticKernel):
    r"""The exp-sine-squared (periodic) kernel

    .. math::
        \mathrm{sim}(x, y) = \exp\left(-\frac{2}{l^2}
        \sin^2\left(\frac{\pi \|x - y\|}{P}\right)\right) \in
        [e^{-2/l^2}, 1].

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        lengthscale (float, optional): :math:`l`. (default: :obj:`1.0`)
        period (float, optional): :math:`P`. (default: :obj:`1.0`)
    """
    statistic = 'distance_sq'

    def __init__(self, heads: int, channels: int, lengthscale: float = 1.0,
                 period: float = 1.0, *, pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        owner = type(self).__name__
        self.lengthscale = check_positive(owner, 'lengthscale', lengthscale)
        self.period = check_positive(owner, 'period', period)

    def log_similarity_of(self, distance_sq: Tensor) -> Tensor:
        # Clamping keeps the gradient of the square root finite at x = y.
        distance = distance_sq.clamp_min(1e-12).sqrt()
        return -2.0 * (math.pi * distance / self.period).sin()**2 / (
            self.lengthscale**2)

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, lengthscale={self.lengthscale}, '
                f'period={self.period}')
