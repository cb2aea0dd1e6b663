"""Batches of graphs: with the batch known, no layer's outputs for a graph
depend on the other graphs of its mini-batch (issue: KEPGATConv moved by
0.41, MIKANConv by 2.7e-2 in training)."""
import pytest
import torch

from benchmarks.batch_dependence import change, layers, two_graphs
from ikgat.nn import MIKANConv, graph_batch

LAYERS = layers()
#: Layers whose outputs are those of each graph even without the batch.
LOCAL = ['GATConv', 'IKGATConv direct', 'KEPGATConv']


@pytest.mark.parametrize('training, draws', [(False, 1), (False, 4),
                                             (True, 1)],
                         ids=['evaluation', 'evaluation-4-draws',
                              'training-draws'])
@pytest.mark.parametrize('name', list(LAYERS))
def test_a_graph_alone_and_in_a_batch(name, training, draws):
    a, ab = two_graphs()
    torch.manual_seed(0)
    layer = LAYERS[name](draws)
    if name != 'GATConv':
        assert change(layer, a, ab, training, ab.batch) <= 1e-5
    if name in LOCAL:
        assert change(layer, a, ab, training, None) <= 1e-5
    else:  # without the batch the summary is the batch's:
        assert change(layer, a, ab, training, None) > 1e-4


@pytest.mark.parametrize('name', [n for n in LAYERS if n != 'GATConv'])
def test_graph_batch_supplies_the_batch(name):
    a, ab = two_graphs()
    torch.manual_seed(0)
    layer = LAYERS[name](1).train()
    with torch.no_grad():
        torch.manual_seed(1)
        alone = layer(a.x, a.edge_index)
        torch.manual_seed(1)
        with graph_batch(layer, ab.batch, 2):
            together = layer(ab.x, ab.edge_index)
            # a batch given to forward wins over the supplied one:
            with pytest.raises(ValueError, match="'batch' has 3 entries"):
                layer(ab.x, ab.edge_index, batch=ab.batch[:3])
    assert (alone - together[:12]).abs().max() <= 1e-5
    assert layer.graph_batch is None  # restored


def test_graph_batch_reaches_the_layer_inside_gpsconv():
    from torch_geometric.nn import GPSConv
    a, ab = two_graphs()
    torch.manual_seed(0)
    gps = GPSConv(6, MIKANConv(6, 3, heads=2), heads=2).eval()

    def outputs(data, supply: bool):
        with torch.no_grad():
            if not supply:
                return gps(data.x, data.edge_index, data.batch)
            with graph_batch(gps, data.batch, data.num_graphs):
                return gps(data.x, data.edge_index, data.batch)

    alone = outputs(a, supply=False)
    assert (alone - outputs(ab, supply=True)[:12]).abs().max() <= 1e-5
    assert (alone - outputs(ab, supply=False)[:12]).abs().max() > 1e-4
