"""IKTransformerConv and MIKANTransformerConv: TransformerConv's function
with the RBF kernel, an edge-wise reference for every vector kernel,
gradients, batches of graphs, bad inputs, compile and the meta device, and
the registrations that take the layers as IKGATConv is taken (train
entries, checkpoints, inspection, the KL of a model)."""
import itertools

import pytest
import torch
from torch_geometric.nn import GPSConv, TransformerConv
from torch_geometric.typing import WITH_TORCH_SPARSE, SparseTensor
from torch_geometric.utils import to_torch_coo_tensor

from ikgat import IKTransformerConv, MIKANTransformerConv
from ikgat.kernels import Kernel, RBFKernel, vector_kernels
from ikgat.nn import graph_batch, kl_divergence
from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.runtime import triton_usable
from tests.helpers import (
    DEVICE,
    NoHostTensors,
    fast_few,
    needs_torch_sparse,
    require,
)

META = torch.device('meta')
CPU = torch.device('cpu')


def graph(num_src=7, num_dst=None, channels=5, edge_dim=None, seed=0):
    """A random graph with isolated nodes (the last source and the last
    target have no edge) and repeated edges."""
    generator = torch.Generator().manual_seed(seed)
    num_dst = num_src if num_dst is None else num_dst
    src = torch.randint(0, num_src - 1, (12, ), generator=generator)
    dst = torch.randint(0, num_dst - 1, (12, ), generator=generator)
    edge_index = torch.cat([torch.stack([src, dst]),
                            torch.stack([src[:3], dst[:3]])], dim=1)
    x_src = torch.randn(num_src, channels, generator=generator)
    x_dst = torch.randn(num_dst, channels + 1, generator=generator)
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(edge_index.size(1), edge_dim,
                                generator=generator)
    return x_src, x_dst, edge_index, edge_attr


def pair_of_layers(bipartite, device=CPU, **kwargs):
    in_channels = (5, 6) if bipartite else 5
    torch.manual_seed(0)
    reference = TransformerConv(in_channels, 4, heads=2, **kwargs)
    conv = IKTransformerConv(in_channels, 4, heads=2, kernel='rbf', p=2.0,
                             **kwargs)
    missing, unexpected = conv.load_state_dict(reference.state_dict(),
                                               strict=False)
    assert not unexpected and all(key.startswith('kernel.')
                                  for key in missing)
    return reference.to(device), conv.to(device)


def inputs_of(bipartite, edge_dim, seed=0, device=CPU):
    x_src, x_dst, edge_index, edge_attr = [
        None if t is None else t.to(device)
        for t in graph(edge_dim=edge_dim, seed=seed)]
    x = (x_src, x_dst) if bipartite else x_src
    return x, edge_index, edge_attr


# --------------------------------------------------------------------------
# kernel='rbf', p=2 is TransformerConv
# --------------------------------------------------------------------------

MATRIX = list(itertools.product([False, True], [False, True], [False, True],
                                [None, 3], [False, True]))


#: The fast tier's combinations: each option on and off at least twice (the
#: slow tier: all 32, as benchmarks/results/exactness.md).
FAST_MATRIX = ((False, False, False, None, False), (True, True, True, 3, True),
               (True, False, True, None, False), (False, True, False, 3, True),
               (True, True, False, None, True), (False, False, True, 3, False))


@pytest.mark.parametrize('beta, root_weight, concat, edge_dim, bipartite',
                         fast_few(MATRIX, FAST_MATRIX))
def test_rbf_is_transformer_conv(beta, root_weight, concat, edge_dim,
                                 bipartite):
    reference, conv = pair_of_layers(bipartite, DEVICE, beta=beta,
                                     root_weight=root_weight, concat=concat,
                                     edge_dim=edge_dim)
    x, edge_index, edge_attr = inputs_of(bipartite, edge_dim, device=DEVICE)
    expected, (edges, alpha) = reference(x, edge_index, edge_attr,
                                         return_attention_weights=True)
    out, (our_edges, our_alpha) = conv(x, edge_index, edge_attr,
                                       return_attention_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(our_edges, edges)
    torch.testing.assert_close(our_alpha, alpha, atol=1e-5, rtol=1e-5)
    assert conv(x, edge_index, edge_attr).shape == expected.shape


@pytest.mark.parametrize('edge_dim', [None, 3])
@pytest.mark.parametrize('bipartite', [False, True])
def test_rbf_is_transformer_conv_on_sparse_adjacencies(edge_dim, bipartite):
    reference, conv = pair_of_layers(bipartite, edge_dim=edge_dim)
    x, edge_index, edge_attr = inputs_of(bipartite, edge_dim)
    num_src, num_dst = (x[0].size(0), x[1].size(0)) if bipartite else (
        x.size(0), x.size(0))
    # A torch sparse adj_t; coalescing merges the repeated edges (and sums
    # their features), the same input for both layers:
    coalesced = to_torch_coo_tensor(edge_index.flip(0), edge_attr,
                                    size=(num_dst, num_src)).coalesce()
    sparse_attr = None if edge_attr is None else coalesced.values()
    adj_t = to_torch_coo_tensor(coalesced.indices(), size=(num_dst, num_src))
    expected, (_, alpha) = reference(x, adj_t, sparse_attr,
                                     return_attention_weights=True)
    out, (_, our_alpha) = conv(x, adj_t, sparse_attr,
                               return_attention_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_alpha, alpha, atol=1e-5, rtol=1e-5)


@needs_torch_sparse
@pytest.mark.parametrize('edge_dim', [None, 3])
@pytest.mark.parametrize('bipartite', [False, True])
def test_rbf_is_transformer_conv_on_sparse_tensors(edge_dim, bipartite):
    reference, conv = pair_of_layers(bipartite, edge_dim=edge_dim)
    x, edge_index, edge_attr = inputs_of(bipartite, edge_dim)
    num_src, num_dst = (x[0].size(0), x[1].size(0)) if bipartite else (
        x.size(0), x.size(0))
    row, col = edge_index[1], edge_index[0]
    sparse = SparseTensor(row=row, col=col, value=edge_attr,
                          sparse_sizes=(num_dst, num_src))
    expected, adj = reference(x, sparse, return_attention_weights=True)
    out, our_adj = conv(x, sparse, return_attention_weights=True)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert isinstance(our_adj, SparseTensor)
    torch.testing.assert_close(our_adj.storage.value(), adj.storage.value(),
                               atol=1e-5, rtol=1e-5)
    assert torch.equal(our_adj.storage.row(), adj.storage.row())


@pytest.mark.parametrize('kernel', ['rbf', 'direct'])
@pytest.mark.parametrize('edge_dim', [None, 3])
@pytest.mark.parametrize('bipartite', [False, True])
@pytest.mark.parametrize('adjacency', ['edge_index', 'torch_sparse',
                                       'SparseTensor'])
def test_a_message_hook_runs_propagate_with_the_same_result(
        kernel, edge_dim, bipartite, adjacency):
    """A message hook (as PyG's AttentionExplainer registers) sends the
    messages through PyG's propagate, which calls message with alpha; the
    output equals the chunked aggregation's, and TransformerConv's for rbf."""
    if adjacency == 'SparseTensor':
        require(WITH_TORCH_SPARSE, 'torch-sparse is not installed')
    reference, conv = pair_of_layers(bipartite, edge_dim=edge_dim)
    if kernel != 'rbf':
        torch.manual_seed(0)
        conv = IKTransformerConv((5, 6) if bipartite else 5, 4, heads=2,
                                 kernel=kernel, edge_dim=edge_dim)
    conv.eval()
    x, edge_index, edge_attr = inputs_of(bipartite, edge_dim)
    num_src, num_dst = (x[0].size(0), x[1].size(0)) if bipartite else (
        x.size(0), x.size(0))
    if adjacency == 'torch_sparse':
        coalesced = to_torch_coo_tensor(edge_index.flip(0), edge_attr,
                                        size=(num_dst, num_src)).coalesce()
        edge_attr = None if edge_attr is None else coalesced.values()
        edge_index = to_torch_coo_tensor(coalesced.indices(),
                                         size=(num_dst, num_src))
    elif adjacency == 'SparseTensor':
        edge_index = SparseTensor(row=edge_index[1], col=edge_index[0],
                                  value=edge_attr,
                                  sparse_sizes=(num_dst, num_src))
        edge_attr = None
    lean = conv(x, edge_index, edge_attr)
    seen = []
    handle = conv.register_message_forward_hook(
        lambda module, inputs, out: seen.append(inputs[0]['alpha']))
    hooked, weights = conv(x, edge_index, edge_attr,
                           return_attention_weights=True)
    alpha = (weights.storage.value() if isinstance(weights, SparseTensor)
             else weights[1])
    handle.remove()
    assert len(seen) == 1
    torch.testing.assert_close(seen[0], alpha)
    torch.testing.assert_close(hooked, lean, atol=1e-6, rtol=1e-5)
    if kernel == 'rbf':
        expected = reference.eval()(x, edge_index, edge_attr)
        torch.testing.assert_close(hooked, expected, atol=1e-5, rtol=1e-5)
    seen.clear()
    conv(x, edge_index, edge_attr)  # the hook removed: the lean path
    assert not seen


@pytest.mark.parametrize('aggr', ['mean', 'max', 'min'])
@pytest.mark.parametrize('edge_dim', [None, 3])
@pytest.mark.parametrize('bipartite', [False, True])
def test_other_aggregations_are_transformer_conv(aggr, edge_dim, bipartite):
    """aggr, a MessagePassing keyword TransformerConv passes on, reaches
    the messages (through propagate; the chunked path sums)."""
    reference, conv = pair_of_layers(bipartite, edge_dim=edge_dim,
                                     aggr=aggr)
    x, edge_index, edge_attr = inputs_of(bipartite, edge_dim)
    torch.testing.assert_close(conv(x, edge_index, edge_attr),
                               reference(x, edge_index, edge_attr),
                               atol=1e-5, rtol=1e-5)


def test_switch_and_subclass_rule_of_the_lean_aggregation(monkeypatch):
    """The lean aggregation follows IKGATConv's rules: the switch off on a
    layer, or a subclass that defines a step the path skips (unless it
    sets the switch), sends the messages through propagate, with the same
    result; a propagate hook does too, until it is removed."""
    class OwnMessage(IKTransformerConv):
        def message(self, value_j, alpha, edge_key):
            return super().message(value_j, alpha, edge_key)

    class Vouched(OwnMessage):
        lean_aggregation = True

    class OwnMessageAndAggregate(IKTransformerConv):
        def message_and_aggregate(self, edge_index):
            raise AssertionError('unused: edge_index is a tensor')

    class MessageMixin:
        def message(self, value_j, alpha, edge_key):
            return super().message(value_j, alpha, edge_key)

    class FromMixin(MessageMixin, IKTransformerConv):
        pass

    assert not OwnMessage.lean_aggregation and Vouched.lean_aggregation
    assert not OwnMessageAndAggregate.lean_aggregation
    x, edge_index, _ = inputs_of(False, None)
    torch.manual_seed(0)
    conv = IKTransformerConv(5, 4, heads=2, kernel='direct').eval()
    lean = conv(x, edge_index)
    lean_calls = []  # of the chunked aggregation (else propagate ran)
    original = IKTransformerConv._aggregate
    monkeypatch.setattr(IKTransformerConv, '_aggregate',
                        lambda self, *args: lean_calls.append(1)
                        or original(self, *args))
    for layer_class, lean_path in ((OwnMessage, False), (Vouched, True),
                                   (FromMixin, False)):
        layer = layer_class(5, 4, heads=2, kernel='direct').eval()
        layer.load_state_dict(conv.state_dict())
        lean_calls.clear()
        torch.testing.assert_close(layer(x, edge_index), lean, atol=1e-6,
                                   rtol=1e-5)
        assert len(lean_calls) == lean_path
    conv.lean_aggregation = False
    lean_calls.clear()
    torch.testing.assert_close(conv(x, edge_index), lean, atol=1e-6,
                               rtol=1e-5)
    del conv.lean_aggregation
    with conv.register_propagate_forward_hook(lambda *args: None):
        conv(x, edge_index)
    assert not lean_calls
    conv(x, edge_index)  # switch back on, hook removed: lean again
    assert len(lean_calls) == 1


def test_the_other_flow_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"flow='target_to_source'.*flip"):
        IKTransformerConv(5, 4, flow='target_to_source')


@pytest.mark.parametrize('edge_dim', [None, 3])
def test_rbf_is_transformer_conv_in_training_with_dropout(edge_dim):
    reference, conv = pair_of_layers(False, DEVICE, edge_dim=edge_dim,
                                     dropout=0.5)
    x, edge_index, edge_attr = inputs_of(False, edge_dim, device=DEVICE)
    reference.train()
    conv.train()
    # TransformerConv's mask is torch's dropout: the PyTorch path draws the
    # same; the fused kernels (CUDA) draw their own, from Philox
    # (tests/ops/test_transformer_attention.py).
    conv.fused_attention = False
    torch.manual_seed(3)
    expected = reference(x, edge_index, edge_attr)
    torch.manual_seed(3)
    out = conv(x, edge_index, edge_attr)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.manual_seed(4)  # another seed drops other weights
    assert not torch.allclose(conv(x, edge_index, edge_attr), expected)


# --------------------------------------------------------------------------
# Every vector kernel against an edge-wise reference
# --------------------------------------------------------------------------


def edge_wise_reference(conv, x, edge_index, edge_attr):
    """The layer's output from the formula, edge by edge: the kernel's
    pair_log_similarity of the scaled query and key, the L^p magnitude of
    both, a softmax over each target's edges by hand, the values (plus the
    edge features) summed, the heads concatenated or averaged, the root
    added."""
    x_src, x_dst = (x, x) if isinstance(x, torch.Tensor) else x
    H, C = conv.heads, conv.out_channels
    scale = C**-0.25
    query = conv.lin_query(x_dst).view(-1, H, C) * scale
    key = conv.lin_key(x_src).view(-1, H, C)
    value = conv.lin_value(x_src).view(-1, H, C)
    out = torch.zeros(x_dst.size(0), H, C, device=x_dst.device)
    for i in range(x_dst.size(0)):
        edges = (edge_index[1] == i).nonzero().view(-1).tolist()
        if not edges:
            continue
        logits, messages = [], []
        for e in edges:
            j = int(edge_index[0, e])
            k, v = key[j], value[j]
            if edge_attr is not None:
                edge = conv.lin_edge(edge_attr[e]).view(H, C)
                k, v = k + edge, v + edge
            k = k * scale
            logit = conv.kernel.pair_log_similarity(query[i], k)
            if conv.magnitude:
                logit = logit + 0.5 * (lp_norm_squared(query[i], conv.p) +
                                       lp_norm_squared(k, conv.p))
            logits.append(logit)
            messages.append(v)
        logits = torch.stack(logits)  # [E_i, H]
        weights = (logits - logits.max(0).values).exp()
        weights = weights / weights.sum(0)
        out[i] = (weights.unsqueeze(-1) * torch.stack(messages)).sum(0)
    out = out.view(-1, H * C) if conv.concat else out.mean(1)
    return out + conv.lin_skip(x_dst)


@pytest.mark.parametrize('kernel', vector_kernels())
@pytest.mark.parametrize('edge_dim', [None, 2])
@pytest.mark.parametrize('bipartite', [False, True])
def test_every_vector_kernel_against_the_edge_wise_reference(
        kernel, edge_dim, bipartite):
    torch.manual_seed(0)
    in_channels = (5, 6) if bipartite else 5
    conv = IKTransformerConv(in_channels, 3, heads=2, edge_dim=edge_dim,
                             kernel=kernel, num_spectral_points=6,
                             p=3.0 if kernel != 'rbf' else 2.0)
    conv = conv.to(DEVICE).eval()
    x, edge_index, edge_attr = inputs_of(bipartite, edge_dim, device=DEVICE)
    with torch.no_grad():
        out = conv(x, edge_index, edge_attr)  # (draws an implicit kernel's
        expected = edge_wise_reference(conv, x, edge_index, edge_attr)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('lengthscale, p, magnitude', [
    (1.5, 2.0, True), (1.5, 3.0, True), (0.7, 1.5, False), (1.0, 2.0, False)])
def test_rbf_lengthscale_and_lp_against_the_edge_wise_reference(
        lengthscale, p, magnitude):
    # The norms that the layer leaves out or cancels (gamma and the
    # magnitude's) are those of the formula for any l, p and magnitude:
    torch.manual_seed(0)
    conv = IKTransformerConv(5, 3, heads=2, edge_dim=2, kernel='rbf', p=p,
                             magnitude=magnitude,
                             kernel_kwargs=dict(lengthscale=lengthscale))
    x, edge_index, edge_attr = inputs_of(False, 2)
    with torch.no_grad():
        out = conv(x, edge_index, edge_attr)
        expected = edge_wise_reference(conv, x, edge_index, edge_attr)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


def test_mikan_transformer_against_the_edge_wise_reference():
    torch.manual_seed(0)
    conv = MIKANTransformerConv(5, 3, heads=2, edge_dim=2,
                                num_spectral_points=6).eval()
    x, edge_index, edge_attr = inputs_of(False, 2)
    with torch.no_grad():
        out = conv(x, edge_index, edge_attr)
        expected = edge_wise_reference(conv, x, edge_index, edge_attr)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------
# Gradients
# --------------------------------------------------------------------------


@pytest.mark.parametrize('kernel', ['rbf', 'direct'])
@pytest.mark.parametrize('edge_dim', [None, 2])
def test_gradcheck_of_the_layer(kernel, edge_dim):
    torch.manual_seed(0)
    conv = IKTransformerConv(5, 2, heads=2, edge_dim=edge_dim, kernel=kernel,
                             num_spectral_points=3,
                             kernel_kwargs=None).double().eval()
    x, edge_index, edge_attr = inputs_of(False, edge_dim)
    x = x.double().requires_grad_()
    args = [x]
    if edge_attr is not None:
        args.append(edge_attr.double().requires_grad_())

    def function(*tensors):
        return conv(tensors[0], edge_index,
                    tensors[1] if len(tensors) > 1 else None)

    assert torch.autograd.gradcheck(function, tuple(args))


# --------------------------------------------------------------------------
# Batches of graphs
# --------------------------------------------------------------------------


def two_graphs(edge_dim=None):
    first = graph(6, edge_dim=edge_dim, seed=1)
    second = graph(5, edge_dim=edge_dim, seed=2)
    x = torch.cat([first[0], second[0] * 3.0])
    edge_index = torch.cat([first[2], second[2] + 6], dim=1)
    edge_attr = None if edge_dim is None else torch.cat([first[3],
                                                         second[3]])
    batch = torch.tensor([0] * 6 + [1] * 5)
    return first, second, x, edge_index, edge_attr, batch


@pytest.mark.parametrize('layer', ['implicit', 'mikan'])
@pytest.mark.parametrize('training', [False, True])
def test_a_graph_alone_and_in_a_batch(layer, training):
    torch.manual_seed(0)
    conv = (MIKANTransformerConv(5, 3, heads=2, edge_dim=2,
                                 num_spectral_points=4) if layer == 'mikan'
            else IKTransformerConv(5, 3, heads=2, edge_dim=2,
                                   kernel='implicit', num_spectral_points=4))
    conv.train(training)
    first, second, x, edge_index, edge_attr, batch = two_graphs(edge_dim=2)
    torch.manual_seed(5)
    out = conv(x, edge_index, edge_attr, batch=batch, batch_size=2)
    torch.manual_seed(5)
    alone = conv(first[0], first[2], first[3])
    # The first graph draws the numbers it draws alone (training), and
    # the mean of its own density (evaluation):
    torch.testing.assert_close(out[:6], alone, atol=1e-5, rtol=1e-5)
    if not training:
        second_alone = conv(second[0] * 3.0, second[2], second[3])
        torch.testing.assert_close(out[6:], second_alone, atol=1e-5,
                                   rtol=1e-5)
    # Without the batch, the summary mixes the graphs:
    torch.manual_seed(5)
    mixed = conv(x, edge_index, edge_attr)
    assert not torch.allclose(mixed[:6], alone, atol=1e-4)


def test_graph_batch_reaches_the_layer_inside_gpsconv():
    torch.manual_seed(0)
    gps = GPSConv(5, MIKANTransformerConv(5, 5, heads=1,
                                          num_spectral_points=4),
                  heads=1).eval()
    first, _, x, edge_index, _, batch = two_graphs()
    with torch.no_grad():
        alone = gps(first[0], first[2])
        with graph_batch(gps, batch, 2):
            out = gps(x, edge_index, batch)
        mixed = gps(x, edge_index, batch)
    torch.testing.assert_close(out[:6], alone, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(mixed[:6], alone, atol=1e-4)


# --------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------


def one_line(error) -> str:
    message = str(error.value)
    assert '\n' not in message
    return message


@pytest.mark.parametrize('case, kind, words', [
    ('wide_x', ValueError, ["'x' has 6 features", 'in_channels=5']),
    ('flat_x', ValueError, ["'x' must be 2-D", '(7,)']),
    ('float_index', TypeError, ['integer indices', 'torch.float32']),
    ('out_of_range', ValueError, ['source index 9', 'valid: 0..6']),
    ('attr_without_dim', ValueError, ['edge_dim=None', 'edge_dim=3']),
    ('dim_without_attr', ValueError, ['edge_dim=3', "no 'edge_attr'"]),
    ('wrong_attr_width', ValueError, ['[num_edges, 3]', '(15, 2)']),
])
def test_bad_inputs_are_one_line_errors(case, kind, words):
    edge_dim = 3 if case in ('dim_without_attr', 'wrong_attr_width') else None
    conv = IKTransformerConv(5, 4, heads=2, edge_dim=edge_dim, kernel='rbf')
    x, edge_index, _ = inputs_of(False, None)
    edge_attr = None
    if case == 'wide_x':
        x = torch.randn(7, 6)
    elif case == 'flat_x':
        x = torch.randn(7)
    elif case == 'float_index':
        edge_index = edge_index.float()
    elif case == 'out_of_range':
        edge_index = edge_index.clone()
        edge_index[0, 2] = 9
    elif case == 'attr_without_dim':
        edge_attr = torch.randn(edge_index.size(1), 3)
    elif case == 'wrong_attr_width':
        edge_attr = torch.randn(edge_index.size(1), 2)
    with pytest.raises(kind) as error:
        conv(x, edge_index, edge_attr)
    message = one_line(error)
    assert message.startswith('IKTransformerConv: ')
    for word in words:
        assert word in message


def test_one_dimensional_edge_features_for_edge_dim_one():
    # The check accepts edge_attr of shape (E,) for edge_dim=1 (where
    # TransformerConv's lin_edge fails): the layer reads it as (E, 1).
    conv = IKTransformerConv(5, 4, heads=2, edge_dim=1, kernel='rbf')
    x, edge_index, _ = inputs_of(False, None)
    edge_attr = torch.randn(edge_index.size(1))
    torch.testing.assert_close(conv(x, edge_index, edge_attr),
                               conv(x, edge_index, edge_attr.view(-1, 1)))


def test_each_kernel_has_its_own_default_number_of_spectral_points():
    # As in IKGATConv: 'direct' at R = 16, the other kernels at 64,
    # MIKANTransformerConv at 64; a given R wins.
    assert IKTransformerConv(5, 4, heads=2).kernel.num_spectral_points == 16
    assert IKTransformerConv(5, 4, heads=2).num_spectral_points == 16
    for kernel in ('rff', 'rff_ns', 'implicit'):
        conv = IKTransformerConv(5, 4, heads=2, kernel=kernel)
        assert conv.kernel.num_spectral_points == 64, kernel
    conv = IKTransformerConv(5, 4, heads=2, num_spectral_points=32)
    assert conv.kernel.num_spectral_points == conv.num_spectral_points == 32
    assert IKTransformerConv(5, 4, kernel='rbf').num_spectral_points is None
    assert MIKANTransformerConv(5, 4, heads=2).kernel.num_spectral_points == 64
    with pytest.raises(ValueError, match="'num_spectral_points'.*got 0"):
        IKTransformerConv(5, 4, num_spectral_points=0)


def test_mikan_transformer_options_are_named():
    with pytest.raises(ValueError) as error:
        MIKANTransformerConv(5, 4, num_spectral_points=3)
    message = one_line(error)
    assert message.startswith('MIKANTransformerConv: ') and '3' in message
    with pytest.raises(ValueError) as error:
        MIKANTransformerConv(5, 4, kernel_kwargs=dict(copula=False))
    message = one_line(error)
    assert "['copula']" in message and "kernel='implicit'" in message
    with pytest.raises(TypeError, match='^MIKANTransformerConv: .*width'):
        MIKANTransformerConv(5, 4, kernel_kwargs=dict(width=3))


class NotPairing(Kernel):
    """A kernel of the anchor pairing only."""
    pairs_vectors = False


def test_kernels_that_do_not_pair_two_vectors_are_refused():
    with pytest.raises(ValueError) as error:
        NotPairing(2, 4, pairing='vectors')
    assert 'NotPairing does not pair two vectors' in one_line(error)
    with pytest.raises(ValueError) as error:
        IKTransformerConv(5, 4, heads=2, kernel=NotPairing(2, 4))
    message = one_line(error)
    assert "pairing='anchor'" in message and "pairing='vectors'" in message
    with pytest.raises(ValueError) as error:  # a pairable kernel, wrong way
        IKTransformerConv(5, 4, heads=2, kernel=RBFKernel(2, 4))
    assert "RBFKernel(..., pairing='vectors')" in one_line(error)
    with pytest.raises(ValueError) as error:
        IKTransformerConv(5, 4, heads=2, kernel='gauss')
    message = one_line(error)
    assert "Unknown kernel 'gauss'" in message and "'rbf'" in message
    conv = IKTransformerConv(5, 4, heads=2,
                             kernel=RBFKernel(2, 4, pairing='vectors'))
    assert conv.kernel.pairing == 'vectors'


@pytest.mark.parametrize('kernel', ['rbf', 'direct', 'implicit', 'mikan'])
def test_non_finite_features_stay_where_they_reach(kernel):
    torch.manual_seed(0)
    conv = (MIKANTransformerConv(5, 3, heads=2, num_spectral_points=4)
            if kernel == 'mikan' else
            IKTransformerConv(5, 3, heads=2, kernel=kernel,
                              num_spectral_points=4)).eval()
    x, edge_index, _ = inputs_of(False, None)
    x = x.clone()
    x[0, 1] = float('nan')
    x[1, 2] = float('inf')
    reached = set(edge_index[1][(edge_index[0] == 0) |
                                (edge_index[0] == 1)].tolist()) | {0, 1}
    out = conv(x, edge_index)
    clean = [i for i in range(x.size(0)) if i not in reached]
    assert clean and torch.isfinite(out[clean]).all()
    if kernel in ('implicit', 'mikan'):  # the summary skips the rows
        assert all(torch.isfinite(points).all()
                   for points in conv.spectral_points())


@pytest.mark.parametrize('edge_dim', [None, 3])
def test_an_empty_graph_is_transformer_conv(edge_dim):
    reference, conv = pair_of_layers(False, edge_dim=edge_dim)
    x = torch.randn(4, 5)
    edge_index = torch.empty(2, 0, dtype=torch.long)
    edge_attr = None if edge_dim is None else torch.randn(0, edge_dim)
    expected, (_, alpha) = reference(x, edge_index, edge_attr,
                                     return_attention_weights=True)
    out, (_, our_alpha) = conv(x, edge_index, edge_attr,
                               return_attention_weights=True)
    torch.testing.assert_close(out, expected)
    assert our_alpha.shape == alpha.shape == (0, 2)
    for kernel in ('direct', 'implicit'):
        other = IKTransformerConv(5, 4, heads=2, kernel=kernel,
                                  edge_dim=edge_dim)
        assert torch.isfinite(other(x, edge_index, edge_attr)).all()


@pytest.mark.parametrize('kernel', ['rbf', 'direct', 'implicit'])
def test_no_nodes(kernel):
    conv = IKTransformerConv(5, 4, heads=2, kernel=kernel)
    out = conv(torch.randn(0, 5), torch.empty(2, 0, dtype=torch.long))
    assert out.shape == (0, 8)


# --------------------------------------------------------------------------
# torch.compile and the meta device
# --------------------------------------------------------------------------


@pytest.mark.slow  # 8 s (rbf) to 27 s (direct) each on one CPU thread
@pytest.mark.parametrize('kernel, edge_dim', [
    ('rbf', 3), ('direct', 3),
    # With and without edge features (off CUDA both take the PyTorch
    # path); rff's points are fixed:
    ('rbf', None), ('direct', None), ('rff', None)])
def test_compile_without_graph_breaks(kernel, edge_dim):
    torch.manual_seed(0)
    conv = IKTransformerConv(5, 4, heads=2, kernel=kernel, edge_dim=edge_dim,
                             num_spectral_points=4)
    x, edge_index, edge_attr = inputs_of(False, edge_dim)
    expected = conv(x, edge_index, edge_attr)
    expected_grads = torch.autograd.grad(expected.sum(),
                                         list(conv.parameters()))
    torch._dynamo.reset()
    compiled = torch.compile(conv, fullgraph=True)
    out = compiled(x, edge_index, edge_attr)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    grads = torch.autograd.grad(out.sum(), list(conv.parameters()))
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('kernel', ['rbf', 'direct', 'implicit'])
def test_compiling_off_cuda_takes_the_pytorch_path(kernel, monkeypatch):
    """The fused operator's PyTorch implementation gathers the tables per
    edge (E x H x 2R with spectral points: 26x TransformerConv's time and
    1.7 GB at PubMed size; rbf 358 ms against 192 ms through the PyTorch
    path); torch.compile off CUDA traces the PyTorch path."""
    conv = IKTransformerConv(5, 4, heads=2, kernel=kernel)
    x, edge_index, _ = inputs_of(False, None)
    query = conv.lin_query(x).view(-1, 2, 4)
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    assert not conv._route(edge_index, None, query, None).fused
    conv.fused_attention = 'always'  # the interpreter's kernels, for tests
    assert (conv._route(edge_index, None, query, None).fused
            == triton_usable())


@pytest.mark.parametrize('kernel', ['rbf', 'direct'])
@pytest.mark.parametrize('edge_dim', [None, 3])
def test_forward_and_backward_on_the_meta_device(kernel, edge_dim):
    conv = IKTransformerConv(6, 4, heads=2, kernel=kernel, edge_dim=edge_dim,
                             num_spectral_points=4).to(META)
    x = torch.randn(10, 6, device=META, requires_grad=True)
    edge_index = torch.randint(0, 10, (2, 30), device=META)
    edge_attr = None
    if edge_dim is not None:
        edge_attr = torch.randn(30, edge_dim, device=META)
    with NoHostTensors():
        out = conv(x, edge_index, edge_attr)
        out.sum().backward()
    assert out.device == META and out.shape == (10, 8)
    assert x.grad is not None


# --------------------------------------------------------------------------
# Registrations: inspection, checkpoints, the KL of a model, the CLI entries
# --------------------------------------------------------------------------


@pytest.mark.parametrize('kernel', ['rbf', 'direct', 'mikan'])
def test_attention_decomposition(kernel):
    torch.manual_seed(0)
    conv = (MIKANTransformerConv((5, 6), 3, heads=2, edge_dim=2,
                                 num_spectral_points=4) if kernel == 'mikan'
            else IKTransformerConv((5, 6), 3, heads=2, edge_dim=2,
                                   kernel=kernel, num_spectral_points=4,
                                   p=3.0)).eval()
    x, edge_index, edge_attr = inputs_of(True, 2)
    terms = conv.attention_decomposition(x, edge_index, edge_attr)
    _, (edges, alpha) = conv(x, edge_index, edge_attr,
                             return_attention_weights=True)
    assert torch.equal(terms.edge_index, edges)
    torch.testing.assert_close(terms.alpha, alpha)
    # The weights are the softmax of the two reported terms:
    from torch_geometric.utils import softmax
    logit = terms.log_similarity + terms.log_magnitude + terms.edge_term
    torch.testing.assert_close(
        softmax(logit, edges[1], num_nodes=x[1].size(0)), alpha, atol=1e-5,
        rtol=1e-5)
    if kernel == 'rbf':  # the RBF log-similarity from its formula
        H, C = 2, 3
        q = conv.lin_query(x[1]).view(-1, H, C)[edges[1]] * C**-0.25
        k = (conv.lin_key(x[0]).view(-1, H, C)[edges[0]] +
             conv.lin_edge(edge_attr).view(-1, H, C)) * C**-0.25
        torch.testing.assert_close(terms.log_similarity,
                                   -0.5 * ((q - k)**2).sum(-1))


def test_kl_divergence_of_a_model_counts_the_transformer_layers():
    from ikgat.models import TwoLayerGAT
    torch.manual_seed(0)
    model = TwoLayerGAT(5, 3, 2, MIKANTransformerConv, heads=2,
                        conv_kwargs=dict(num_spectral_points=4))
    x, edge_index, _ = inputs_of(False, None)
    model(x, edge_index)
    total = kl_divergence(model)
    expected = (model.conv1.kernel.kl_divergence() +
                model.conv2.kernel.kl_divergence())
    torch.testing.assert_close(total, expected)
    assert total > 0
    deterministic = IKTransformerConv(5, 3, kernel='direct')
    assert kl_divergence(deterministic) == 0


@pytest.mark.parametrize('self_loops', [False, True])
@pytest.mark.parametrize('layer, conv_kwargs', [
    ('IKTransformerConv', dict(kernel='direct', p=3.0,
                               num_spectral_points=4)),
    ('IKTransformerConv', dict(kernel='rff', num_spectral_points=4)),
    ('MIKANTransformerConv', dict(p=2.0, num_spectral_points=4)),
    ('TransformerConv', {}),
])
def test_checkpoint_round_trip(layer, conv_kwargs, self_loops, tmp_path):
    from ikgat.models import TwoLayerGAT
    from ikgat.training.checkpoints import (
        layer_classes,
        load_checkpoint,
        save_checkpoint,
    )
    torch.manual_seed(0)
    model = TwoLayerGAT(5, 3, 2, layer_classes()[layer], heads=2,
                        conv_kwargs=conv_kwargs,
                        self_loops=self_loops).eval()
    x, edge_index, _ = inputs_of(False, None)
    expected = model(x, edge_index)
    path = str(tmp_path / 'model.pt')
    save_checkpoint(path, model, 'Cora', conv_kwargs)
    checkpoint = load_checkpoint(path)
    assert checkpoint.layer == layer
    assert type(checkpoint.model.conv1).__name__ == layer
    assert checkpoint.model.self_loops == self_loops
    torch.testing.assert_close(checkpoint.model(x, edge_index), expected)


def test_inspection_of_the_transformer_layers():
    from ikgat.inspection import (
        attention_layers,
        attention_weights,
        spectral_tsne_inputs,
    )
    from ikgat.models import TwoLayerGAT
    torch.manual_seed(0)
    model = TwoLayerGAT(5, 3, 2, MIKANTransformerConv, heads=2,
                        conv_kwargs=dict(num_spectral_points=4)).eval()
    x, edge_index, _ = inputs_of(False, None)
    assert [name for name, _ in attention_layers(model)] == ['conv1',
                                                             'conv2']
    inputs = spectral_tsne_inputs(model, x=x, edge_index=edge_index)
    # (G, H, R, C) points: C coordinates, not 2C; 2 heads x 2 sets x 4
    # points, then as many reference samples as one head has:
    assert inputs.points.shape == (16 + 8, 3)
    assert inputs.head.tolist() == [0] * 8 + [1] * 8 + [-1] * 8
    name, alpha, edges = attention_weights(model, x, edge_index)
    assert name == 'conv1' and alpha.shape == (edge_index.size(1), 2)
    assert torch.equal(edges, edge_index)


@pytest.mark.parametrize('kernel', ['rbf', 'implicit', 'mikan'])
def test_layer_wise_inference_gives_the_full_graph_outputs(kernel):
    from ikgat.models import TwoLayerGAT
    from ikgat.nn import layer_over_full_graph
    torch.manual_seed(0)
    x = torch.randn(40, 5)
    edge_index = torch.randint(0, 40, (2, 150))
    conv = (MIKANTransformerConv(5, 3, heads=2, num_spectral_points=4)
            if kernel == 'mikan' else
            IKTransformerConv(5, 3, heads=2, kernel=kernel,
                              num_spectral_points=4)).eval()
    # The implicit kernels summarise the full graph, not each batch's
    # subgraph (full_graph_summary):
    torch.testing.assert_close(layer_over_full_graph(conv, x, edge_index, 7),
                               conv(x, edge_index), atol=1e-5, rtol=1e-5)
    model = TwoLayerGAT(5, 3, 2, type(conv), heads=2, conv_kwargs=dict(
        num_spectral_points=4, **({} if kernel == 'mikan' else
                                  dict(kernel=kernel)))).eval()
    torch.testing.assert_close(model.inference(x, edge_index, batch_size=9),
                               model(x, edge_index), atol=1e-5, rtol=1e-5)
    if kernel != 'rbf':
        assert 'full_graph_summary' in conv.sampling_caveat
        with pytest.raises(RuntimeError, match='model.eval'):
            with conv.train().full_graph_summary(x):
                pass
    else:
        assert conv.sampling_caveat is None


@pytest.mark.parametrize('layer', [IKTransformerConv, MIKANTransformerConv])
def test_to_hetero_with_lazy_bipartite_layers(layer):
    """PyG's to_hetero copies the layer per edge type, with lazy (-1, -1)
    inputs: one output per node type, gradients to every copy."""
    from torch_geometric.data import HeteroData
    from torch_geometric.nn import to_hetero

    torch.manual_seed(0)
    data = HeteroData()
    data['paper'].x = torch.randn(9, 6)
    data['author'].x = torch.randn(5, 3)
    writes = torch.stack([torch.randint(0, 5, (15, )),
                          torch.randint(0, 9, (15, ))])
    data['author', 'writes', 'paper'].edge_index = writes
    data['paper', 'rev_writes', 'author'].edge_index = writes.flip(0)
    data['paper', 'cites', 'paper'].edge_index = torch.randint(0, 9, (2, 12))

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = layer((-1, -1), 4, heads=2)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    model = to_hetero(Net(), data.metadata(), aggr='sum')
    out = model(data.x_dict, data.edge_index_dict)
    assert {key: tuple(value.shape) for key, value in out.items()} == {
        'paper': (9, 8), 'author': (5, 8)}
    sum(value.sum() for value in out.values()).backward()
    grads = [p.grad for name, p in model.named_parameters()
             if 'lin_query.weight' in name]
    assert len(grads) == 3 and all(g is not None and bool(g.ne(0).any())
                                   for g in grads)
