import math

import pytest
import torch

from ikgat import MIKANConv, inspection
from ikgat.inspection.terms import _group_spread
from ikgat.training import train_node_classifier
from tests.helpers import CHANNELS, HEADS, R, tiny_graph, tiny_model


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --------------------------------------------------------------------------
# Spectral points
# --------------------------------------------------------------------------


def test_tsne_inputs_are_the_learned_points():
    model = tiny_model(kernel='direct', kernel_kwargs=dict(lengthscale=2.0))
    inputs = inspection.spectral_tsne_inputs(model, num_reference=3000)
    w1, w2 = model.conv1.kernel.spectral_point_sets  # [H, R, 2C]
    assert inputs.layer == 'conv1'
    assert inputs.points.shape == (HEADS * 2 * R + 3000, 2 * CHANNELS)
    for h in range(HEADS):
        expected = torch.cat([w1[h], w2[h]])
        assert torch.equal(inputs.points[inputs.head == h], expected)
        assert torch.equal(inputs.point_set[inputs.head == h],
                           torch.tensor([0] * R + [1] * R))
    # Reference: GAT's Gaussian spectral density N(0, I / (2 l^2)), l = 2.
    reference = inputs.points[inputs.head == -1]
    assert reference.shape == (3000, 2 * CHANNELS)
    assert inputs.lengthscale == 2.0
    expected_std = 1 / (math.sqrt(2) * 2.0)
    assert reference.std(0).sub(expected_std).abs().max() < 0.05 * 2
    assert reference.mean(0).abs().max() < 0.02
    # Another layer by name:
    second = inspection.spectral_tsne_inputs(model, 'conv2', num_reference=1)
    v1, v2 = model.conv2.kernel.spectral_point_sets  # [1, R, 2C]
    assert torch.equal(second.points[second.head == 0],
                       torch.cat([v1[0], v2[0]]))


def test_tsne_inputs_of_mikan_need_a_forward_pass():
    model = tiny_model(MIKANConv)
    data = tiny_graph()
    with pytest.raises(RuntimeError, match='pass x= and edge_index='):
        inspection.spectral_tsne_inputs(model)
    inputs = inspection.spectral_tsne_inputs(model, x=data.x,
                                      edge_index=data.edge_index)
    sets = model.conv1.spectral_points()  # the last (evaluation) forward
    assert len(sets) == 2 and sets[0].shape == (1, HEADS, R, 2 * CHANNELS)
    for h in range(HEADS):
        assert torch.equal(inputs.points[inputs.head == h],
                           torch.cat([sets[0][0, h], sets[1][0, h]]))
    assert (inputs.head == -1).sum() == 2 * R


def test_tsne_inputs_reject_kernels_without_points():
    with pytest.raises(ValueError, match='No layer with spectral points'):
        inspection.spectral_tsne_inputs(tiny_model(kernel='rbf'))


def test_head_attention_std_by_hand():
    alpha = torch.tensor([[0.2, 0.4], [0.5, 0.5], [1.0, 0.0]])
    assert torch.allclose(inspection.head_attention_std(alpha),
                          torch.tensor([0.1, 0.0, 0.5]))


# --------------------------------------------------------------------------
# Sparsity
# --------------------------------------------------------------------------


def test_sparsity_statistics_by_hand():
    # Node 0: one edge (alpha = 1); node 1: two edges (0.5, 0.5);
    # node 2: three edges (0.95, 0.045, 0.005); node 3: no incoming edge.
    alpha = torch.tensor([1.0, 0.5, 0.5, 0.95, 0.045, 0.005])
    index = torch.tensor([0, 1, 1, 2, 2, 2])
    stats = inspection.sparsity_statistics(alpha, index, num_nodes=4)
    entropy_2 = -(0.95 * math.log(0.95) + 0.045 * math.log(0.045) +
                  0.005 * math.log(0.005))
    assert stats.entropy == pytest.approx((0 + math.log(2) + entropy_2) / 3)
    assert stats.share_above == pytest.approx(2 / 6)  # 1.0 and 0.95
    assert stats.share_below == pytest.approx(1 / 6)  # 0.005
    assert stats.num_weights == 6
    # Uniform attention over degrees 1, 2, 3:
    assert stats.uniform_entropy == pytest.approx(
        (0 + math.log(2) + math.log(3)) / 3)
    # Two heads: the second head is one-hot everywhere (entropy 0).
    two_heads = torch.stack(
        [alpha, torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0])], dim=1)
    stats = inspection.sparsity_statistics(two_heads, index, high=0.9, low=0.01)
    assert stats.entropy == pytest.approx((math.log(2) + entropy_2) / 6)
    assert stats.share_above == pytest.approx(5 / 12)
    assert stats.share_below == pytest.approx(4 / 12)
    with pytest.raises(ValueError, match=r"'index' must have shape"):
        inspection.sparsity_statistics(alpha, index[:-1])
    with pytest.raises(ValueError, match=r'\[0, 1\]'):
        inspection.sparsity_statistics(alpha * 2, index)


# --------------------------------------------------------------------------
# Terms during training
# --------------------------------------------------------------------------


def test_terms_recorder_records_the_decomposition_and_changes_nothing():
    data = tiny_graph()
    # MIKAN averaging 2 draws in evaluation: evaluating draws random numbers.
    model = tiny_model(MIKANConv, seed=3, num_samples=2).train()
    recorder = inspection.AttentionTermsRecorder(model, data.x, data.edge_index)
    torch.manual_seed(5)
    train_node_classifier(model, data, epochs=3, patience=10,
                          on_epoch=recorder)
    log = recorder.log
    assert log['epoch'] == [1, 2, 3]
    assert set(log['layers']) == {'conv1', 'conv2'}
    # The last record is the decomposition of the final model:
    last = inspection.layer_decompositions(model, data.x, data.edge_index)
    for name, decomposition in last.items():
        entry = log['layers'][name]
        assert entry['log_similarity_mean'][-1] == pytest.approx(
            float(decomposition.log_similarity.double().mean()))
        assert entry['log_magnitude_mean'][-1] == pytest.approx(
            float(decomposition.log_magnitude.double().mean()))
        assert all(len(v) == 3 for v in entry.values())
    # Recording restores the generators: the same run without it is equal.
    reference = tiny_model(MIKANConv, seed=3, num_samples=2).train()
    torch.manual_seed(5)
    train_node_classifier(reference, data, epochs=3, patience=10)
    for key, value in reference.state_dict().items():
        assert torch.equal(value, model.state_dict()[key]), key


def test_group_spread_by_hand():
    values = torch.tensor([[1.0], [3.0], [5.0]])
    index = torch.tensor([0, 0, 1])
    # Node 0: std of (1, 3) = 1; node 1: one edge, std 0; mean 0.5.
    assert _group_spread(values, index, 2) == pytest.approx(0.5)


@pytest.mark.slow  # a fresh interpreter (4 s)
def test_inspection_imports_no_plotting_library():
    import subprocess
    import sys
    code = ("import sys; sys.modules['matplotlib'] = None; "
            "sys.modules['sklearn'] = None; import ikgat.inspection")
    subprocess.run([sys.executable, '-c', code], check=True)


# --------------------------------------------------------------------------
# Attention weights of any layer
# --------------------------------------------------------------------------


def test_attention_weights_of_every_layer():
    from torch_geometric.nn import GATConv

    from ikgat.models import TwoLayerGAT
    from ikgat.nn import KEPGATConv
    data = tiny_graph()
    model = tiny_model(kernel='direct')
    name, alpha, edges = inspection.attention_weights(model, data.x,
                                                      data.edge_index)
    decomposition = inspection.layer_decompositions(
        model, data.x, data.edge_index, 'conv1')['conv1']
    assert name == 'conv1' and alpha.shape == (edges.size(1), HEADS)
    torch.testing.assert_close(alpha, decomposition.alpha)
    assert torch.equal(edges, decomposition.edge_index)
    for conv, kwargs in ((GATConv, {}), (KEPGATConv, dict(num_samples=0))):
        other = TwoLayerGAT(data.num_features, CHANNELS, 3, conv,
                            heads=HEADS, conv_kwargs=kwargs)
        name, alpha, edges = inspection.attention_weights(
            other, data.x, data.edge_index, 'conv2')
        assert name == 'conv2' and alpha.shape == (edges.size(1), 1)
        sums = torch.zeros(data.num_nodes).index_add_(0, edges[1],
                                                      alpha[:, 0])
        torch.testing.assert_close(sums, torch.ones(data.num_nodes))
    with pytest.raises(ValueError, match="no attention layer 'conv3'"):
        inspection.attention_weights(model, data.x, data.edge_index, 'conv3')
