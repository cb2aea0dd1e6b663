"""Bad numbers (issue #14): non-finite inputs, huge scales, float16,
bfloat16 and autocast, wrong ``size=``, copies after a training step.  Every
case runs on every layer (IKGATConv with each kernel, MIKANConv,
KEPGATConv) and, where GATConv has an answer, is held to it on the same
input with the same projection, attention vectors and bias."""
import copy
import io
import math
import pickle

import pytest
import torch
from torch_geometric.nn import GATConv

from ikgat import IKGATConv
from ikgat.kernels.implicit import LOG_STD_BOUND
from ikgat.nn import kl_divergence, ksvd_loss
from tests.helpers import LAYER_NAMES, fast_few, make_layer, random_graph

IMPLICIT_LAYERS = ['ikgat-implicit', 'mikan']


def tied(name, in_channels=6, out_channels=4, heads=2, seed=0, **kwargs):
    """A layer and a GATConv that share GATConv's parameters."""
    torch.manual_seed(seed)
    layer = make_layer(name, in_channels, out_channels, heads=heads,
                       **kwargs)
    gat = GATConv(in_channels, out_channels, heads=heads)
    result = layer.load_state_dict(gat.state_dict(), strict=False)
    assert not result.unexpected_keys
    return layer, gat


def bad_rows(out):
    """The rows of ``out`` holding a NaN or an infinity."""
    return set((~torch.isfinite(out)).any(-1).nonzero().flatten().tolist())


def relative_error(out, reference):
    """Max absolute error relative to the output scale of the reference."""
    return ((out.float() - reference).abs().max() /
            reference.abs().max()).item()


def all_finite_grads(module, *inputs):
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    grads += [t.grad for t in inputs]
    return bool(grads) and all(bool(torch.isfinite(g).all()) for g in grads)


# ----------------------------------------------------- non-finite inputs


@pytest.mark.parametrize('training, value', fast_few(
    [(training, value) for training in (False, True)
     for value in (math.nan, math.inf, -math.inf)],
    ((True, math.nan), (False, -math.inf))))
@pytest.mark.parametrize('name', LAYER_NAMES)
def test_a_non_finite_input_spoils_no_more_rows_than_gatconv(
        name, value, training):
    x, edge_index = random_graph(10, 20, 6, seed=1)
    x[3, 2] = value
    layer, gat = tied(name)
    layer.train(training)
    gat.train(training)
    with torch.no_grad():
        expected = bad_rows(gat(x, edge_index))
        out = layer(x, edge_index)
    assert 3 in expected and len(expected) < 10  # local for GATConv
    assert bad_rows(out) <= expected
    # The graph-level quantities stay finite too:
    assert torch.isfinite(kl_divergence(layer))
    assert torch.isfinite(ksvd_loss(layer))


@pytest.mark.parametrize('name', IMPLICIT_LAYERS)
def test_a_non_finite_input_stays_in_its_graph_of_a_batch(name):
    x, edge_index = random_graph(5, 12, 6, seed=2)
    x = torch.cat([x, x + 1])
    edge_index = torch.cat([edge_index, edge_index + 5], dim=1)
    batch = torch.tensor([0] * 5 + [1] * 5)
    clean = make_layer(name, 6, 4, heads=2).eval()
    with torch.no_grad():
        expected = clean(x, edge_index, batch=batch)
        x[1, 0] = math.nan
        out = clean(x, edge_index, batch=batch)
    assert bad_rows(out) and bad_rows(out) <= set(range(5))
    # The other graph's summary, spectral points and output are unchanged:
    assert torch.allclose(out[5:], expected[5:], atol=1e-6)


# ---------------------------------------------------------- huge inputs


@pytest.mark.parametrize('scale', [1e5, 1e8])
@pytest.mark.parametrize('name', LAYER_NAMES)
def test_huge_inputs_train_to_finite_outputs_kl_and_gradients(name, scale):
    torch.manual_seed(3)
    layer = make_layer(name, 6, 4, heads=2).train()
    x, edge_index = random_graph(20, 60, 6, seed=3)
    x = (scale * x).requires_grad_()
    out = layer(x, edge_index)
    kl = kl_divergence(layer)
    assert torch.isfinite(out).all() and torch.isfinite(kl)
    (out.square().mean() / scale**2 + kl + ksvd_loss(layer)).backward()
    assert all_finite_grads(layer, x)


@pytest.mark.parametrize('name', IMPLICIT_LAYERS)
def test_the_log_std_bound_is_inactive_in_the_normal_regime(name):
    torch.manual_seed(4)
    layer = make_layer(name, 6, 4, heads=2).train()
    x, edge_index = random_graph(20, 60, 6, seed=4)
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.01)
    for _ in range(20):
        optimizer.zero_grad()
        loss = layer(x, edge_index).square().mean() + 0.1 * kl_divergence(
            layer)
        loss.backward()
        optimizer.step()
    assert layer.kernel.last_draws.log_std.abs().max() < LOG_STD_BOUND / 2


# ---------------------------------------- float16, bfloat16 and autocast


# Every layer at one scale and dtype in the fast tier (the slow tier: every
# scale, p and dtype):
@pytest.mark.parametrize('dtype, scale, p', fast_few(
    [(dtype, scale, p) for dtype in (torch.float16, torch.bfloat16)
     for scale, p in ((1.0, 2.0), (30.0, 2.0), (30.0, 3.0))],
    ((torch.bfloat16, 30.0, 2.0), )))
@pytest.mark.parametrize('name', LAYER_NAMES)
def test_reduced_precision_is_as_accurate_as_gatconv(name, scale, p, dtype):
    if name == 'kep' and p != 2.0:
        pytest.skip('KEPGATConv has no p')
    x, edge_index = random_graph(30, 90, 6, seed=5)
    layer, gat = tied(name, p=p)
    layer.eval()
    gat.eval()
    low, gat_low = copy.deepcopy(layer).to(dtype), copy.deepcopy(gat).to(
        dtype)
    x_low = (scale * x).to(dtype)
    with torch.no_grad():
        out, (_, alpha) = low(x_low, edge_index,
                              return_attention_weights=True)
        gat_out, (_, gat_alpha) = gat_low(x_low, edge_index,
                                          return_attention_weights=True)
        # float32 with the same (rounded) weights and input: the error of
        # the arithmetic alone.
        reference = copy.deepcopy(low).float()(x_low.float(), edge_index)
        gat_reference = copy.deepcopy(gat_low).float()(x_low.float(),
                                                       edge_index)
    assert out.dtype == gat_out.dtype == dtype
    assert alpha.dtype == gat_alpha.dtype == dtype
    assert torch.isfinite(out).all()
    error = relative_error(out, reference)
    gat_error = relative_error(gat_out, gat_reference)
    assert error <= gat_error, (error, gat_error)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
@pytest.mark.parametrize('name', LAYER_NAMES)
def test_reduced_precision_trains(name, dtype):
    torch.manual_seed(6)
    layer = make_layer(name, 6, 4, heads=2).to(dtype).train()
    x, edge_index = random_graph(20, 60, 6, seed=6)
    # (At larger feature scales the KSVD loss, which grows as the fourth
    # power of the scale, overflows float16 gradients as any float16
    # training without loss scaling does.)
    x = x.to(dtype).requires_grad_()
    out = layer(x, edge_index)
    assert out.dtype == dtype and torch.isfinite(out).all()
    loss = (out.float().square().mean() + kl_divergence(layer) +
            ksvd_loss(layer))
    assert torch.isfinite(loss)
    loss.backward()
    assert all_finite_grads(layer, x)
    assert all(p.grad.dtype == dtype for p in layer.parameters()
               if p.grad is not None)


@pytest.mark.parametrize('scale', [1.0, 30.0])
@pytest.mark.parametrize('name', LAYER_NAMES)
def test_bfloat16_autocast_is_as_accurate_as_gatconv(name, scale):
    x, edge_index = random_graph(30, 90, 6, seed=7)
    x = scale * x
    layer, gat = tied(name)
    layer.eval()
    gat.eval()
    with torch.no_grad():
        reference, gat_reference = layer(x, edge_index), gat(x, edge_index)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out, (_, alpha) = layer(x, edge_index,
                                    return_attention_weights=True)
            gat_out, (_, gat_alpha) = gat(x, edge_index,
                                          return_attention_weights=True)
    assert out.dtype == gat_out.dtype and alpha.dtype == gat_alpha.dtype
    assert relative_error(out, reference) <= relative_error(
        gat_out, gat_reference)
    # and a training step under autocast:
    layer.train()
    x.requires_grad_()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = layer(x, edge_index)
        loss = (out.float().square().mean() + kl_divergence(layer) +
                ksvd_loss(layer))
    loss.backward()
    assert all_finite_grads(layer, x)


# ------------------------------------------------- rbf, p=2 at any scale


@pytest.mark.parametrize('dtype, tolerance', [(torch.float32, 1e-5),
                                              (torch.float64, 1e-12)])
@pytest.mark.parametrize('scale', [1e-3, 1.0, 1e3, 1e6, 1e9, 1e12])
def test_rbf_p2_equals_gatconv_at_every_scale(scale, dtype, tolerance):
    x, edge_index = random_graph(30, 90, 6, seed=8)
    torch.manual_seed(8)
    gat = GATConv(6, 4, heads=2).to(dtype)
    conv = IKGATConv(6, 4, heads=2, kernel='rbf', p=2.0).to(dtype)
    conv.load_state_dict(gat.state_dict(), strict=False)
    x = (scale * x).to(dtype)
    with torch.no_grad():
        gat_out, (_, gat_alpha) = gat(x, edge_index,
                                      return_attention_weights=True)
        out, (_, alpha) = conv(x, edge_index, return_attention_weights=True)
        decomposition = conv.attention_decomposition(x, edge_index)
    assert (alpha - gat_alpha).abs().max() <= tolerance
    assert (decomposition.alpha - gat_alpha).abs().max() <= tolerance
    assert (out - gat_out).abs().max() <= tolerance * gat_out.abs().max()


# ---------------------------------------------------------------- size=


@pytest.mark.parametrize('size', [(6, 6), (15, 15), (10, 6), (10, 15)])
@pytest.mark.parametrize('name', LAYER_NAMES)
def test_size_is_checked_as_gatconv_checks_it(name, size):
    x, edge_index = random_graph(10, 20, 6, seed=9)
    layer, gat = tied(name)
    with pytest.raises(ValueError):
        gat(x, edge_index, size=size)
    with pytest.raises(ValueError) as info:
        layer(x, edge_index, size=size)
    message = str(info.value)
    assert '\n' not in message
    assert f'size={size}' in message and "'x' has 10 rows" in message
    assert 'pass size=(10, 10)' in message


@pytest.mark.parametrize('name', ['ikgat-direct', 'mikan', 'kep'])
def test_size_of_a_bipartite_graph(name):
    x_src, _ = random_graph(20, 0, 6, seed=10)
    x_dst, _ = random_graph(12, 0, 6, seed=11)
    _, edge_index = random_graph(20, 50, 1, seed=12, num_dst=12)
    layer = make_layer(name, 6, 4, heads=2, add_self_loops=False)
    assert layer((x_src, x_dst), edge_index, size=(20, 12)).shape == (12, 8)
    assert layer((x_src, None), edge_index, size=(20, 12)).shape == (12, 8)
    with pytest.raises(ValueError, match=r"size=\(20, 9\) gives 9 target "
                       r"nodes but 'x_dst' has 12 rows; pass "
                       r"size=\(20, 12\)"):
        layer((x_src, x_dst), edge_index, size=(20, 9))
    with pytest.raises(ValueError, match=r"'size' must be a pair.*\(20,\)"):
        layer((x_src, x_dst), edge_index, size=(20, ))


# ------------------------------------------------ copies after training


@pytest.mark.parametrize('name', LAYER_NAMES)
def test_deepcopy_and_pickle_after_a_training_step(name):
    torch.manual_seed(13)
    layer = make_layer(name, 6, 4, heads=2).train()
    x, edge_index = random_graph(10, 30, 6, seed=13)
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.01)
    loss = (layer(x, edge_index).square().mean() + kl_divergence(layer) +
            ksvd_loss(layer))
    loss.backward()
    optimizer.step()
    best = copy.deepcopy(layer)
    pickled = pickle.loads(pickle.dumps(layer))
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    saved = torch.load(buffer, weights_only=False)
    layer.eval()
    with torch.no_grad():
        expected = layer(x, edge_index)
        for twin in (best, pickled, saved):
            assert torch.equal(twin.eval()(x, edge_index), expected)
