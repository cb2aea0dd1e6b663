"""The launch bar of issue #22 (item 4), counted on the meta device: one
step of every layer on its CUDA path dispatches as many operations on a
graph 16 times larger, and at most 3 times the PyG layer it replaces
(GATConv; TransformerConv for IKTransformerConv and MIKANTransformerConv).

The sizes are 2,000 and 32,000 nodes (the study uses 10,000 and 160,000):
a loop over node or edge chunks would already repeat there (the node
chunks held 2^18 angles, about 250 nodes of direct's 8 heads x 128), and
the meta steps stay fast.
"""
import pytest

from benchmarks.launches import (
    BASELINES,
    baseline,
    count_step,
    layer_names,
    modes,
)

SMALL, LARGE = 2_000, 32_000

#: The fast tier counts a layer of each family and the stochastic ones
#: (every mode); the slow tier every layer.
FAST_LAYERS = ('IKGATConv-direct', 'MIKANConv', 'IKTransformerConv-direct')
CASES = [case if case[0] in FAST_LAYERS + BASELINES else pytest.param(
    case, marks=pytest.mark.slow) for case in (
        (name, label, training, dropout) for name in layer_names()
        for label, training, dropout in modes())]


def case_id(case):
    return f'{case[0]}-{case[1]}'


@pytest.fixture(scope='module')
def baseline_counts():
    return {(name, label): count_step(name, SMALL, training, dropout)[0]
            for name in BASELINES for label, training, dropout in modes()}


@pytest.mark.parametrize('case', CASES, ids=case_id)
def test_operations_do_not_grow_with_the_graph(case):
    name, _, training, dropout = case
    assert (count_step(name, SMALL, training, dropout)[0]
            == count_step(name, LARGE, training, dropout)[0])


@pytest.mark.parametrize('case', CASES, ids=case_id)
def test_operations_are_at_most_three_times_pygs(case, baseline_counts):
    name, label, training, dropout = case
    count = count_step(name, SMALL, training, dropout)[0]
    assert count <= 3 * baseline_counts[baseline(name), label], (
        name, label, count)
