"""The per-node feature tables of the fused transformer attention
(ikgat.ops.node_tables): values, the recomputing backward, bad shapes, the
rule, and the layer through them against the points kernels."""
import pytest
import torch

import ikgat.ops.node_tables as node_tables
from ikgat import IKTransformerConv, MIKANTransformerConv
from ikgat.kernels.random_features import fourier_features
from ikgat.ops.runtime import triton_usable
from tests.helpers import DEVICE, fast_few


def leaves(nodes, heads, width, sets, points, seed):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(nodes, heads, width, generator=generator,
                    dtype=torch.float64)
    w = torch.randn(sets, heads, points, width, generator=generator,
                    dtype=torch.float64)
    return x.requires_grad_(), w.requires_grad_()


@pytest.mark.parametrize('nodes, heads, width, sets, points', [
    (7, 1, 3, 1, 5), (9, 3, 4, 2, 6), (1, 2, 8, 2, 64), (0, 2, 3, 2, 4)])
def test_tables_and_their_gradients_equal_the_features_autograd(
        nodes, heads, width, sets, points):
    x, w = leaves(nodes, heads, width, sets, points, seed=nodes + points)
    expected = fourier_features(x, w)
    got = node_tables.node_tables(x, w)
    assert got.shape == (nodes, heads, 2 * points)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-12)
    grad = torch.randn_like(expected)
    want = torch.autograd.grad(expected, (x, w), grad)
    have = torch.autograd.grad(got, (x, w), grad)
    for a, b in zip(have, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-10)


def test_one_side_needing_a_gradient():
    x, w = leaves(6, 2, 3, 2, 4, seed=3)
    x = x.detach()
    out = node_tables.node_tables(x, w)
    (grad_w, ) = torch.autograd.grad(out.sum(), (w, ))
    (want, ) = torch.autograd.grad(fourier_features(x, w).sum(), (w, ))
    torch.testing.assert_close(grad_w, want)


@pytest.mark.parametrize('shapes', [((5, 2, 3), (2, 3, 4, 3)),
                                    ((5, 2, 3), (2, 2, 4, 4)),
                                    ((5, 6), (2, 2, 4, 3))])
def test_mismatched_shapes_are_refused_in_one_line(shapes):
    x, w = torch.randn(*shapes[0]), torch.randn(*shapes[1])
    with pytest.raises(ValueError, match=r'node_tables: .*got') as info:
        node_tables.node_tables(x, w)
    assert '\n' not in str(info.value)


def test_the_rule_is_off_the_cpu_while_enabled(monkeypatch):
    assert not node_tables.uses_tables(torch.zeros(2, 1, 1))
    meta = torch.zeros(2, 1, 1, device='meta')
    assert node_tables.uses_tables(meta)  # standing for CUDA
    monkeypatch.setattr(node_tables, 'ENABLED', False)
    assert not node_tables.uses_tables(meta)


@pytest.mark.skipif(not triton_usable(), reason='needs Triton')
@pytest.mark.parametrize('layer, kernel', fast_few(
    [(IKTransformerConv, 'direct'), (IKTransformerConv, 'rff_ns'),
     (MIKANTransformerConv, None)], [(IKTransformerConv, 'direct')]))
@pytest.mark.parametrize('training', [
    pytest.param(False, marks=pytest.mark.slow), True])
def test_the_layer_through_tables_equals_its_pytorch_path(
        layer, kernel, training, monkeypatch):
    # The fused path (on CPU in Triton's interpreter) with the tables of
    # pair_tables (forced: the rule says CUDA), against the PyTorch path
    # (fused_attention=False), which shares none of the fused path's glue:
    # values and gradients.  (The fused path with the points, CPU's, is held
    # to the PyTorch path by test_transformer_attention's layer test.)
    torch.manual_seed(0)
    kwargs = {} if kernel is None else dict(kernel=kernel)
    conv = layer(5, 4, heads=2, num_spectral_points=8, beta=True,
                 **kwargs).to(DEVICE)
    conv.train(training)
    x = torch.randn(12, 5, device=DEVICE, requires_grad=True)
    edge_index = torch.randint(0, 12, (2, 40), device=DEVICE)
    results = []
    make_tables = node_tables.node_tables
    for forced, fused in ((True, 'always'), (False, False)):
        conv.fused_attention = fused
        monkeypatch.setattr(node_tables, 'uses_tables',
                            lambda x, forced=forced: forced)
        calls = []
        monkeypatch.setattr(node_tables, 'node_tables',
                            lambda *a, calls=calls: calls.append(1)
                            or make_tables(*a))
        torch.manual_seed(1)
        out = conv(x, edge_index)
        grads = torch.autograd.grad(out.square().sum(),
                                    [x, *conv.parameters()],
                                    allow_unused=True)
        assert len(calls) == (2 if forced else 0)
        results.append((out, grads))
    (out_t, grads_t), *others = results
    for out, grads in others:
        torch.testing.assert_close(out_t, out, atol=1e-5, rtol=1e-5)
        for a, b in zip(grads_t, grads, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')
@pytest.mark.parametrize('layer, kwargs', [
    (IKTransformerConv, dict(kernel='direct')),
    (MIKANTransformerConv, dict())])
def test_on_cuda_the_tables_equal_the_points_and_the_pytorch_path(
        layer, kwargs, monkeypatch):
    # Compiled tables (the default on CUDA), the points kernels
    # (ENABLED cleared) and the PyTorch path (fused_attention=False).
    torch.manual_seed(0)
    conv = layer(5, 4, heads=2, num_spectral_points=16, **kwargs).cuda()
    x = torch.randn(300, 5, device='cuda', requires_grad=True)
    edge_index = torch.randint(0, 300, (2, 2000), device='cuda')
    results = []
    for enabled, fused in ((True, True), (False, True), (True, False)):
        monkeypatch.setattr(node_tables, 'ENABLED', enabled)
        conv.fused_attention = fused
        torch.manual_seed(1)
        out = conv(x, edge_index)
        results.append((out, torch.autograd.grad(
            out.square().sum(), [x, *conv.parameters()])))
    (out, grads), others = results[0], results[1:]
    for other_out, other_grads in others:
        torch.testing.assert_close(out, other_out, atol=1e-4, rtol=1e-4)
        for a, b in zip(grads, other_grads):
            torch.testing.assert_close(a, b, atol=1e-3, rtol=1e-3)


def test_the_operators_pass_opcheck():
    x, w = leaves(6, 2, 3, 2, 4, seed=2)
    torch.library.opcheck(torch.ops.ikgat.node_tables.default, (x, w))
    grad = torch.randn(6, 2, 8, dtype=torch.float64)
    torch.library.opcheck(torch.ops.ikgat.node_tables_backward.default,
                          (grad, x.detach(), w.detach(), True, False))


@pytest.mark.slow  # compiles a layer (2 s)
def test_inside_torch_compile_the_operator_stays_whole():
    # An opaque operator (fullgraph, no break): the same values and
    # gradients as eager, its backward the recomputing one.
    x, w = leaves(20, 2, 3, 2, 4, seed=5)
    compiled = torch.compile(
        lambda x, w: node_tables.node_tables(x, w).square().sum(),
        fullgraph=True)
    out = compiled(x, w)
    expected = fourier_features(x, w).square().sum()
    torch.testing.assert_close(out, expected)
    for a, b in zip(torch.autograd.grad(out, (x, w)),
                    torch.autograd.grad(expected, (x, w))):
        torch.testing.assert_close(a, b)
