"""PyG's explainers on every layer, with edge masks, for node and graph
tasks: the masks' support against the receptive field (the numbers of
docs/guides/explainability.md come from benchmarks.explainers)."""
import functools

import pytest
import torch
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
from torch_geometric.testing import withPackage
from torch_geometric.utils import k_hop_subgraph

from benchmarks.explainers import (
    layers,
    node_receptive_field,
    support,
    task_graph,
)
from ikgat.nn import IKGATConv, MIKANConv
from tests.helpers import fast_few

LAYERS = list(layers())
#: Layers whose graph-level quantities carry gradients from outside the
#: receptive field (KEPGATConv's adjoint sums).  The implicit kernels'
#: summary h_s depends on the whole graph too, but carries no gradient
#: (ImplicitSpectralKernel, Training): gradient explainers mask their
#: receptive field, as GATConv's.
NOT_LOCAL = {'KEPGATConv'}
#: The fast tier's layers: GATConv (held to the graph's own numbers), a
#: local layer of the GAT family and a graph-level one of the transformers
#: (the slow tier takes every layer).
FAST_LAYERS = ('GATConv', 'IKGATConv direct', 'IKTransformerConv implicit')
#: CaptumExplainer (the costliest) on one graph-level layer.
FAST_CAPTUM_LAYERS = ('IKTransformerConv implicit', )


#: PyG's layers, which ours replace.
PYG_LAYERS = ('GATConv', 'TransformerConv')


@functools.cache
def outside_of(layer: str, explainer: str, task: str) -> int:
    r"""Edges outside the receptive field masked for :obj:`layer`
    (computed once per explainer and task)."""
    return support(layer, explainer, task, seed=0)[2]


def expected_outside(explainer: str, task: str) -> int:
    r"""The edges outside the receptive field that PyG's explainers mask
    whatever the (local, or batch-respecting) layer, from the graph alone
    (torch_geometric/explain/algorithm/attention_explainer.py, base.py and
    gnn_explainer.py of PyG 2.8):

    * AttentionExplainer, node task: the attention weights (positive) of
      the edges of ``_get_hard_masks``, ``k_hop_subgraph`` of the node over
      as many hops as the model has message-passing layers (2), undirected:
      every edge between two nodes within 2 hops, a superset of the
      receptive field (5 edges outside it here, of 142);
    * AttentionExplainer, graph task: no hard mask, every edge's weight
      (all 76 edges of the other graph);
    * GNNExplainer and CaptumExplainer, graph task: the edges whose mask
      gets a gradient (GNNExplainer's hard mask; integrated gradients are
      zero without one): none of the other graph, the batch keeping each
      graph's output to its own edges."""
    data = task_graph(task, seed=0)
    loops = data.edge_index[0] == data.edge_index[1]
    if task == 'node':
        outside = ~node_receptive_field(data.edge_index, 0) & ~loops
    else:
        outside = (data.batch[data.edge_index[1]] != 0) & ~loops
    if explainer != 'AttentionExplainer':
        assert task == 'graph'
        return 0
    if task == 'graph':
        return int(outside.sum())
    _, _, _, hard = k_hop_subgraph(0, 2, data.edge_index,
                                   num_nodes=data.num_nodes)
    return int((hard & outside).sum())


def check(name: str, explainer: str, task: str) -> None:
    inside, size, outside, _ = support(name, explainer, task, seed=0)
    assert size > 0 and inside == size
    if explainer == 'AttentionExplainer' or task == 'graph':
        # What PyG's explainers mask there follows from the graph (the
        # batch keeps graph tasks local), for every layer as for PyG's:
        assert outside == expected_outside(explainer, task)
        if name not in PYG_LAYERS:  # and as for the PyG layer replaced
            pyg = 'TransformerConv' if 'Transformer' in name else 'GATConv'
            assert outside == outside_of(pyg, explainer, task)
    elif name in NOT_LOCAL:
        assert outside > 0  # documented, with numbers
    else:
        assert outside == 0


def test_the_expected_masks_outside_the_field_are_not_trivial():
    # The node task's 2-hop subgraph reaches beyond the receptive field,
    # and the graph task's other graph has edges: the counts above are
    # neither zero nor the receptive field's.
    assert expected_outside('AttentionExplainer', 'node') == 5
    assert expected_outside('AttentionExplainer', 'graph') == 76


@pytest.mark.parametrize('task', ['node', 'graph'])
@pytest.mark.parametrize('explainer', ['GNNExplainer', 'AttentionExplainer'])
@pytest.mark.parametrize('name', fast_few(LAYERS, FAST_LAYERS))
def test_explainer_masks_the_receptive_field(name, explainer, task):
    check(name, explainer, task)


@withPackage('captum')
@pytest.mark.parametrize('task', ['node', 'graph'])
@pytest.mark.parametrize('name', fast_few(LAYERS, FAST_CAPTUM_LAYERS))
def test_captum_explainer_masks_the_receptive_field(name, task):
    check(name, 'CaptumExplainer', task)


def test_mikanconv_made_after_an_ikgatconv_passes_through_the_edge_mask():
    # PyG's compiled propagate of IKGATConv, inherited by MIKANConv made
    # after it, ignored the mask (no gradient reached it).
    x, edge_index = torch.randn(10, 4), torch.randint(10, (2, 30))
    for conv in (IKGATConv(4, 3, heads=2), MIKANConv(4, 3, heads=2)):
        mask = torch.nn.Parameter(torch.zeros(30))
        set_masks(conv, mask, edge_index)
        conv.eval()(x, edge_index).sum().backward()
        clear_masks(conv)
        assert mask.grad is not None and bool(mask.grad.ne(0).any())


def test_transformer_layers_pass_through_the_edge_mask():
    # Made after a TransformerConv and after each other, so that a
    # compiled propagate inherited from the parent would collect its
    # arguments (TransformerConv's queries and keys) or skip the mask.
    from torch_geometric.nn import TransformerConv

    from ikgat.nn import IKTransformerConv, MIKANTransformerConv
    x, edge_index = torch.randn(10, 4), torch.randint(10, (2, 30))
    edge_attr = torch.randn(30, 2)
    TransformerConv(4, 3, heads=2)(x, edge_index)
    for conv in (IKTransformerConv(4, 3, heads=2, edge_dim=2),
                 MIKANTransformerConv(4, 3, heads=2, edge_dim=2),
                 IKTransformerConv(4, 3, heads=2, kernel='rbf')):
        mask = torch.nn.Parameter(torch.zeros(30))
        set_masks(conv, mask, edge_index)
        out = conv.eval()(x, edge_index, edge_attr if conv.lin_edge
                          is not None else None)
        out.sum().backward()
        clear_masks(conv)
        assert mask.grad is not None and bool(mask.grad.ne(0).any())
