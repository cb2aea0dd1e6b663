r"""Mean, sample standard deviation and Student-t confidence intervals."""
import math
from typing import NamedTuple, Sequence


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction of the regularised incomplete beta function
    # (modified Lentz's method, as in Numerical Recipes' betacf).
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    r"""The regularised incomplete beta function :math:`I_x(a, b)`."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) +
                 a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    r"""The CDF of Student's t distribution with :obj:`df` degrees of
    freedom: :math:`1 - \tfrac12 I_{df/(df+t^2)}(df/2, 1/2)` for
    :math:`t \ge 0`."""
    if df <= 0:
        raise ValueError(f'df must be positive (got {df!r})')
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(probability: float, df: float) -> float:
    r"""The :obj:`probability` quantile of Student's t with :obj:`df`
    degrees of freedom, by bisection on :func:`t_cdf` (to about 1e-12)."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f'probability must lie in (0, 1) '
                         f'(got {probability!r})')
    if probability < 0.5:
        return -t_quantile(1.0 - probability, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < probability:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_cdf(mid, df) < probability:
            low = mid
        else:
            high = mid
        if high - low < 1e-13 * max(1.0, high):
            break
    return 0.5 * (low + high)


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
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    return Stats(n, mean, std, half)
