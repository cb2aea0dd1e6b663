r"""Mean, sample standard deviation and Student-t confidence intervals
(the quantile from :data:`scipy.stats.t`)."""
import math
from typing import NamedTuple, Sequence

from scipy import stats


class Stats(NamedTuple):
    r"""Mean, sample standard deviation (``n - 1``) and the half-width of the
    two-sided Student-t confidence interval of the mean; ``nan`` where
    undefined (``n < 2``)."""
    n: int
    mean: float
    std: float
    half_width: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    @property
    def interval(self) -> str:
        r"""The mean and its interval, ``+1.16 [+0.55, +1.77]``."""
        return f'{self.mean:+.2f} [{self.low:+.2f}, {self.high:+.2f}]'

    @property
    def verdict(self) -> str:
        r"""Of a paired difference: ``'better'`` or ``'worse'`` where the
        interval excludes 0, ``'within noise'`` where it holds it, and
        ``'too few runs'`` below two."""
        if self.n < 2:
            return 'too few runs'
        return ('better' if self.low > 0 else 'worse' if self.high < 0
                else 'within noise')


def mean_std_ci(values: Sequence[float], confidence: float = 0.95) -> Stats:
    r"""``[1, 2, 3, 4, 5]`` → mean 3, std 1.5811, 95% half-width 1.9632
    (:math:`t_{0.975, 4} \cdot s / \sqrt{n}`)."""
    values = [float(v) for v in values]
    n = len(values)
    if n == 0:
        return Stats(0, math.nan, math.nan, math.nan)
    mean = math.fsum(values) / n
    if n < 2:
        return Stats(1, mean, math.nan, math.nan)
    std = math.sqrt(math.fsum((v - mean)**2 for v in values) / (n - 1))
    quantile = float(stats.t.ppf(0.5 + confidence / 2.0, n - 1))
    half = quantile * std / math.sqrt(n)
    return Stats(n, mean, std, half)
