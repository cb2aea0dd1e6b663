"""The fused Triton attention against the unfused path (kernel_edge_softmax
then attention_aggregate): values and gradients on small graphs.

Without CUDA the kernels run in Triton's interpreter, switched on by
tests/conftest.py before Triton is first imported.
"""

import pytest
import torch

pytest.importorskip('triton')

from ikgat.ops.aggregation import attention_aggregate  # noqa: E402
from ikgat.ops.edge_softmax import kernel_edge_softmax  # noqa: E402
from ikgat.ops.gat_attention import AttentionCSR, fused_attention, prepare_csr  # noqa: E402
from tests.helpers import DEVICE, fast_few  # noqa: E402


def graph(num_src, num_dst, num_edges, seed, isolated=2):
    """Random edges into all but the last `isolated` targets, plus duplicate
    edges and self-loops (the first min(N_s, N_t) nodes)."""
    generator = torch.Generator().manual_seed(seed)
    edge_index = torch.stack([
        torch.randint(0, num_src, (num_edges, ), generator=generator),
        torch.randint(0, num_dst - isolated, (num_edges, ),
                      generator=generator),
    ])
    loops = torch.arange(min(num_src, num_dst - isolated)).repeat(2, 1)
    edge_index = torch.cat([edge_index, edge_index[:, :5], loops], dim=1)
    return edge_index.to(DEVICE)


def inputs(num_src, num_dst, num_edges, heads, channels, seed, gate,
           broadcast):
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(DEVICE)

    score_src = randn(num_src, heads, 3)
    score_dst = randn(1 if broadcast else num_dst, heads, 3)
    x_src = randn(num_src, heads, channels)
    edge_gate = randn(num_edges, heads) if gate else None
    return score_src, score_dst, x_src, edge_gate


def unfused(score_src, score_dst, x_src, edge_index, num_dst, edge_gate,
            negative_slope):
    alpha = kernel_edge_softmax(score_src, score_dst, edge_index, num_dst,
                                edge_gate, negative_slope)
    return attention_aggregate(alpha, x_src, edge_index, num_dst), alpha


def gradients(outputs, upstream, leaves):
    loss = sum((out.float() * grad).sum() for out, grad in
               zip(outputs, upstream))
    return torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize('gate,broadcast,weights,negative_slope', fast_few(
    [options + (slope, ) for slope in (0.2, 0.0) for options in (
        (False, False, False), (True, False, True), (False, True, True),
        (True, True, False))],
    ((True, False, True, 0.2), (True, True, False, 0.0),
     (False, True, True, 0.2))))
def test_equals_unfused_path_with_gradients(gate, broadcast, weights,
                                            negative_slope):
    num_src, num_dst, heads, channels = 13, 11, 3, 5
    edge_index = graph(num_src, num_dst, 40, seed=1)
    tensors = inputs(num_src, num_dst, edge_index.size(1), heads, channels,
                     seed=2, gate=gate, broadcast=broadcast)
    leaves = [t.requires_grad_() for t in tensors if t is not None]
    score_src, score_dst, x_src, edge_gate = tensors

    # Both slopes are exercised: the gates have mixed signs on the edges.
    src, dst = edge_index
    edge_sum = score_src[src, :, 2] + score_dst[
        torch.zeros_like(dst) if broadcast else dst, :, 2]
    if edge_gate is not None:
        edge_sum = edge_sum + edge_gate
    assert (edge_sum > 0).any() and (edge_sum <= 0).any()

    expected = unfused(score_src, score_dst, x_src, edge_index, num_dst,
                       edge_gate, negative_slope)
    result = fused_attention(score_src, score_dst, x_src, edge_index,
                             num_dst, edge_gate, negative_slope,
                             return_attention_weights=weights)
    result = result if weights else (result, )
    assert result[0].shape == (num_dst, heads, channels)
    assert torch.allclose(result[0], expected[0], atol=1e-5, rtol=1e-5)
    assert result[0][-2:].abs().max() == 0  # isolated targets
    if weights:
        assert result[1].shape == (edge_index.size(1), heads)
        assert torch.allclose(result[1], expected[1], atol=1e-6)

    generator = torch.Generator().manual_seed(3)
    upstream = [torch.randn(r.shape, generator=generator).to(DEVICE)
                for r in result]
    got = gradients(result, upstream, leaves)
    want = gradients(expected[:len(result)], upstream, leaves)
    for name, a, b in zip(['score_src', 'score_dst', 'x_src', 'edge_gate'],
                          got, want):
        assert a.shape == b.shape, name
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-5), (
            name, (a - b).abs().max())


@pytest.mark.parametrize('index_dtype', [None, torch.int64])
def test_prepared_csr_is_reused_and_single_head_odd_channels(index_dtype):
    num_nodes, heads, channels = 9, 1, 3
    edge_index = graph(num_nodes, num_nodes, 25, seed=4, isolated=1)
    csr = prepare_csr(edge_index, num_nodes, num_nodes, index_dtype)
    assert isinstance(csr, AttentionCSR)
    # int32 where the indices fit (the default), int64 on request:
    assert {t.dtype for t in csr[:8]} == {index_dtype or torch.int32}
    assert csr.rowptr.tolist()[-1] == edge_index.size(1)
    assert torch.equal(csr.dst.long(), edge_index[1, csr.perm])
    assert torch.equal(csr.perm[csr.inverse_perm].long(),
                       torch.arange(edge_index.size(1), device=DEVICE))
    assert torch.equal(csr.dst[csr.csc_edge], csr.csc_dst)
    for seed in (5, 6):
        score_src, score_dst, x_src, _ = inputs(num_nodes, num_nodes,
                                                edge_index.size(1), heads,
                                                channels, seed, False, False)
        out = fused_attention(score_src, score_dst, x_src, csr, num_nodes)
        expected, _ = unfused(score_src, score_dst, x_src, edge_index,
                              num_nodes, None, 0.2)
        assert torch.allclose(out, expected, atol=1e-5, rtol=1e-5)


def test_bfloat16_inputs_compute_in_float32():
    num_src, num_dst, heads, channels = 10, 8, 2, 4
    edge_index = graph(num_src, num_dst, 30, seed=7)
    tensors = inputs(num_src, num_dst, edge_index.size(1), heads, channels,
                     seed=8, gate=True, broadcast=False)
    half = [t.bfloat16().requires_grad_() for t in tensors]
    full = [t.detach().float().requires_grad_() for t in half]
    out, alpha = fused_attention(*half[:3], edge_index, num_dst, half[3],
                                 return_attention_weights=True)
    assert out.dtype == torch.bfloat16 and alpha.dtype == torch.float32
    expected, expected_alpha = unfused(*full[:3], edge_index, num_dst,
                                       full[3], 0.2)
    # alpha is float32 from bfloat16-exact inputs; out is rounded once.
    assert torch.allclose(alpha, expected_alpha, atol=1e-6)
    assert torch.allclose(out.float(), expected, atol=1e-2, rtol=1e-2)
    upstream = torch.randn(out.shape, generator=torch.Generator()
                           .manual_seed(9)).to(DEVICE)
    got = gradients([out], [upstream], half)
    want = gradients([expected], [upstream], full)
    for a, b in zip(got, want):
        assert a.dtype == torch.bfloat16
        assert torch.allclose(a.float(), b, atol=3e-2, rtol=3e-2)


def test_empty_graph_gives_zeros():
    score_src, score_dst, x_src, _ = inputs(4, 3, 0, 2, 2, 10, False, False)
    x_src.requires_grad_()
    edge_index = torch.empty(2, 0, dtype=torch.long, device=DEVICE)
    out, alpha = fused_attention(score_src, score_dst, x_src, edge_index, 3,
                                 return_attention_weights=True)
    assert out.shape == (3, 2, 2) and out.abs().max() == 0
    assert alpha.shape == (0, 2)
    grad, = torch.autograd.grad(out.sum(), [x_src])
    assert grad.abs().max() == 0


def test_clear_errors():
    score_src, score_dst, x_src, _ = inputs(4, 3, 5, 2, 2, 11, False, False)
    edge_index = graph(4, 3, 5, seed=12, isolated=0)
    with pytest.raises(ValueError, match='score_dst'):
        fused_attention(score_src, score_dst[:, :1], x_src, edge_index, 3)
    with pytest.raises(ValueError, match="'edge_gate' must be"):
        fused_attention(score_src, score_dst, x_src, edge_index, 3,
                        edge_gate=torch.zeros(2, 2, device=DEVICE))
    csr = prepare_csr(edge_index, 4, 3)
    with pytest.raises(ValueError,
                       match=r'prepare_csr\(edge_index, N_src, N_dst\)'):
        fused_attention(score_src, score_dst[:1].expand(5, -1, -1),
                        x_src, csr, 5)


@pytest.mark.slow
def test_gpu_speed_smoke_writes_markdown_and_rows(tmp_path):
    # Loaded from its file: benchmarks/gpu_speed.py is self-contained.
    import importlib.util
    import json
    import os.path as osp

    path = osp.join(osp.dirname(__file__), '..', '..', 'benchmarks',
                    'gpu_speed.py')
    spec = importlib.util.spec_from_file_location('gpu_speed', path)
    gpu_speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_speed)
    output = tmp_path / 'gpu_speed.md'
    gpu_speed.main(['--smoke', '--graphs', 'tiny', '--rounds', '1',
                    '--output', str(output)])
    text = output.read_text()
    assert 'copy bandwidth' in text and 'git commit' in text
    rows = json.loads((tmp_path / 'gpu_speed.json').read_text())
    # --smoke leaves the compiled models out unless they are named:
    assert {r['model'] for r in rows['layers']} == {
        name for name in gpu_speed.MODELS if not name.endswith('-compiled')}
    # The two-layer training step, on the largest graph of the run:
    assert [(r['graph'], r['model']) for r in rows['training']] == [
        ('tiny', name) for name in gpu_speed.TRAINING_MODELS
        if not name.endswith('-compiled')]
    assert all(r['ms'] > 0 for r in rows['training'])
    assert 'Two-layer full-batch training step' in text
    if DEVICE.type == 'cpu':  # --smoke interprets the kernel on CPU
        assert {r['path'] for r in rows['fused']} >= {
            'fused forward', 'fused forward+backward'}
    else:  # compiled Triton here: the CPU smoke run skips the kernel
        assert all('skipped' in r['note'] for r in rows['fused'])


def test_backward_reads_gradients_of_any_strides():
    # out.sum() sends an expanded gradient (strides 0), a permuted loss a
    # non-contiguous one; the kernel reads both in place, without a copy.
    num_src, num_dst, heads, channels = 12, 10, 3, 4
    edge_index = graph(num_src, num_dst, 40, seed=13)
    tensors = inputs(num_src, num_dst, edge_index.size(1), heads, channels,
                     seed=14, gate=False, broadcast=False)
    leaves = [t.requires_grad_() for t in tensors[:3]]
    weight = torch.randn(channels, heads, num_dst,
                         generator=torch.Generator().manual_seed(15)).to(
                             DEVICE)
    losses = [lambda out: out.sum(),
              lambda out: (out.permute(2, 1, 0) * weight).sum()]
    for loss in losses:
        got = torch.autograd.grad(loss(fused_attention(
            *leaves, edge_index, num_dst)), leaves)
        want = torch.autograd.grad(loss(unfused(
            *leaves, edge_index, num_dst, None, 0.2)[0]), leaves)
        for a, b in zip(got, want):
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-5)


def test_csr_indices_are_int64_where_int32_would_overflow():
    # On 'meta' (shapes only) a graph of 2^31 edges costs nothing.
    meta = torch.device('meta')
    small = torch.empty(2, 10, dtype=torch.long, device=meta)
    large = torch.empty(2, 2**31, dtype=torch.long, device=meta)
    assert prepare_csr(small, 5, 5).src.dtype == torch.int32
    assert prepare_csr(large, 5, 5).src.dtype == torch.int64
    assert prepare_csr(small, 2**31, 5).rowptr.dtype == torch.int64
    with_loops = prepare_csr(small, 7, 6, self_loops=6)
    assert with_loops.src.shape == (16, ) and with_loops.self_loops == 6


def test_a_csr_with_self_loops_takes_no_gate_and_returns_no_weights():
    score_src, score_dst, x_src, _ = inputs(4, 4, 5, 2, 2, 16, False, False)
    edge_index = graph(4, 4, 5, seed=17, isolated=0)
    csr = prepare_csr(edge_index, 4, 4, self_loops=4)
    for kwargs in (dict(return_attention_weights=True),
                   dict(edge_gate=torch.zeros(csr.src.numel(), 2,
                                              device=DEVICE))):
        with pytest.raises(ValueError, match='prepared with self_loops'):
            fused_attention(score_src, score_dst, x_src, csr, 4, **kwargs)
    for count in (5, -1):  # loops only for nodes that are both
        with pytest.raises(ValueError, match="'self_loops' must lie in 0..4"):
            prepare_csr(edge_index, 4, 6, self_loops=count)
