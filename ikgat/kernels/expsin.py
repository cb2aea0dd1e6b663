r"""The periodic (exp-sine-squared) kernel."""
import math
from typing import Optional

from torch import Tensor

from ikgat.kernels.anchor import scaled_anchor_distance_sq
from ikgat.kernels.base import Kernel, check_positive
from ikgat.kernels.draws import Draws


class ExpSinKernel(Kernel):
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
    pairs_vectors = True

    def __init__(self, heads: int, channels: int, lengthscale: float = 1.0,
                 period: float = 1.0, *, pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        owner = type(self).__name__
        self.lengthscale = check_positive(owner, 'lengthscale', lengthscale)
        self.period = check_positive(owner, 'period', period)

    def _log_from_distance_sq(self, distance_sq: Tensor) -> Tensor:
        # Clamping keeps the gradient of the square root finite at x = y.
        distance = distance_sq.clamp_min(1e-12).sqrt()
        return -2.0 * (math.pi * distance / self.period).sin()**2 / (
            self.lengthscale**2)

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        diff = x - y
        return self._log_from_distance_sq((diff * diff).sum(-1)).exp()

    def pair_log_similarity(self, query: Tensor, key: Tensor, *,
                            draws: Optional[Draws] = None) -> Tensor:
        diff = query - key
        return self._log_from_distance_sq((diff * diff).sum(-1))

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor, *,
                       draws: Optional[Draws] = None) -> Tensor:
        return self._log_from_distance_sq(
            scaled_anchor_distance_sq(x, anchor, is_source, slopes))

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, lengthscale={self.lengthscale}, '
                f'period={self.period}')
