"""PyG's explainers on every layer, with edge masks, for node and graph
tasks: the masks' support against the receptive field (the numbers of
docs/guides/explainability.md come from benchmarks.explainers)."""
import functools

import pytest
import torch
from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
from torch_geometric.testing import withPackage

from benchmarks.explainers import layers, support
from ikgat.nn import IKGATConv, MIKANConv
from tests.helpers import fast_few

LAYERS = list(layers())
#: Layers whose graph-level quantities reach outside the receptive field
#: (the summary h_s of the implicit kernels, KEPGATConv's adjoint sums).
NOT_LOCAL = {'IKGATConv implicit', 'MIKANConv', 'KEPGATConv',
             'IKTransformerConv implicit', 'MIKANTransformerConv'}
#: The fast tier's layers: PyG's two, a local and a graph-level one of each
#: family (the slow tier takes every layer).
FAST_LAYERS = ('GATConv', 'IKGATConv direct', 'MIKANConv', 'TransformerConv',
               'IKTransformerConv direct', 'IKTransformerConv implicit')


@functools.cache
def outside_of(layer: str, explainer: str, task: str) -> int:
    r"""Edges outside the receptive field masked for :obj:`layer`
    (computed once per explainer and task)."""
    return support(layer, explainer, task, seed=0)[2]


def check(name: str, explainer: str, task: str) -> None:
    inside, size, outside, _ = support(name, explainer, task, seed=0)
    assert size > 0 and inside == size
    if explainer == 'AttentionExplainer' or task == 'graph':
        # AttentionExplainer masks the k-hop subgraph (every edge for a
        # graph task) as for the PyG layer; the batch keeps graph tasks
        # local.
        # The PyG layer each one replaces:
        pyg = 'TransformerConv' if 'Transformer' in name else 'GATConv'
        assert outside == outside_of(pyg, explainer, task)
    elif name in NOT_LOCAL:
        assert outside > 0  # documented, with numbers
    else:
        assert outside == 0


@pytest.mark.parametrize('task', ['node', 'graph'])
@pytest.mark.parametrize('explainer', ['GNNExplainer', 'AttentionExplainer'])
@pytest.mark.parametrize('name', fast_few(LAYERS, FAST_LAYERS))
def test_explainer_masks_the_receptive_field(name, explainer, task):
    check(name, explainer, task)


@withPackage('captum')
@pytest.mark.parametrize('task', ['node', 'graph'])
@pytest.mark.parametrize('name', fast_few(LAYERS, FAST_LAYERS))
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
