"""Mean, std and Student-t intervals of the benchmark summaries."""
import math

import pytest

from benchmarks.harness.statistics import mean_std_ci


def test_mean_std_ci_on_known_numbers():
    stats = mean_std_ci([1, 2, 3, 4, 5])
    assert stats.n == 5
    assert stats.mean == pytest.approx(3.0)
    assert stats.std == pytest.approx(1.5811388, abs=1e-6)
    assert stats.half_width == pytest.approx(1.9632432, abs=1e-6)
    assert (stats.low, stats.high) == pytest.approx((1.0367568, 4.9632432))
    one = mean_std_ci([0.8])
    assert one.n == 1 and one.mean == 0.8 and math.isnan(one.half_width)
    assert mean_std_ci([]).n == 0


@pytest.mark.parametrize('df, expected', [(1, 12.7062047), (2, 4.3026527),
                                          (4, 2.7764451), (9, 2.2621572),
                                          (19, 2.0930241), (99, 1.9842169)])
def test_half_width_uses_the_t_quantile_of_the_tables(df, expected):
    # Values with sample std 1 (n - 1 = df): the half-width is t / sqrt(n).
    n = df + 1
    values = [0.0] * n
    values[0], values[1] = -math.sqrt(df / 2), math.sqrt(df / 2)
    stats = mean_std_ci(values)
    assert stats.std == pytest.approx(1.0)
    assert stats.half_width * math.sqrt(n) == pytest.approx(expected,
                                                            abs=1e-6)


def test_a_paired_difference_reads_as_its_interval_and_verdict():
    stats = mean_std_ci([1, 2, 3, 4, 5])
    assert stats.interval == '+3.00 [+1.04, +4.96]'
    assert stats.verdict == 'better'
    assert mean_std_ci([-1, -2, -3, -4, -5]).verdict == 'worse'
    assert mean_std_ci([-1, 1, -2, 2.5]).verdict == 'within noise'
    assert mean_std_ci([0.4]).verdict == 'too few runs'
