import copy

import pytest
import torch
from torch.distributions import MultivariateNormal, kl_divergence
from torch_geometric.utils import to_torch_coo_tensor

from ikgat import IKGATConv, MIKANConv
from ikgat.nn import kl_divergence as model_kl
from tests.helpers import random_graph


def make_mikan(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('num_spectral_points', 8)
    return MIKANConv(6, 4, heads=3, **kwargs)


def randomise_copula(conv):
    with torch.no_grad():
        conv.kernel.raw_correlation.normal_(0, 1.0)


def test_kl_equals_torch_distributions():
    conv = make_mikan().double()
    randomise_copula(conv)
    with torch.no_grad():  # move q away from its initial state
        conv.kernel.encoder_readout.weight.normal_(
            0, 0.3 * conv.kernel.encoder_readout.in_features)
    x, edge_index = random_graph(20, 60, 6, seed=0)
    batch = torch.tensor([0] * 8 + [1] * 12)
    conv(x.double(), edge_index, batch=batch)
    kernel = conv.kernel
    draws = kernel.last_draws
    mean, std = draws.mean, draws.log_std.exp()  # [G, H, D]
    cholesky = kernel.correlation_cholesky()
    heads = conv.heads
    prior = MultivariateNormal(
        torch.zeros(heads, dtype=torch.double),
        covariance_matrix=kernel.prior_scale**2 *
        torch.eye(heads, dtype=torch.double))
    expected = 0.0
    for g in range(mean.size(0)):
        for d in range(mean.size(2)):
            q = MultivariateNormal(mean[g, :, d],
                                   scale_tril=torch.diag(std[g, :, d]) @ cholesky)
            expected = expected + kl_divergence(q, prior) / mean.size(0)
    actual = conv.kl_divergence()
    assert abs(actual.item() - expected.item()) < 1e-5 * max(
        1.0, abs(expected.item()))
    assert actual.item() >= 0
    twin = copy.deepcopy(conv)
    twin(x.double(), edge_index, batch=batch)
    assert torch.allclose(model_kl(torch.nn.Sequential(conv, twin)),
                          2 * actual)


def test_kl_is_zero_when_q_is_the_prior():
    conv = make_mikan()
    kernel = conv.kernel
    with torch.no_grad():
        kernel.encoder_readout.weight.zero_()
        kernel.head_mean.zero_()
    x, edge_index = random_graph(10, 30, 6, seed=1)
    conv(x, edge_index)
    assert abs(conv.kl_divergence().item()) < 1e-4
    with torch.no_grad():
        kernel.head_mean.fill_(0.1)
    conv(x, edge_index)
    assert conv.kl_divergence().item() > 1.0


def test_copula_correlation_is_a_correlation_matrix():
    conv = make_mikan()
    assert torch.allclose(conv.copula_correlation(), torch.eye(3))
    randomise_copula(conv)
    correlation = conv.copula_correlation()
    assert torch.allclose(correlation.diagonal(), torch.ones(3), atol=1e-6)
    assert torch.allclose(correlation, correlation.t(), atol=1e-6)
    assert torch.linalg.eigvalsh(correlation).min() > 0
    assert (correlation - torch.eye(3)).abs().max() > 0.1


def test_identity_copula_equals_ikan_given_the_same_noise():
    mikan = make_mikan()
    ikan = IKGATConv(6, 4, heads=3, kernel='implicit', num_spectral_points=8)
    result = ikan.load_state_dict(mikan.state_dict(), strict=False)
    assert result.unexpected_keys == ['kernel.raw_correlation']
    x, edge_index = random_graph(15, 50, 6, seed=2)
    torch.manual_seed(7)
    out_mikan = mikan(x, edge_index)
    torch.manual_seed(7)
    out_ikan = ikan(x, edge_index)
    assert torch.allclose(out_mikan, out_ikan, atol=1e-6)
    randomise_copula(mikan)
    torch.manual_seed(7)
    assert not torch.allclose(mikan(x, edge_index), out_ikan, atol=1e-3)


def test_spectral_sample_is_exactly_symmetric():
    conv = make_mikan(num_spectral_points=10)
    x, edge_index = random_graph(15, 50, 6, seed=3)
    for training in (True, False):
        conv.train(training)
        conv(x, edge_index)
        for points in conv.spectral_points():
            assert points.shape == (1, 3, 10, 8)
            assert torch.equal(points[:, :, 5:], -points[:, :, :5])
            assert points.abs().sum() > 0


def test_evaluation_is_deterministic_training_is_not():
    conv = make_mikan(dropout=0.0)
    x, edge_index = random_graph(15, 50, 6, seed=4)
    conv.eval()
    assert torch.equal(conv(x, edge_index), conv(x, edge_index))
    conv.train()
    assert not torch.equal(conv(x, edge_index), conv(x, edge_index))


def test_monte_carlo_evaluation_averages_samples():
    conv = make_mikan(num_samples=4).eval()
    x, edge_index = random_graph(15, 50, 6, seed=5)
    torch.manual_seed(0)
    first = conv(x, edge_index)
    torch.manual_seed(0)
    assert torch.equal(first, conv(x, edge_index))
    conv.kernel.num_samples = 1
    mean_only = conv(x, edge_index)
    assert not torch.allclose(first, mean_only, atol=1e-4)
    # The output is linear in the attention weights: averaging the weights
    # of four draws is averaging four sampled outputs.
    conv.train()
    torch.manual_seed(0)
    sampled = torch.stack([conv(x, edge_index) for _ in range(4)])
    assert torch.allclose(sampled.mean(0), first, atol=1e-5)


def test_gradients_reach_inference_network_transform_and_copula():
    conv = make_mikan()
    x, edge_index = random_graph(15, 50, 6, seed=6)
    loss = conv(x, edge_index).square().mean() + 0.1 * conv.kl_divergence()
    loss.backward()
    kernel = conv.kernel
    for name, parameter in kernel.named_parameters():
        assert parameter.grad is not None, name
        assert parameter.grad.abs().sum() > 0, name


def test_batch_of_graphs_matches_graphs_alone_in_evaluation():
    conv = make_mikan().eval()
    x1, e1 = random_graph(9, 30, 6, seed=7)
    x2, e2 = random_graph(12, 40, 6, seed=8)
    x = torch.cat([x1, x2])
    edge_index = torch.cat([e1, e2 + 9], dim=1)
    batch = torch.tensor([0] * 9 + [1] * 12)
    out = conv(x, edge_index, batch=batch)
    points = conv.spectral_points()
    assert points[0].shape == (2, 3, 8, 8)
    assert not torch.allclose(points[0][0], points[0][1])
    out1 = conv(x1, e1)
    assert torch.allclose(points[0][0], conv.spectral_points()[0][0])
    out2 = conv(x2, e2)
    assert torch.allclose(out[:9], out1, atol=1e-5)
    assert torch.allclose(out[9:], out2, atol=1e-5)


def test_graph_classification_model_trains():
    from torch_geometric.data import Batch, Data
    from torch_geometric.nn import global_mean_pool

    graphs = []
    for seed in range(6):
        x, edge_index = random_graph(8, 20, 6, seed=seed)
        graphs.append(Data(x=x, edge_index=edge_index, y=seed % 2))
    batch = Batch.from_data_list(graphs)
    conv = make_mikan()
    head = torch.nn.Linear(12, 2)
    out = head(global_mean_pool(conv(batch.x, batch.edge_index,
                                     batch=batch.batch), batch.batch))
    assert out.shape == (6, 2)
    loss = torch.nn.functional.cross_entropy(out, batch.y)
    loss = loss + 0.1 * model_kl(torch.nn.ModuleList([conv, head]))
    loss.backward()
    assert torch.isfinite(conv.kernel.head_mean.grad).all()


# ---------------------------------------------------------------- contract


def test_repr_shapes_and_formats():
    conv = MIKANConv(8, 32, heads=2)
    assert str(conv) == 'MIKANConv(8, 32, heads=2)'
    x, edge_index = random_graph(10, 30, 8, seed=9)
    conv.eval()
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert out.shape == (10, 64) and alpha.shape == (ei.size(1), 2)
    adj_t = to_torch_coo_tensor(edge_index.flip(0), size=(10, 10))
    out_sparse, (adj, _) = conv(x, adj_t.coalesce(),
                                return_attention_weights=True)
    assert out_sparse.shape == (10, 64) and adj.is_sparse
    concat_false = MIKANConv(8, 5, heads=3, concat=False, edge_dim=2)
    assert concat_false(x, edge_index, torch.randn(30, 2)).shape == (10, 5)


def test_bipartite_and_empty_graphs():
    conv = MIKANConv((5, 3), 4, heads=2, add_self_loops=False)
    x_src, x_dst = torch.randn(7, 5), torch.randn(4, 3)
    edge_index = torch.tensor([[0, 3, 6], [1, 2, 3]])
    assert conv((x_src, x_dst), edge_index).shape == (4, 8)
    assert conv((x_src, None), edge_index, size=(7, 4)).shape == (4, 8)
    empty = torch.empty(2, 0, dtype=torch.long)
    assert conv((x_src, x_dst), empty).shape == (4, 8)
    loop_conv = MIKANConv(5, 4, heads=2)
    assert loop_conv(torch.empty(0, 5), empty).shape == (0, 8)


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(p=0.0), ValueError, "'p'"),
    (dict(num_spectral_points=7), ValueError,
     "'num_spectral_points' must be even"),
    (dict(num_spectral_points=0), ValueError, "'num_spectral_points'"),
    (dict(prior_scale=-1.0), ValueError, "'prior_scale'"),
    (dict(num_samples=0), ValueError, "'num_samples'"),
    (dict(heads=0), ValueError, "MIKANConv: 'heads'"),
])
def test_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        MIKANConv(4, 3, **kwargs)


def test_bad_inputs():
    conv = MIKANConv(4, 3, heads=2)
    x, edge_index = random_graph(5, 10, 4, seed=10)
    with pytest.raises(ValueError, match='2-D'):
        conv(x[0], edge_index)
    with pytest.raises(ValueError, match='out of range'):
        conv(x, edge_index + 10)
    with pytest.raises(ValueError, match='edge_dim=None'):
        conv(x, edge_index, torch.randn(10, 2))
    with pytest.raises(ValueError, match="'batch' has 3 entries"):
        conv(x, edge_index, batch=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match='sorted'):
        conv(x, edge_index, batch=torch.tensor([1, 1, 0, 0, 0]))


@pytest.mark.parametrize('p', [0.1, 0.5, 1.0, 2.0, 4.0])
def test_no_nan_for_large_features_and_small_p(p):
    torch.manual_seed(1)
    conv = MIKANConv(6, 8, heads=2, p=p)
    x, edge_index = random_graph(20, 60, 6, seed=11)
    x = (1e3 * x).requires_grad_()
    out = conv(x, edge_index)
    assert torch.isfinite(out).all()
    (out.square().mean() + conv.kl_divergence()).backward()
    assert torch.isfinite(x.grad).all()
    for name, parameter in conv.named_parameters():
        assert torch.isfinite(parameter.grad).all(), name


@pytest.mark.slow
def test_two_layer_mikan_learns_cora(cora):
    from ikgat.models import TwoLayerGAT
    from ikgat.training import train_node_classifier

    torch.manual_seed(0)
    model = TwoLayerGAT(cora.num_features, 8, cora.num_classes, MIKANConv)
    result = train_node_classifier(model, cora[0], epochs=100, patience=100,
                                   beta=0.1)
    print(f'MIKAN Cora smoke: val {result.val_acc:.3f} '
          f'test {result.test_acc:.3f}')
    assert result.test_acc > 0.75


def test_deepcopy_and_pickle_after_a_forward_pass():
    import io
    conv = make_mikan().eval()
    x, edge_index = random_graph(10, 30, 6, seed=12)
    out = conv(x, edge_index)
    twin = copy.deepcopy(conv)
    assert torch.equal(twin(x, edge_index), out)
    buffer = io.BytesIO()
    torch.save(conv, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert torch.equal(loaded(x, edge_index), out)
