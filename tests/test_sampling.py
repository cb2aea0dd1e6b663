r"""Mini-batch node classification: neighbour-sampled batches against the
full graph, layer by layer, and mini-batch training against full-batch
training.  The NeighborLoader tests need pyg-lib or torch-sparse."""
import copy
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
import torch_geometric.typing as pyg_typing
from torch_geometric.nn import GATConv, TransformerConv

from ikgat import (
    IKGATConv,
    IKTransformerConv,
    KEPGATConv,
    MIKANConv,
    MIKANTransformerConv,
)
from ikgat.data import toy_citation_graph
from ikgat.kernels import KERNELS, ImplicitSpectralKernel
from ikgat.models import TwoLayerGAT
from ikgat.nn import layer_over_full_graph
from ikgat.training import train_node_classifier
from ikgat.training.sampling import (
    check_num_neighbors,
    global_batches,
    minibatch_training,
    neighbor_sampler,
    require_sampler,
    sampled_batches,
    warn_sampling_caveats,
)
from tests.helpers import needs_sampler

#: Every layer whose target outputs depend on in-neighbourhoods only (the
#: implicit kernels through full_graph_summary).
LOCAL_LAYERS = ([('GATConv', GATConv, {})] +
                [(f'ikgat-{name}', IKGATConv, {'kernel': name})
                 for name in sorted(KERNELS)] +
                [('mikan', MIKANConv, {}),
                 ('TransformerConv', TransformerConv, {})] +
                [(f'ikt-{name}', IKTransformerConv, {'kernel': name})
                 for name in ('rbf', 'direct', 'implicit')] +
                [('mikan-transformer', MIKANTransformerConv, {})])
SUMMARISING = [('ikgat-implicit', IKGATConv, {'kernel': 'implicit'}),
               ('mikan', MIKANConv, {}),
               ('ikt-implicit', IKTransformerConv, {'kernel': 'implicit'}),
               ('mikan-transformer', MIKANTransformerConv, {})]


def graph(seed=0):
    data = toy_citation_graph(num_nodes=60, seed=seed)
    # An isolated node and a node with in-edges only:
    keep = (data.edge_index != 59).all(0) & (data.edge_index[0] != 58)
    data.edge_index = data.edge_index[:, keep]
    return data


def layers(conv, kwargs, channels):
    torch.manual_seed(0)
    first = conv(channels, 4, heads=2, **kwargs).eval()
    second = conv(8, 3, heads=1, concat=False, **kwargs).eval()
    return sharpen_densities(first), sharpen_densities(second)


def sharpen_densities(module):
    r"""The implicit kernels' inference networks start almost flat (std
    1e-3); after training the density depends on the graph summary, as it
    does after this."""
    for kernel in module.modules():
        if isinstance(kernel, ImplicitSpectralKernel):
            torch.nn.init.normal_(kernel.encoder_readout.weight,
                                  std=kernel.encoder_readout.in_features)
    return module


@needs_sampler
@pytest.mark.parametrize('name,conv,kwargs', LOCAL_LAYERS,
                         ids=[case[0] for case in LOCAL_LAYERS])
def test_sampled_seed_outputs_equal_the_full_graph_per_layer(
        name, conv, kwargs):
    # Fan-out -1 keeps every in-neighbour: in evaluation mode each layer's
    # seed outputs equal its full-graph outputs.
    data = graph()
    first, second = layers(conv, kwargs, data.num_features)
    hidden = F.elu(first(data.x, data.edge_index))
    sampler = neighbor_sampler(data, [-1, -1])
    seeds = torch.tensor([0, 5, 17, 58, 59, 33])
    batch = sampler(seeds)
    assert torch.equal(batch.n_id[:batch.batch_size], seeds)
    for layer, features in ((first, data.x), (second, hidden)):
        full = layer(features, data.edge_index)[seeds]
        summary = (layer.full_graph_summary(features)
                   if hasattr(layer, 'full_graph_summary') else
                   nullcontext())
        with summary:
            sampled = layer(features[batch.n_id],
                            batch.edge_index)[:batch.batch_size]
        torch.testing.assert_close(sampled, full, atol=2e-6, rtol=1e-5)


@needs_sampler
@pytest.mark.parametrize('name,conv,kwargs', SUMMARISING,
                         ids=[case[0] for case in SUMMARISING])
def test_summarising_layers_differ_on_subgraphs_and_warn(name, conv,
                                                         kwargs):
    data = graph()
    first, _ = layers(conv, kwargs, data.num_features)
    batch = neighbor_sampler(data, [-1])(torch.tensor([0, 1, 2]))
    full = first(data.x, data.edge_index)[:3]
    sampled = first(batch.x, batch.edge_index)[:3]
    # The round-off of this comparison: the subgraph with the full graph's
    # summary gives the full-graph outputs up to it (at most 6e-8 on graph
    # seeds 0-9), at least float32's epsilon of the outputs' scale:
    with first.full_graph_summary(data.x):
        summarised = first(batch.x, batch.edge_index)[:3]
    roundoff = max((summarised - full).abs().max().item(),
                   torch.finfo(torch.float32).eps * full.abs().max().item())
    # The caveat is real: a difference far above that (on graph seeds 0-9,
    # 143 to 4e3 times it for the transformer layers, whose summaries move
    # the outputs by 8e-6 to 1.4e-4, and 8e4 to 8e5 times for the GAT
    # layers):
    assert (sampled - full).abs().max() > 20 * roundoff
    with pytest.warns(UserWarning, match='implicit spectral density'):
        warn_sampling_caveats(torch.nn.ModuleList([first]))
    first.train()
    with pytest.raises(RuntimeError, match='model.eval'):
        with first.full_graph_summary(data.x):
            pass
    assert first._full_summary is None


@needs_sampler
def test_kep_differs_on_subgraphs_even_with_every_neighbour_and_warns():
    data = graph()
    torch.manual_seed(0)
    conv = KEPGATConv(data.num_features, 4, heads=2, num_samples=0).eval()
    batch = neighbor_sampler(data, [-1])(torch.tensor([0, 1, 2]))
    full = conv(data.x, data.edge_index)[:3]
    sampled = conv(batch.x, batch.edge_index)[:3]
    assert (sampled - full).abs().max() > 1e-3
    assert not conv.local_to_in_neighbourhood
    with pytest.warns(UserWarning, match='out-edges'):
        warn_sampling_caveats(torch.nn.ModuleList([conv]))
    for layer in (IKGATConv(4, 2), GATConv(4, 2)):
        assert getattr(layer, 'sampling_caveat', None) is None


LAYERWISE = LOCAL_LAYERS + [('kep', KEPGATConv, {'num_samples': 0})]


#: The fast tier's layer-wise layers: a local and a summarising one of each
#: family, and KEPGATConv (the slow tier every layer).
FAST_LAYERWISE = ('ikgat-direct', 'mikan', 'ikt-direct', 'ikt-implicit',
                  'kep')


@pytest.mark.parametrize('name,conv,kwargs', [
    case if case[0] in FAST_LAYERWISE else pytest.param(
        *case, marks=pytest.mark.slow) for case in LAYERWISE],
    ids=[case[0] for case in LAYERWISE])
def test_layerwise_inference_equals_the_full_graph(name, conv, kwargs):
    data = graph(seed=1)
    torch.manual_seed(0)
    model = sharpen_densities(TwoLayerGAT(data.num_features, 4, 3, conv,
                                          heads=2, conv_kwargs=kwargs).eval())
    full = model(data.x, data.edge_index)
    for batch_size in (1, 7, 60, 1000):
        torch.testing.assert_close(
            model.inference(data.x, data.edge_index, batch_size), full,
            atol=2e-6, rtol=1e-5)


def test_layerwise_keeps_edge_features_and_checks_the_batch_size():
    data = graph()
    torch.manual_seed(0)
    conv = IKGATConv(data.num_features, 4, heads=2, edge_dim=3).eval()
    edge_attr = torch.randn(data.edge_index.size(1), 3)
    full = conv(data.x, data.edge_index, edge_attr)
    torch.testing.assert_close(
        layer_over_full_graph(conv, data.x, data.edge_index, 9, edge_attr),
        full, atol=2e-6, rtol=1e-5)
    with pytest.raises(ValueError, match='batch_size'):
        layer_over_full_graph(conv, data.x, data.edge_index, 0)


def test_global_batches_are_shared_by_ranks_and_cover_the_seeds():
    seeds = torch.arange(10, 33)
    batches = global_batches(seeds, 5, epoch=3, seed=0, world_size=2)
    assert [b.numel() for b in batches] == [5, 5, 5, 5, 3]
    assert torch.equal(torch.cat(batches).sort().values, seeds)
    again = global_batches(seeds, 5, epoch=3, seed=0, world_size=2)
    assert all(torch.equal(a, b) for a, b in zip(batches, again))
    other = global_batches(seeds, 5, epoch=4, seed=0, world_size=2)
    assert not torch.equal(torch.cat(batches), torch.cat(other))
    # A last batch with fewer seeds than ranks is dropped:
    assert [b.numel() for b in global_batches(seeds, 5, 3, 0, 4)] == [5] * 4
    with pytest.raises(ValueError, match='batch_size'):
        global_batches(seeds, 1, 0, 0, world_size=2)


def test_bad_fan_out_and_missing_sampler_are_named(monkeypatch):
    with pytest.raises(ValueError, match='num_neighbors'):
        check_num_neighbors([10, 0])
    with pytest.raises(ValueError, match='num_neighbors'):
        check_num_neighbors([])
    monkeypatch.setattr(pyg_typing, 'WITH_PYG_LIB', False)
    monkeypatch.setattr(pyg_typing, 'WITH_TORCH_SPARSE', False)
    with pytest.raises(RuntimeError, match='pyg-lib.*torch-sparse'):
        require_sampler()
    with pytest.raises(RuntimeError, match='pyg-lib.*torch-sparse'):
        neighbor_sampler(graph(), [5, 5])


@needs_sampler
@pytest.mark.parametrize('conv,kwargs', [
    (IKGATConv, {'kernel': 'direct'}), (GATConv, {}),
    (IKTransformerConv, {'kernel': 'direct'}), (TransformerConv, {})])
def test_one_full_neighbourhood_batch_is_one_full_batch_step(conv, kwargs):
    # One epoch of one batch holding every training node, fan-out -1 and
    # no dropout takes the full-batch step: the same parameters after it.
    data = graph()
    torch.manual_seed(0)
    model = TwoLayerGAT(data.num_features, 4, 3, conv, heads=2,
                        dropout=0.0, conv_kwargs=kwargs)
    twin = copy.deepcopy(model)
    num_train = int(data.train_mask.sum())
    batches, inference = minibatch_training(model, data, num_train, [-1, -1],
                                            eval_batch_size=16)
    assert [batch.batch_size for batch, _ in batches(1)] == [num_train]
    # SGD: Adam's first step is lr * sign(gradient), which turns roundoff
    # in a vanishing gradient into a full step.
    train_node_classifier(
        model, data, epochs=1, patience=None,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.5),
        batches=batches, inference=inference)
    train_node_classifier(twin, data, epochs=1, patience=None,
                          optimizer=torch.optim.SGD(twin.parameters(),
                                                    lr=0.5))
    for (key, value), other in zip(model.state_dict().items(),
                                   twin.state_dict().values()):
        torch.testing.assert_close(value, other, atol=1e-6, rtol=1e-5,
                                   msg=key)


@pytest.mark.slow  # a training
@needs_sampler
def test_minibatch_training_learns_and_warns_for_kep():
    data = toy_citation_graph(num_nodes=90, num_train=30)
    torch.manual_seed(0)
    model = TwoLayerGAT(data.num_features, 4, 3, KEPGATConv, heads=2,
                        dropout=0.0)
    sampler = neighbor_sampler(data, [5, 5])
    seeds = data.train_mask.nonzero().view(-1)
    with pytest.warns(UserWarning, match='out-edges'):
        result = train_node_classifier(
            model, data, epochs=30, patience=None, lr=0.02,
            batches=lambda epoch: sampled_batches(sampler, seeds, 8, epoch,
                                                  0),
            inference=lambda: model.inference(data.x, data.edge_index, 32))
    assert result.epochs == 30
    assert result.val_acc > 0.6  # chance is 1/3
