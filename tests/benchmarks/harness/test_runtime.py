"""Seed lists of the benchmark command lines."""
import pytest

from benchmarks.harness.runtime import compact_seeds, parse_seeds


def test_seed_parsing():
    assert parse_seeds('20') == list(range(20))
    assert parse_seeds('0-19') == list(range(20))
    assert parse_seeds('3,5,10-12') == [3, 5, 10, 11, 12]
    assert compact_seeds([0, 1, 2, 5, 7, 8]) == '0-2,5,7-8'
    # a single seed round-trips (a bare '0' would be a count of none):
    for seeds in ([0], [3], [0, 2]):
        assert parse_seeds(compact_seeds(seeds)) == seeds
    with pytest.raises(ValueError, match='Invalid seeds'):
        parse_seeds('a-b')
