import pytest
import torch
from torch_geometric.nn import GATConv
from torch_geometric.utils import coalesce, scatter, to_torch_coo_tensor

import ikgat.nn.conv.ikgat_conv as ikgat_conv_module
from ikgat import IKGATConv, MIKANConv
from ikgat.kernels import KERNELS, RBFKernel
from tests.helpers import edge_wise_reference, random_graph

KERNEL_NAMES = sorted(KERNELS)


def tied_pair(in_channels, out_channels, seed=0, **kwargs):
    torch.manual_seed(seed)
    gat = GATConv(in_channels, out_channels, **kwargs)
    conv = IKGATConv(in_channels, out_channels, kernel='rbf', p=2.0, **kwargs)
    result = conv.load_state_dict(gat.state_dict(), strict=False)
    assert not result.missing_keys and not result.unexpected_keys
    return gat, conv


# ----------------------------------------------------------------- exactness


@pytest.mark.parametrize('heads', [1, 8])
@pytest.mark.parametrize('negative_slope', [0.2, 0.01])
@pytest.mark.parametrize('concat', [True, False])
def test_rbf_p2_equals_gatconv_on_random_graphs(heads, negative_slope,
                                                concat):
    x, edge_index = random_graph(40, 160, 12, seed=heads)
    gat, conv = tied_pair(12, 6, heads=heads, negative_slope=negative_slope,
                          concat=concat)
    out_gat, (ei_gat, alpha_gat) = gat(x, edge_index,
                                       return_attention_weights=True)
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert torch.equal(ei, ei_gat)
    assert (alpha - alpha_gat).abs().max() < 1e-5
    assert (out - out_gat).abs().max() < 1e-5


def test_rbf_p2_equals_gatconv_residual_and_edge_features():
    x, edge_index = random_graph(30, 120, 10, seed=3)
    edge_attr = torch.randn(edge_index.size(1), 5)
    gat, conv = tied_pair(10, 4, heads=4, residual=True, edge_dim=5)
    out_gat, (_, alpha_gat) = gat(x, edge_index, edge_attr,
                                  return_attention_weights=True)
    out, (_, alpha) = conv(x, edge_index, edge_attr,
                           return_attention_weights=True)
    assert (alpha - alpha_gat).abs().max() < 1e-5
    assert (out - out_gat).abs().max() < 1e-5


def test_rbf_p2_equals_gatconv_on_torch_sparse_adjacency():
    x, edge_index = random_graph(25, 90, 8, seed=4)
    edge_index = coalesce(edge_index)  # a sparse matrix merges duplicates
    adj_t = to_torch_coo_tensor(edge_index.flip(0), size=(25, 25))
    gat, conv = tied_pair(8, 4, heads=2)
    out_gat, (adj_gat, alpha_gat) = gat(x, adj_t,
                                        return_attention_weights=True)
    out, (adj, alpha) = conv(x, adj_t, return_attention_weights=True)
    assert adj.is_sparse and adj.shape == adj_gat.shape
    assert (alpha - alpha_gat).abs().max() < 1e-5
    assert (out - out_gat).abs().max() < 1e-5
    assert (conv(x, edge_index) - out).abs().max() < 1e-5


@pytest.mark.parametrize('with_dst', [True, False])
def test_rbf_p2_equals_gatconv_bipartite(with_dst):
    x_src, _ = random_graph(20, 0, 7, seed=5)
    x_dst, _ = random_graph(12, 0, 5, seed=6)
    _, edge_index = random_graph(20, 70, 1, seed=7, num_dst=12)
    gat, conv = tied_pair((7, 5), 4, heads=3, add_self_loops=False)
    inputs = (x_src, x_dst if with_dst else None)
    size = None if with_dst else (20, 12)
    out_gat = gat(inputs, edge_index, size=size)
    out = conv(inputs, edge_index, size=size)
    assert out.shape == out_gat.shape == (12, 12)
    assert (out - out_gat).abs().max() < 1e-5


def test_rbf_p2_equals_gatconv_on_cora(cora):
    data = cora[0]
    gat, conv = tied_pair(cora.num_features, 8, heads=8)
    out_gat, (_, alpha_gat) = gat(data.x, data.edge_index,
                                  return_attention_weights=True)
    out, (_, alpha) = conv(data.x, data.edge_index,
                           return_attention_weights=True)
    assert (alpha - alpha_gat).abs().max() < 1e-5
    assert (out - out_gat).abs().max() < 1e-5


def test_gatconv_state_dict_starts_a_trained_gat():
    gat, conv = tied_pair(6, 3, heads=2)
    for name, value in gat.state_dict().items():
        assert torch.equal(conv.state_dict()[name], value)


# ------------------------------------------------------------ factorisation


@pytest.mark.parametrize('kernel', KERNEL_NAMES)
@pytest.mark.parametrize('p', [1.0, 2.0, 3.0])
def test_fast_path_equals_edge_wise_evaluation(kernel, p):
    torch.manual_seed(0)
    x, edge_index = random_graph(30, 100, 9, seed=8)
    conv = IKGATConv(9, 5, heads=3, kernel=kernel, num_spectral_points=16, p=p,
                     add_self_loops=False)
    out, (_, alpha) = conv(x, edge_index, return_attention_weights=True)
    ref_out, ref_alpha = edge_wise_reference(conv, x, edge_index)
    assert (alpha - ref_alpha).abs().max() < 1e-5
    assert (out - ref_out).abs().max() < 1e-5


@pytest.mark.parametrize('kernel', ['direct', 'poly'])
def test_fast_path_equals_edge_wise_with_edge_features_and_bipartite(kernel):
    torch.manual_seed(1)
    x_src, _ = random_graph(15, 0, 6, seed=9)
    x_dst, _ = random_graph(10, 0, 4, seed=10)
    _, edge_index = random_graph(15, 60, 1, seed=11, num_dst=10)
    edge_attr = torch.randn(60, 3)
    conv = IKGATConv((6, 4), 5, heads=2, kernel=kernel, edge_dim=3,
                     add_self_loops=False, concat=False, p=2.5)
    out, (_, alpha) = conv((x_src, x_dst), edge_index, edge_attr,
                           return_attention_weights=True)
    ref_out, ref_alpha = edge_wise_reference(conv, (x_src, x_dst),
                                             edge_index, edge_attr)
    assert (alpha - ref_alpha).abs().max() < 1e-5
    assert (out - ref_out).abs().max() < 1e-5


def test_decomposition_reassembles_the_attention():
    torch.manual_seed(2)
    x, edge_index = random_graph(20, 80, 6, seed=12)
    conv = IKGATConv(6, 4, heads=2, kernel='direct', p=3.0, edge_dim=2)
    edge_attr = torch.randn(80, 2)
    conv.eval()
    _, (ei, alpha) = conv(x, edge_index, edge_attr,
                          return_attention_weights=True)
    parts = conv.attention_decomposition(x, edge_index, edge_attr)
    assert torch.equal(parts.edge_index, ei)
    assert (parts.alpha - alpha).abs().max() < 1e-6
    ref_out, ref_alpha = edge_wise_reference(conv, x, ei, _self_loop_attr(
        conv, edge_index, edge_attr))
    assert (parts.alpha - ref_alpha).abs().max() < 1e-5
    # The magnitude includes |q_i|^2 / 2, which the fast path drops:
    src, dst = ei
    norm = lambda v: (v.abs()**3).sum(-1)**(2 / 3)  # noqa: E731
    xw = conv.lin(x).view(-1, 2, 4)
    a = torch.cat([conv.att_dst, conv.att_src], -1)[0]
    c_positive = norm(a) + norm(xw[dst]) / 2 + norm(xw[src]) / 2
    c_negative = 0.04 * norm(a) + norm(xw[dst]) / 2 + norm(xw[src]) / 2
    is_positive = (parts.log_magnitude - c_positive).abs() < 1e-5
    is_negative = (parts.log_magnitude - c_negative).abs() < 1e-5
    assert (is_positive | is_negative).all()
    assert is_positive.any() and is_negative.any()


def _self_loop_attr(conv, edge_index, edge_attr):
    from torch_geometric.utils import add_self_loops, remove_self_loops
    edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
    return add_self_loops(edge_index, edge_attr, fill_value='mean',
                          num_nodes=20)[1]


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize('kernel', KERNEL_NAMES)
def test_gradcheck(kernel):
    torch.manual_seed(3)
    x, edge_index = random_graph(6, 14, 4, seed=13)
    kernel_kwargs = {'hidden_channels': 3} if kernel == 'implicit' else None
    conv = IKGATConv(4, 3, heads=2, kernel=kernel, num_spectral_points=4,
                     p=2.5, edge_dim=2,
                     kernel_kwargs=kernel_kwargs).double()
    edge_attr = torch.randn(14, 2, dtype=torch.double)
    names = [name for name, _ in conv.named_parameters()]
    values = tuple(
        p.detach().clone().requires_grad_() for p in conv.parameters())

    def function(x, *params):
        torch.manual_seed(0)  # the same draw of a variational kernel
        state = dict(zip(names, params))
        return torch.func.functional_call(conv, state,
                                          (x, edge_index, edge_attr))

    x = x.double().requires_grad_()
    assert torch.autograd.gradcheck(function, (x, ) + values, eps=1e-6,
                                    atol=1e-5, fast_mode=True)


# ----------------------------------------------------------------- contract


def test_repr_and_shapes():
    conv = IKGATConv(8, 32, heads=2)
    assert str(conv) == 'IKGATConv(8, 32, heads=2)'
    x, edge_index = random_graph(10, 30, 8, seed=14)
    assert conv(x, edge_index).shape == (10, 64)
    conv = IKGATConv(8, 32, heads=2, concat=False, residual=True)
    assert conv(x, edge_index).shape == (10, 32)
    lazy = IKGATConv(-1, 4, heads=3)
    assert lazy(x, edge_index).shape == (10, 12)


@pytest.mark.parametrize('kernel', KERNEL_NAMES)
def test_attention_sums_to_one_over_incoming_edges(kernel):
    x, edge_index = random_graph(25, 80, 5, seed=15)
    conv = IKGATConv(5, 4, heads=3, kernel=kernel, p=1.5)
    _, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    sums = scatter(alpha, ei[1], 0, dim_size=25)
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)
    assert (alpha >= 0).all()


@pytest.mark.parametrize('add_self_loops', [True, False])
def test_empty_graphs(add_self_loops):
    conv = IKGATConv(4, 3, heads=2, add_self_loops=add_self_loops,
                     residual=True)
    empty_edges = torch.empty(2, 0, dtype=torch.long)
    x = torch.randn(5, 4)
    out, (ei, alpha) = conv(x, empty_edges, return_attention_weights=True)
    assert out.shape == (5, 6) and torch.isfinite(out).all()
    assert alpha.shape == (ei.size(1), 2)
    if not add_self_loops:
        assert torch.allclose(out, conv.res(x) + conv.bias)
    out = conv(torch.empty(0, 4), empty_edges)
    assert out.shape == (0, 6)
    out.sum().backward()


def test_isolated_nodes_and_self_loops_as_gatconv():
    edge_index = torch.tensor([[0, 1, 2, 2, 3], [1, 0, 2, 0, 1]])
    x = torch.randn(6, 4)  # nodes 4 and 5 are isolated
    gat, conv = tied_pair(4, 2, heads=2)
    out_gat, (ei_gat, _) = gat(x, edge_index, return_attention_weights=True)
    out, (ei, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert torch.equal(ei, ei_gat)  # existing self-loop replaced, as GAT
    assert (out - out_gat).abs().max() < 1e-5
    isolated = ei[1] >= 4
    assert torch.allclose(alpha[isolated], torch.ones(2, 2))
    conv.add_self_loops = False
    out = conv(x, edge_index)
    assert torch.allclose(out[4:], conv.bias.expand(2, -1))


@pytest.mark.parametrize('kernel', ['direct', 'rff', 'rbf'])
def test_state_dict_round_trip(kernel):
    x, edge_index = random_graph(12, 40, 5, seed=16)
    conv = IKGATConv(5, 4, heads=2, kernel=kernel).eval()
    other = IKGATConv(5, 4, heads=2, kernel=kernel).eval()
    assert not torch.equal(conv(x, edge_index), other(x, edge_index))
    other.load_state_dict(conv.state_dict())
    assert torch.equal(conv(x, edge_index), other(x, edge_index))


def test_redraw_spectral_points():
    x, edge_index = random_graph(12, 40, 5, seed=17)
    conv = IKGATConv(5, 4, heads=2, kernel='rff')
    before = conv(x, edge_index)
    conv.redraw_spectral_points(torch.Generator().manual_seed(0))
    assert not torch.equal(before, conv(x, edge_index))
    with pytest.raises(TypeError, match='no spectral points'):
        IKGATConv(5, 4, kernel='rbf').redraw_spectral_points()


def test_dropout_only_in_training():
    x, edge_index = random_graph(12, 40, 5, seed=18)
    conv = IKGATConv(5, 4, heads=2, dropout=0.5)
    conv.eval()
    assert torch.equal(conv(x, edge_index), conv(x, edge_index))
    conv.train()
    assert not torch.equal(conv(x, edge_index), conv(x, edge_index))


def test_kernel_instance_and_kwargs():
    conv = IKGATConv(5, 4, heads=2, kernel=RBFKernel(2, 4, lengthscale=3.0))
    assert conv.kernel.lengthscale == 3.0
    conv = IKGATConv(5, 4, heads=2, kernel='rbf',
                     kernel_kwargs={'lengthscale': 2.0})
    assert conv.kernel.lengthscale == 2.0
    assert not IKGATConv(5, 4, kernel='rbf_only').magnitude


def test_attention_explainer_sees_kernel_attention():
    from torch_geometric.explain import Explainer
    from torch_geometric.explain.algorithm import AttentionExplainer

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = IKGATConv(5, 4, heads=2)
            self.conv2 = IKGATConv(8, 3, heads=1)

        def forward(self, x, edge_index):
            return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

    x, edge_index = random_graph(15, 50, 5, seed=19)
    explainer = Explainer(
        Net(), algorithm=AttentionExplainer(), explanation_type='model',
        edge_mask_type='object', model_config=dict(
            mode='multiclass_classification', task_level='node',
            return_type='raw'))
    explanation = explainer(x, edge_index, index=3)
    mask = explanation.edge_mask
    assert mask.shape == (50, ) and (mask >= 0).all() and mask.sum() > 0


@pytest.mark.slow
@pytest.mark.parametrize('add_self_loops', [False, True])
def test_torch_compile_matches_eager(add_self_loops):
    torch.manual_seed(4)
    x, edge_index = random_graph(20, 60, 6, seed=20)
    conv = IKGATConv(6, 4, heads=2, kernel='direct',
                     add_self_loops=add_self_loops).eval()
    expected = conv(x, edge_index)
    # Without self-loops GATConv compiles without graph breaks, so must we;
    # adding self-loops breaks the graph in PyG's remove_self_loops for both.
    compiled = torch.compile(conv, fullgraph=not add_self_loops)
    assert torch.allclose(compiled(x, edge_index), expected, atol=1e-5)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize('kwargs, error, match', [
    (dict(p=0.0), ValueError, "'p'.*0.0"),
    (dict(p=-1.0), ValueError, "'p'.*-1.0"),
    (dict(num_spectral_points=0), ValueError, "'num_spectral_points'.*0"),
    (dict(kernel='gaussian'), ValueError, "'gaussian'"),
    (dict(kernel=3), TypeError, 'int'),
    (dict(heads=0), ValueError, "'heads'.*0"),
    (dict(dropout=1.5), ValueError, "'dropout'.*1.5"),
])
def test_bad_options(kwargs, error, match):
    with pytest.raises(error, match=match):
        IKGATConv(4, 3, **kwargs)


def test_bad_inputs():
    conv = IKGATConv(4, 3, heads=2)
    x, edge_index = random_graph(5, 10, 4, seed=21)
    with pytest.raises(ValueError, match=r'2-D.*\(5, 4, 1\)'):
        conv(x.unsqueeze(-1), edge_index)
    with pytest.raises(ValueError, match='7 features.*in_channels=4'):
        conv(torch.randn(5, 7), edge_index)
    with pytest.raises(TypeError, match='integer.*float32'):
        conv(x, edge_index.float())
    with pytest.raises(ValueError, match=r'\[2, num_edges\].*\(10, 2\)'):
        conv(x, edge_index.t())
    with pytest.raises(ValueError, match='index 9, out of range for 5'):
        conv(x, torch.tensor([[0, 9], [1, 2]]))
    with pytest.raises(ValueError, match='index -1'):
        conv(x, torch.tensor([[0, 1], [-1, 2]]))
    with pytest.raises(ValueError, match='edge_dim=None.*edge_dim=3'):
        conv(x, edge_index, torch.randn(10, 3))
    with pytest.raises(ValueError, match=r'sparse adjacency.*\[5, 4\]'):
        conv(x, torch.zeros(5, 4).to_sparse())
    with pytest.raises(TypeError, match='floating'):
        conv(x.long(), edge_index)
    edge_conv = IKGATConv(4, 3, edge_dim=2)
    with pytest.raises(ValueError, match=r'\[num_edges, 2\]'):
        edge_conv(x, edge_index, torch.randn(10, 5))
    with pytest.raises(ValueError, match='7 rows.*10 edges'):
        edge_conv(x, edge_index, torch.randn(7, 2))


@pytest.mark.parametrize('kernel', KERNEL_NAMES)
@pytest.mark.parametrize('p', [0.1, 0.5, 1.0, 2.0, 4.0])
def test_no_nan_for_large_features_and_any_p(kernel, p):
    torch.manual_seed(5)
    x, edge_index = random_graph(20, 60, 6, seed=22)
    edge_index[:, :5] = torch.tensor([[7] * 5, [7] * 5])  # self-loops too
    conv = IKGATConv(6, 8, heads=2, kernel=kernel, p=p)
    x = (1e3 * x).requires_grad_()
    out, (_, alpha) = conv(x, edge_index, return_attention_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(alpha).all()
    out.square().mean().backward()
    assert torch.isfinite(x.grad).all()
    for name, parameter in conv.named_parameters():
        assert torch.isfinite(parameter.grad).all(), name
    zero_row = torch.zeros(3, 6, requires_grad=True)
    out = conv(zero_row, torch.tensor([[0, 1], [1, 2]]))
    out.sum().backward()
    assert torch.isfinite(zero_row.grad).all()


# ------------------------------------------------------- lean aggregation


def count_lean_calls(monkeypatch):
    calls = []
    lean = ikgat_conv_module.attention_aggregate

    def counting(*args, **kwargs):
        calls.append(1)
        return lean(*args, **kwargs)

    monkeypatch.setattr(ikgat_conv_module, 'attention_aggregate', counting)
    return calls


def both_paths(conv, monkeypatch, *args, **kwargs):
    """Output, attention weights and all gradients (parameters and inputs)
    of one forward+backward through the lean aggregation, then through
    PyG's propagate; the same seed gives both the same dropout masks."""
    calls = count_lean_calls(monkeypatch)
    inputs = [t for t in args if torch.is_tensor(t) and t.is_floating_point()]
    if isinstance(args[0], tuple):
        inputs += [t for t in args[0] if t is not None]
    results = []
    for lean in (True, False):
        conv.lean_aggregation = lean
        conv.zero_grad()
        for tensor in inputs:
            tensor.grad = None
        torch.manual_seed(7)
        out, (_, alpha) = conv(*args, return_attention_weights=True,
                               **kwargs)
        out.backward(torch.linspace(-1, 1, out.numel()).view_as(out))
        grads = [p.grad.clone() for p in conv.parameters()
                 if p.grad is not None]
        grads += [t.grad.clone() for t in inputs]
        results.append((out.detach(), alpha.detach(), grads))
    del conv.lean_aggregation
    assert len(calls) == 1  # the first pass was lean, the second was not
    return results


@pytest.mark.parametrize('kernel', ['direct', 'rbf', 'rff'])
@pytest.mark.parametrize('concat', [True, False])
@pytest.mark.parametrize('add_self_loops', [True, False])
def test_lean_aggregation_equals_propagate(monkeypatch, kernel, concat,
                                           add_self_loops):
    torch.manual_seed(8)
    x, edge_index = random_graph(40, 200, 6, seed=23)
    edge_index[:, :6] = torch.tensor([[3] * 6, [3] * 6])  # self-loops too
    edge_attr = torch.randn(200, 3)
    conv = IKGATConv(6, 5, heads=3, kernel=kernel, num_spectral_points=8,
                     concat=concat, add_self_loops=add_self_loops,
                     edge_dim=3, residual=True, dropout=0.3)
    x = x.requires_grad_()
    edge_attr = edge_attr.requires_grad_()
    (out, alpha, grads), (ref_out, ref_alpha, ref_grads) = both_paths(
        conv, monkeypatch, x, edge_index, edge_attr)
    assert torch.equal(alpha, ref_alpha)
    assert (out - ref_out).abs().max() < 1e-6
    assert len(grads) == len(ref_grads) == len(list(conv.parameters())) + 2
    for grad, ref_grad in zip(grads, ref_grads):
        assert (grad - ref_grad).abs().max() < 1e-5 * (1 +
                                                      ref_grad.abs().max())


@pytest.mark.parametrize('with_dst', [True, False])
def test_lean_aggregation_equals_propagate_bipartite(monkeypatch, with_dst):
    torch.manual_seed(9)
    x_src, _ = random_graph(20, 0, 7, seed=24)
    x_dst, _ = random_graph(12, 0, 5, seed=25)
    _, edge_index = random_graph(20, 70, 1, seed=26, num_dst=12)
    conv = IKGATConv((7, 5), 4, heads=2, add_self_loops=False)
    x_src.requires_grad_()
    inputs = (x_src, x_dst.requires_grad_() if with_dst else None)
    size = None if with_dst else (20, 12)
    (out, _, grads), (ref_out, _, ref_grads) = both_paths(
        conv, monkeypatch, inputs, edge_index, size=size)
    assert out.shape == ref_out.shape == (12, 8)
    assert (out - ref_out).abs().max() < 1e-6
    for grad, ref_grad in zip(grads, ref_grads):
        assert (grad - ref_grad).abs().max() < 1e-5


def test_lean_aggregation_equals_propagate_mikan(monkeypatch):
    x, edge_index = random_graph(30, 120, 6, seed=27)
    torch.manual_seed(10)
    conv = MIKANConv(6, 4, heads=3, num_spectral_points=8)
    x.requires_grad_()
    (out, _, grads), (ref_out, _, ref_grads) = both_paths(
        conv, monkeypatch, x, edge_index)
    assert (out - ref_out).abs().max() < 1e-6
    for grad, ref_grad in zip(grads, ref_grads):
        assert (grad - ref_grad).abs().max() < 1e-5


def test_lean_aggregation_only_where_propagate_would_just_sum(monkeypatch):
    calls = count_lean_calls(monkeypatch)
    x, edge_index = random_graph(15, 50, 5, seed=28)
    conv = IKGATConv(5, 4, heads=2)
    expected = conv(x, edge_index)
    assert len(calls) == 1
    # A sparse adjacency keeps PyG's path:
    adj_t = to_torch_coo_tensor(coalesce(edge_index).flip(0), size=(15, 15))
    conv(x, adj_t)
    assert len(calls) == 1
    # Hooks see PyG's messages:
    seen = []
    handle = conv.register_message_forward_pre_hook(
        lambda module, inputs: seen.append(inputs[0]['alpha']))
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-6)
    assert len(calls) == 1 and len(seen) == 1
    handle.remove()
    # Explain mode (edge masks):
    from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
    set_masks(conv, torch.zeros(50), edge_index)  # sigmoid(0) on each edge
    masked = conv(x, edge_index)
    assert len(calls) == 1
    assert not torch.allclose(masked, expected, atol=1e-3)
    clear_masks(conv)
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-6)
    assert len(calls) == 2


def test_each_kernel_has_its_own_default_number_of_spectral_points():
    # 'direct' (the default kernel) at R = 16, the other kernels at 64;
    # a given R wins, and a kernel without spectral points has none:
    assert IKGATConv(5, 4, heads=2).kernel.num_spectral_points == 16
    assert IKGATConv(5, 4, heads=2).num_spectral_points == 16
    for kernel in ('rff', 'rff_ns', 'implicit'):
        conv = IKGATConv(5, 4, heads=2, kernel=kernel)
        assert conv.kernel.num_spectral_points == 64, kernel
        assert conv.num_spectral_points == 64, kernel
    conv = IKGATConv(5, 4, heads=2, num_spectral_points=32)
    assert conv.kernel.num_spectral_points == conv.num_spectral_points == 32
    assert IKGATConv(5, 4, kernel='rbf').num_spectral_points is None
    assert MIKANConv(5, 4, heads=2).kernel.num_spectral_points == 64
    with pytest.raises(ValueError, match="'num_spectral_points'.*got 0"):
        IKGATConv(5, 4, num_spectral_points=0)


def test_a_state_dict_of_another_r_names_the_r_to_build():
    # A layer saved with the former default (R = 64) loaded into one built
    # with today's (16): the error says which layer to build.
    saved = IKGATConv(5, 4, heads=2, num_spectral_points=64).state_dict()
    with pytest.raises(RuntimeError, match='num_spectral_points=64'):
        IKGATConv(5, 4, heads=2).load_state_dict(saved)
    IKGATConv(5, 4, heads=2, num_spectral_points=64).load_state_dict(saved)


@pytest.mark.parametrize('layer', ['ikgat', 'mikan'])
def test_num_features_is_a_deprecated_name_of_num_spectral_points(layer):
    cls = IKGATConv if layer == 'ikgat' else MIKANConv
    kwargs = dict(kernel='direct') if layer == 'ikgat' else {}
    torch.manual_seed(0)
    new = cls(5, 4, heads=2, num_spectral_points=8, **kwargs)
    torch.manual_seed(0)
    with pytest.warns(DeprecationWarning, match="'num_features'.*"
                      "num_spectral_points=8"):
        old = cls(5, 4, heads=2, num_features=8, **kwargs)
    assert old.num_spectral_points == new.num_spectral_points == 8
    assert old.kernel.num_spectral_points == 8
    for key, value in new.state_dict().items():
        assert torch.equal(old.state_dict()[key], value), key
    with pytest.warns(DeprecationWarning, match='num_spectral_points'):
        assert old.num_features == 8
    with pytest.raises(TypeError, match="both 'num_spectral_points=16'"):
        cls(5, 4, num_spectral_points=16, num_features=8, **kwargs)


def test_kernel_capabilities_are_declared():
    # The layer reads the flags; a kernel without a capability says so.
    for name, kernel_class in KERNELS.items():
        conv = IKGATConv(5, 4, heads=2, kernel=name, num_spectral_points=4)
        assert isinstance(conv.kernel, kernel_class)
        if kernel_class.has_spectral_points:
            x, edge_index = random_graph(6, 12, 5, seed=1)
            conv(x, edge_index)
            for points in conv.spectral_points():
                assert points.shape[1:] == (2, 4, 8)
            assert conv.kernel.num_spectral_points == 4
        else:
            with pytest.raises(TypeError, match='no spectral points'):
                conv.spectral_points()
        if not kernel_class.can_redraw:
            with pytest.raises(TypeError, match='no spectral points'):
                conv.redraw_spectral_points()
        if not kernel_class.has_kl:
            assert conv.kl_divergence().item() == 0.0


# ------------------------------------------- the fast-path dispatch rules


def lean_choice(conv, *args, **kwargs):
    """(edge softmax lean, aggregation lean) of one forward pass."""
    import ikgat.nn.conv.ikgat_conv as module
    used = {'softmax': False, 'aggregate': False}
    softmax, aggregate = module.kernel_edge_softmax, module.attention_aggregate

    def counting_softmax(*a, **k):
        used['softmax'] = True
        return softmax(*a, **k)

    def counting_aggregate(*a, **k):
        used['aggregate'] = True
        return aggregate(*a, **k)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, 'kernel_edge_softmax', counting_softmax)
        patch.setattr(module, 'attention_aggregate', counting_aggregate)
        conv(*args, **kwargs)
    return used['softmax'], used['aggregate']


def test_dispatch_rule_switches():
    x, edge_index = random_graph(10, 30, 5, seed=40)
    conv = IKGATConv(5, 4, heads=2)
    assert lean_choice(conv, x, edge_index) == (True, True)
    conv.lean_edge_softmax = False
    assert lean_choice(conv, x, edge_index) == (False, True)
    conv.lean_aggregation = False
    assert lean_choice(conv, x, edge_index) == (False, False)
    del conv.lean_edge_softmax, conv.lean_aggregation
    assert lean_choice(conv, x, edge_index) == (True, True)


def test_dispatch_rule_plain_tensor_edge_index():
    from torch_geometric import EdgeIndex
    x, edge_index = random_graph(10, 30, 5, seed=41)
    conv = IKGATConv(5, 4, heads=2, add_self_loops=False)
    adj = to_torch_coo_tensor(coalesce(edge_index).flip(0), size=(10, 10))
    assert lean_choice(conv, x, adj) == (False, False)
    typed = EdgeIndex(edge_index, sparse_size=(10, 10))
    assert lean_choice(conv, x, typed) == (False, False)


def test_dispatch_rule_explain_and_flow():
    x, edge_index = random_graph(10, 30, 5, seed=42)
    conv = IKGATConv(5, 4, heads=2)
    from torch_geometric.explain.algorithm.utils import clear_masks, set_masks
    set_masks(conv, torch.zeros(30), edge_index)  # explain mode
    assert conv.explain
    assert lean_choice(conv, x, edge_index) == (False, False)
    clear_masks(conv)
    assert lean_choice(conv, x, edge_index) == (True, True)
    flipped = IKGATConv(5, 4, heads=2, flow='target_to_source')
    assert lean_choice(flipped, x, edge_index) == (False, False)


def test_dispatch_rule_aggregation_and_decomposition():
    x, edge_index = random_graph(10, 30, 5, seed=43)
    assert lean_choice(IKGATConv(5, 4, aggr='mean'), x,
                       edge_index) == (True, False)
    # (PyG's decomposition cannot chunk the (x_src, x_dst) pair IKGATConv
    # propagates, so only the rule itself is checked:)
    conv = IKGATConv(5, 4, decomposed_layers=2)
    route = conv._route(edge_index, x)
    assert route.lean_softmax and not route.lean_aggregation


@pytest.mark.parametrize('step,choice', [
    ('propagate_forward_pre', (True, False)),
    ('propagate_forward', (True, False)),
    ('message_forward_pre', (True, False)),
    ('message_forward', (True, False)),
    ('aggregate_forward_pre', (True, False)),
    ('aggregate_forward', (True, False)),
    ('message_and_aggregate_forward_pre', (True, False)),
    ('message_and_aggregate_forward', (True, False)),
    ('edge_update_forward_pre', (False, True)),
    ('edge_update_forward', (False, True)),
])
def test_dispatch_rule_hooks(step, choice):
    x, edge_index = random_graph(10, 30, 5, seed=44)
    conv = IKGATConv(5, 4, heads=2)
    handle = getattr(conv, f'register_{step}_hook')(lambda *args: None)
    assert lean_choice(conv, x, edge_index) == choice
    handle.remove()
    assert lean_choice(conv, x, edge_index) == (True, True)
    with getattr(conv, f'register_{step}_hook')(lambda *args: None):
        assert lean_choice(conv, x, edge_index) == choice
    assert lean_choice(conv, x, edge_index) == (True, True)


def test_dispatch_rule_subclasses_that_override_a_step():
    x, edge_index = random_graph(10, 30, 5, seed=45)

    class OwnMessage(IKGATConv):
        def message(self, x_j, alpha):
            return 2 * super().message(x_j, alpha)

    class OwnEdgeUpdate(IKGATConv):
        def edge_update(self, score_j, score_i, score_dst_shared,
                        edge_attr, index, ptr, dim_size):
            return super().edge_update(score_j, score_i, score_dst_shared,
                                       edge_attr, index, ptr, dim_size)

    class OwnMessageStillLean(OwnMessage):
        lean_aggregation = True  # the subclass vouches for it

    assert not OwnMessage.lean_aggregation and OwnMessage.lean_edge_softmax
    assert lean_choice(OwnMessage(5, 4), x, edge_index) == (True, False)
    assert lean_choice(OwnEdgeUpdate(5, 4), x, edge_index) == (False, True)
    assert lean_choice(OwnMessageStillLean(5, 4), x,
                       edge_index) == (True, True)
    assert lean_choice(MIKANConv(5, 4, num_spectral_points=4), x,
                       edge_index) == (True, True)

    # A step from a mixin, or assigned to the layer, turns the path off as
    # well:
    class DoubledMessage:
        def message(self, x_j, alpha):
            return 2 * super().message(x_j, alpha)

    class FromMixin(DoubledMessage, IKGATConv):
        pass

    assert lean_choice(FromMixin(5, 4), x, edge_index) == (True, False)
    conv = IKGATConv(5, 4)
    conv.edge_update = conv.edge_update  # a bound method on the layer
    assert lean_choice(conv, x, edge_index) == (False, True)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize('negative_slope', [0.2, 0.01, 0.0, 1 / 3, 1.7])
def test_slopes_are_exactly_one_and_the_negative_slope(dtype,
                                                       negative_slope):
    conv = IKGATConv(4, 3, heads=2, negative_slope=negative_slope).to(dtype)
    x = torch.randn(5, 2, 3, dtype=dtype)
    slopes = conv._accumulation_inputs(x, None)[3]
    assert torch.equal(slopes, torch.tensor([1.0, negative_slope],
                                            dtype=dtype))


def test_promote_types_skips_only_what_changes_nothing():
    from ikgat.ops.dtypes import promote_types
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16,
              torch.int64, torch.int32, torch.bool, torch.complex64]
    for first in dtypes:
        for second in dtypes:
            assert (promote_types(first, second)
                    == torch.promote_types(first, second)), (first, second)
