"""Properties of every layer on random graphs (hypothesis): finite input
gives a finite output, finite attention weights that sum to one over the
incoming edges of each target, and finite gradients, with the shapes
GATConv gives.  The graphs include empty ones, isolated nodes, duplicate
edges and self-loops; feature scales run from 1e-3 to 1e4.

The default tier runs a modest, fixed set of examples; the slow tier
(marked ``slow``: ``pytest -m "not slow"`` leaves it out of the edit loop,
the full suite runs it) explores 1000 random ones."""
from typing import NamedTuple, Tuple

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch_geometric.utils import scatter

from ikgat.nn import kl_divergence, ksvd_loss
from tests.helpers import LAYER_NAMES, make_layer


class Case(NamedTuple):
    layer: str
    p: float
    num_nodes: int
    edges: Tuple[Tuple[int, int], ...]
    scale: float
    heads: int
    channels: int
    concat: bool
    add_self_loops: bool
    training: bool
    seed: int


@st.composite
def cases(draw) -> Case:
    num_nodes = draw(st.integers(0, 8))
    node = st.integers(0, max(num_nodes - 1, 0))
    # A handful of nodes and up to 20 edges: duplicates, self-loops and
    # isolated nodes are common.
    edges = draw(st.lists(st.tuples(node, node),
                          max_size=20 if num_nodes else 0))
    return Case(
        layer=draw(st.sampled_from(LAYER_NAMES)),
        p=draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
        num_nodes=num_nodes,
        edges=tuple(edges),
        scale=10.0**draw(st.floats(-3.0, 4.0)),
        heads=draw(st.integers(1, 3)),
        channels=draw(st.integers(1, 3)),
        concat=draw(st.booleans()),
        add_self_loops=draw(st.booleans()),
        training=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
    )


def check_properties(case: Case) -> None:
    torch.manual_seed(case.seed)
    in_channels = 5
    layer = make_layer(case.layer, in_channels, case.channels,
                       heads=case.heads, concat=case.concat,
                       add_self_loops=case.add_self_loops, p=case.p)
    layer.train(case.training)
    x = case.scale * torch.randn(case.num_nodes, in_channels)
    x.requires_grad_()
    edge_index = torch.tensor(case.edges, dtype=torch.long).view(-1, 2).t()

    out, (edge_index_out, alpha) = layer(x, edge_index,
                                         return_attention_weights=True)
    width = case.heads * case.channels if case.concat else case.channels
    assert out.shape == (case.num_nodes, width)
    assert edge_index_out.dim() == 2 and edge_index_out.size(0) == 2
    assert alpha.shape == (edge_index_out.size(1), case.heads)
    assert torch.isfinite(out).all(), 'non-finite output'
    assert torch.isfinite(alpha).all() and (alpha >= 0).all()

    # Attention sums to one over the incoming edges of every target that
    # has any (GATConv's softmax), and to nothing elsewhere:
    target = edge_index_out[1]
    sums = scatter(alpha.detach(), target, dim=0, dim_size=case.num_nodes,
                   reduce='sum')
    has_edges = torch.zeros(case.num_nodes, dtype=torch.bool)
    has_edges[target] = True
    torch.testing.assert_close(sums[has_edges],
                               torch.ones_like(sums[has_edges]))
    assert (sums[~has_edges] == 0).all()

    loss = (out.square().sum() / max(out.numel(), 1) + kl_divergence(layer)
            + ksvd_loss(layer))  # (the mean of no rows is NaN)
    assert torch.isfinite(loss)
    loss.backward()
    grads = {name: p.grad for name, p in layer.named_parameters()}
    grads['x'] = x.grad
    for name, grad in grads.items():
        assert grad is None or torch.isfinite(grad).all(), name


EDGE_CASES = [
    # no nodes; one isolated node without a self-loop; duplicate edges and
    # self-loops at both ends of the feature scales:
    Case('mikan', 2.0, 0, (), 1.0, 2, 2, True, True, True, 0),
    Case('ikgat-implicit', 0.5, 1, (), 1e4, 1, 1, False, False, True, 1),
    Case('kep', 2.0, 4, ((0, 1), (0, 1), (2, 2), (2, 2), (3, 1)), 1e4, 2, 3,
         True, True, True, 2),
    Case('ikgat-rbf', 3.0, 4, ((0, 1), (0, 1), (2, 2), (1, 3)), 1e-3, 2, 2,
         False, False, False, 3),
]


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(cases())
@example(EDGE_CASES[0])
@example(EDGE_CASES[1])
@example(EDGE_CASES[2])
@example(EDGE_CASES[3])
def test_finite_in_finite_out(case):
    check_properties(case)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, database=None)
@given(cases())
def test_finite_in_finite_out_many_graphs(case):
    check_properties(case)
