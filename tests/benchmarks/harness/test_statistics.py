"""Mean, std and Student-t intervals of the benchmark summaries."""
import math

import pytest

from benchmarks.harness.statistics import mean_std_ci, t_quantile


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
                                          (19, 2.0930241), (99, 1.9842169),
                                          (10000, 1.9602012)])
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-6)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-6)


def test_t_quantile_matches_scipy():
    stats = pytest.importorskip('scipy.stats')
    for df in (1, 3, 7, 30, 250):
        for prob in (0.6, 0.9, 0.95, 0.995):
            assert t_quantile(prob, df) == pytest.approx(
                stats.t.ppf(prob, df), rel=1e-8, abs=1e-9)
