"""Attention dropout inside the fused attention, and the registered
operators' two implementations (the Triton kernels, through the interpreter
on CPU, and the PyTorch one of the compiled CPU path).

Dropout is drawn from a counter-based generator keyed by a seed and the
(edge, head) position, regenerated in the backward pass: the tests check
F.dropout's distribution (keep rate, scaling, expectation) and that the
forward and backward passes use one mask.
"""
import math

import pytest
import torch

pytest.importorskip('triton')

from ikgat.ops.aggregation import attention_aggregate  # noqa: E402
from ikgat.ops.edge_softmax import kernel_edge_softmax  # noqa: E402
from ikgat.ops.gat_attention import fused_attention, prepare_csr  # noqa: E402
from tests.helpers import fast_few  # noqa: E402
from tests.ops.test_gat_attention import DEVICE, graph, inputs  # noqa: E402

#: Both implementations of the operators: the Triton kernels run on CUDA,
#: or in the interpreter on CPU.
IMPLEMENTATIONS = [True, False]


def leaves(*tensors):
    return [None if t is None else t.detach().requires_grad_()
            for t in tensors]


def fused(score_src, score_dst, x_src, edge_index, num_dst, edge_gate,
          dropout, use_triton, seed=0, weights=True):
    torch.manual_seed(seed)  # the seed of the mask
    return fused_attention(score_src, score_dst, x_src, edge_index, num_dst,
                           edge_gate, 0.2, return_attention_weights=weights,
                           dropout=dropout, use_triton=use_triton)


# The kernels' own mask in the fast tier: one mask forward and backward
# (below); their keep rate in the slow tier.
@pytest.mark.parametrize('use_triton, dropout', [
    pytest.param(True, 0.6, marks=pytest.mark.slow),
    pytest.param(True, 0.3, marks=pytest.mark.slow),
    pytest.param(False, 0.6, marks=pytest.mark.slow), (False, 0.3)])
def test_keep_rate_lies_in_a_binomial_interval(dropout, use_triton):
    edge_index = graph(60, 40, 500, seed=1)
    score_src, score_dst, x_src, _ = inputs(60, 40, 0, 4, 3, seed=2,
                                            gate=False, broadcast=False)
    _, alpha = fused(score_src, score_dst, x_src, edge_index, 40, None, 0.0,
                     use_triton)
    _, dropped = fused(score_src, score_dst, x_src, edge_index, 40, None,
                       dropout, use_triton)
    kept = dropped > 0
    n = kept.numel()
    rate = kept.float().mean().item()
    # 99.99% normal interval of a binomial share (z = 3.9):
    half_width = 3.9 * math.sqrt(dropout * (1 - dropout) / n)
    assert abs(rate - (1 - dropout)) < half_width, (rate, n)
    # The kept weights are scaled by 1 / (1 - p), the others are zero:
    torch.testing.assert_close(dropped[kept], alpha[kept] / (1 - dropout))


@pytest.mark.parametrize('gate, use_triton', fast_few(
    [(gate, use_triton) for gate in (False, True)
     for use_triton in IMPLEMENTATIONS], ((True, True), (False, False))))
def test_forward_and_backward_use_one_mask(gate, use_triton):
    # The gradients equal those of the unfused formula with the mask read
    # off the returned weights.
    num_src, num_dst, dropout = 30, 20, 0.5
    edge_index = graph(num_src, num_dst, 120, seed=3)
    num_edges = edge_index.size(1)
    tensors = inputs(num_src, num_dst, num_edges, 3, 4, seed=4, gate=gate,
                     broadcast=False)
    leaves_fused = leaves(*tensors)
    out, dropped = fused(*leaves_fused[:3], edge_index, num_dst,
                         leaves_fused[3], dropout, use_triton)
    keep = (dropped.detach() > 0).float() / (1 - dropout)
    assert 0 < keep.count_nonzero() < keep.numel()
    leaves_ref = leaves(*tensors)
    alpha_ref = kernel_edge_softmax(leaves_ref[0], leaves_ref[1], edge_index,
                                    num_dst, leaves_ref[3], 0.2) * keep
    out_ref = attention_aggregate(alpha_ref, leaves_ref[2], edge_index,
                                  num_dst)
    torch.testing.assert_close(out, out_ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(dropped, alpha_ref, atol=1e-6, rtol=1e-5)
    generator = torch.Generator().manual_seed(5)
    upstream = torch.randn(out.shape, generator=generator).to(DEVICE)
    upstream_alpha = torch.randn(dropped.shape, generator=generator).to(
        DEVICE)
    inputs_fused = [t for t in leaves_fused if t is not None]
    inputs_ref = [t for t in leaves_ref if t is not None]
    grads = torch.autograd.grad(
        (out * upstream).sum() + (dropped * upstream_alpha).sum(),
        inputs_fused)
    grads_ref = torch.autograd.grad(
        (out_ref * upstream).sum() + (alpha_ref * upstream_alpha).sum(),
        inputs_ref)
    for grad, grad_ref in zip(grads, grads_ref):
        torch.testing.assert_close(grad, grad_ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize('use_triton', [
    pytest.param(True, marks=pytest.mark.slow), False])
def test_expected_output_over_draws_is_the_output_without_dropout(
        use_triton):
    # 64 draws through the interpreter (200 of the PyTorch implementation):
    # the bound below is in standard errors, valid at any number of draws.
    num_src, num_dst, dropout = 12, 8, 0.5
    draws = 64 if use_triton else 200
    edge_index = graph(num_src, num_dst, 40, seed=6)
    score_src, score_dst, x_src, _ = inputs(num_src, num_dst, 0, 2, 3,
                                            seed=7, gate=False,
                                            broadcast=False)
    csr = prepare_csr(edge_index, num_src, num_dst)
    expected = fused(score_src, score_dst, x_src, csr, num_dst, None, 0.0,
                     use_triton, weights=False)
    outs = torch.stack([
        fused(score_src, score_dst, x_src, csr, num_dst, None, dropout,
              use_triton, seed=seed, weights=False)
        for seed in range(draws)
    ])
    mean, std = outs.mean(0), outs.std(0)
    # Within 5 standard errors of the mean, everywhere:
    assert ((mean - expected).abs() <= 5 * std / math.sqrt(draws)
            + 1e-6).all()
    assert (std > 0).any()


@pytest.mark.parametrize('use_triton', [
    pytest.param(True, marks=pytest.mark.slow), False])
def test_seed_repeats_and_extremes(use_triton):
    edge_index = graph(15, 10, 50, seed=8)
    tensors = inputs(15, 10, 0, 2, 3, seed=9, gate=False, broadcast=False)
    first = fused(*tensors[:3], edge_index, 10, None, 0.4, use_triton)
    again = fused(*tensors[:3], edge_index, 10, None, 0.4, use_triton)
    other = fused(*tensors[:3], edge_index, 10, None, 0.4, use_triton,
                  seed=1)
    # The same mask (the PyTorch implementation's sums on CUDA take any
    # order, so the values agree to rounding):
    assert torch.equal(first[1] > 0, again[1] > 0)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])
    # p = 0 is the attention without dropout, p = 1 drops every weight:
    plain = fused_attention(*tensors[:3], edge_index, 10, None, 0.2,
                            return_attention_weights=True,
                            use_triton=use_triton)
    none = fused(*tensors[:3], edge_index, 10, None, 0.0, use_triton)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(plain, none))
    out, alpha = fused(*tensors[:3], edge_index, 10, None, 1.0, use_triton)
    assert not out.any() and not alpha.any()
    with pytest.raises(ValueError, match="'dropout'.*1.5"):
        fused(*tensors[:3], edge_index, 10, None, 1.5, use_triton)


# (gate, broadcast, weights, self-loops added in the sort; such a CSR
# takes no gate and returns no weights):
@pytest.mark.parametrize('gate,broadcast,weights,self_loops', fast_few([
    (False, False, False, False), (True, False, True, False),
    (False, True, True, False), (False, False, False, True),
    (False, True, False, True)], ((True, False, True, False), )))
def test_pytorch_implementation_equals_the_triton_kernels(
        gate, broadcast, weights, self_loops):
    # The operators' PyTorch implementation (CPU under torch.compile) and
    # the Triton kernels: the same values and gradients without dropout.
    num_src, num_dst = 25, 18
    edge_index = graph(num_src, num_dst, 90, seed=10)
    tensors = inputs(num_src, num_dst, edge_index.size(1), 3, 5, seed=11,
                     gate=gate, broadcast=broadcast)
    csr = prepare_csr(edge_index, num_src, num_dst,
                      self_loops=num_dst - 2 if self_loops else None)
    results = []
    for use_triton in IMPLEMENTATIONS:
        leaf = leaves(*tensors)
        result = fused_attention(*leaf[:3], csr, num_dst, leaf[3], 0.2,
                                 return_attention_weights=weights,
                                 use_triton=use_triton)
        out, alpha = result if weights else (result, None)
        loss = (out * out.detach().sin()).sum()
        if weights:
            loss = loss + (alpha * alpha.detach().cos()).sum()
        grads = torch.autograd.grad(loss, [t for t in leaf if t is not None])
        results.append((out, alpha, grads))
    (out, alpha, grads), (out_t, alpha_t, grads_t) = results
    torch.testing.assert_close(out, out_t, atol=1e-5, rtol=1e-5)
    if weights:
        torch.testing.assert_close(alpha, alpha_t, atol=1e-6, rtol=1e-5)
    for grad, grad_t in zip(grads, grads_t):
        torch.testing.assert_close(grad, grad_t, atol=2e-5, rtol=1e-4)


def test_operators_are_registered_with_fake_implementations():
    meta = torch.device('meta')
    edge_index = torch.randint(0, 20, (2, 80), device=meta)
    score_src = torch.randn(20, 2, 3, device=meta, requires_grad=True)
    score_dst = torch.randn(20, 2, 3, device=meta)
    x_src = torch.randn(20, 2, 4, device=meta, requires_grad=True)
    out = fused_attention(score_src, score_dst, x_src, edge_index, 20,
                          dropout=0.5)
    assert out.shape == (20, 2, 4) and out.device == meta
    out.sum().backward()
    assert x_src.grad.shape == x_src.shape
    assert hasattr(torch.ops.ikgat, 'fused_attention')
    assert hasattr(torch.ops.ikgat, 'fused_attention_backward')
