"""The fused dot-product kernel attention of IKTransformerConv: the Triton
kernels against the registered operator's PyTorch implementation (checked
itself by gradcheck), the layers' fused path against their PyTorch path,
and attention dropout (keep rate, one mask forward and backward, seeds).

Without CUDA the kernels run in Triton's interpreter, switched on by
tests/conftest.py before Triton is first imported; the graphs are small.
"""
import math
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip('triton')

import ikgat.nn.conv.ik_transformer_conv as transformer_module  # noqa: E402
from ikgat import IKTransformerConv, MIKANTransformerConv  # noqa: E402
from ikgat.ops.fourier_features import angle_product  # noqa: E402
from ikgat.ops.tiling import head_block, tiling  # noqa: E402
from ikgat.ops.transformer_attention import (  # noqa: E402
    IDENTITY,
    LINKS,
    LOG_SQUARE,
    _tiling,
    fused_transformer_attention,
)
from ikgat.ops.transformer_attention_triton import table_tiling  # noqa: E402
from ikgat.ops.transformer_fourier import fourier_tiling, prefetches_targets  # noqa: E402
from tests.helpers import DEVICE, fast_few  # noqa: E402
from tests.ops.test_gat_attention import graph  # noqa: E402

#: (N_src, N_dst): a graph and a bipartite one, each with isolated targets,
#: repeated edges and self-loops (see graph()).
SIZES = [(9, 9), (11, 6)]


def tables(num_src, num_dst, heads, width, channels, seed, dtype):
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype).to(
            DEVICE).requires_grad_()

    return (randn(num_dst, heads, width), randn(num_src, heads, width),
            randn(num_src, heads), randn(num_src, heads, channels))


def run(leaves, edge_index, num_dst, link, dropout=0.0, use_triton=True,
        seed=0):
    torch.manual_seed(seed)  # the seed of the dropout mask
    return fused_transformer_attention(
        *leaves, edge_index, num_dst, link, 0.7,
        1e-3 if link == LOG_SQUARE else 0.0, dropout=dropout,
        use_triton=use_triton)


def values_and_gradients(leaves, edge_index, num_dst, link, **kwargs):
    leaves = [leaf.detach().requires_grad_() for leaf in leaves]
    out = run(leaves, edge_index, num_dst, link, **kwargs)
    upstream = torch.linspace(-1, 1, out.numel(), device=out.device,
                              dtype=out.dtype).view_as(out)
    (out * upstream).sum().backward()
    return [out] + [leaf.grad for leaf in leaves]


def fused_equals_pytorch(leaves, edge_index, num_dst, link):
    r"""The kernels' output and gradients, after asserting that they equal
    the PyTorch implementation's."""
    fused = values_and_gradients(leaves, edge_index, num_dst, link)
    reference = values_and_gradients(leaves, edge_index, num_dst, link,
                                     use_triton=False)
    for got, expected in zip(fused, reference):
        assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)
    return fused


@pytest.mark.parametrize('link', LINKS)
def test_pytorch_implementation_passes_gradcheck(link):
    leaves = tables(6, 5, 2, 4, 3, seed=0, dtype=torch.float64)
    edge_index = graph(6, 5, 12, seed=1)
    # nondet_tol: index_add_ on CUDA sums in any order.
    assert torch.autograd.gradcheck(
        lambda *args: run(args, edge_index, 5, link, use_triton=False),
        leaves, nondet_tol=1e-12)


# Each link, size and dtype once in the fast tier, every combination in the
# slow one:
@pytest.mark.parametrize('link, num_src, num_dst, dtype', fast_few(
    [(link, *size, dtype) for link in LINKS for size in SIZES
     for dtype in (torch.float32, torch.float64)],
    [(LINKS[0], *SIZES[0], torch.float32), (LINKS[1], *SIZES[1],
                                            torch.float64)]))
def test_kernels_equal_the_pytorch_implementation(link, num_src, num_dst,
                                                  dtype):
    leaves = tables(num_src, num_dst, 2, 6, 3, seed=2, dtype=dtype)
    edge_index = graph(num_src, num_dst, 30, seed=3)
    fused = fused_equals_pytorch(leaves, edge_index, num_dst, link)
    # Isolated targets (the last two) get zeros, and no gradient:
    assert fused[0][-2:].abs().max() == 0
    assert fused[1][-2:].abs().max() == 0


@pytest.mark.parametrize('link', fast_few(LINKS, LINKS[-1:]))
def test_kernels_walk_blocks_of_heads(link):
    # D = 200 pads to 256: two heads per program (head_block), so that 3
    # heads take two programs per node, the second half masked.
    assert head_block(3, 200, 3) == 2
    leaves = tables(11, 6, 3, 200, 3, seed=11, dtype=torch.float32)
    fused_equals_pytorch(leaves, graph(11, 6, 30, seed=12), 6, link)


def test_full_table_rows_take_one_edge_forward_tiles():
    # All 8 heads of 2R = 128 features fill a row of TABLE_ROW_ELEMENTS:
    # the forward kernel takes one-edge tiles at 2 warps, the backward ones
    # two edges at 4 (table_tiling).  Narrower rows keep the forward's
    # tiles of two edges or more.
    forward = table_tiling(30, 9, 8, 128, 3, forward=True)
    backward = table_tiling(30, 9, 8, 128, 3)
    assert (forward['BLOCK_H'], forward['BLOCK_E'], forward['num_warps']) \
        == (8, 1, 2)
    assert (backward['BLOCK_H'], backward['BLOCK_E'],
            backward['num_warps']) == (8, 2, 4)
    assert table_tiling(30, 9, 8, 8, 8, forward=True) == table_tiling(
        30, 9, 8, 8, 8)


@pytest.mark.slow
def test_table_kernels_of_full_rows_equal_the_pytorch_implementation():
    # The kernels at those tiles (8 heads x 128 features, 10 s in the
    # interpreter) equal the PyTorch implementation, and with dropout draw
    # one mask forward and backward.
    leaves = tables(9, 9, 8, 128, 3, seed=13, dtype=torch.float32)
    fused_equals_pytorch(leaves, graph(9, 9, 30, seed=14), 9, LOG_SQUARE)
    num_src, num_dst, dropout = 24, 12, 0.4
    edge_index = torch.stack([
        torch.arange(num_src).repeat(num_dst),
        torch.arange(num_dst).repeat_interleave(num_src)]).to(DEVICE)
    u, v, s, _ = tables(num_src, num_dst, 8, 128, 1, seed=15,
                        dtype=torch.float32)
    values = torch.eye(num_src, device=DEVICE).unsqueeze(1).repeat(
        1, 8, 1).requires_grad_()
    plain = run((u, v, s, values), edge_index, num_dst, LOG_SQUARE)
    out = run((u, v, s, values), edge_index, num_dst, LOG_SQUARE,
              dropout=dropout, seed=5)
    assert_one_mask(plain, out, values, dropout)


def assert_one_mask(plain, out, values, dropout):
    r"""With values one-hot per source and head, out[i, h, j] is the dropped
    weight of the edge j -> i: the keep rate lies in a binomial interval,
    the kept weights are the undropped ones over 1 - p, and the backward
    pass draws the same mask (out is linear in the values, so their
    gradient is the dropped weights themselves)."""
    kept = out > 0
    rate = kept.float().mean().item()
    half_width = 3.9 * math.sqrt(dropout * (1 - dropout) / kept.numel())
    assert abs(rate - (1 - dropout)) < half_width, rate
    assert torch.allclose(out[kept], plain[kept] / (1 - dropout), rtol=1e-5)
    upstream = torch.randn(out.shape, device=DEVICE)
    (out * upstream).sum().backward()
    # dL/dvalues[j, h, c] = sum_i a~[i, h, j] G[i, h, c]:
    expected = torch.einsum('ihj,ihc->jhc', out.detach(), upstream)
    assert torch.allclose(values.grad, expected, atol=1e-5)


def fourier_leaves(num_src, num_dst, heads, channels, points, sets, seed,
                   dtype, values=3):
    r"""Queries, keys, spectral points (m, H, R, D), source terms and
    values of the points path."""
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype).to(
            DEVICE).requires_grad_()

    return (randn(num_dst, heads, channels), randn(num_src, heads, channels),
            randn(sets, heads, points, channels), randn(num_src, heads),
            randn(num_src, heads, values))


def run_fourier(leaves, edge_index, num_dst, dropout=0.0, use_triton=True,
                seed=0):
    u, v, points, s, values = leaves
    torch.manual_seed(seed)
    return fused_transformer_attention(
        u, v, s, values, edge_index, num_dst, LOG_SQUARE, 0.3, 1e-3,
        dropout=dropout, use_triton=use_triton, points=points)


def fourier_values_and_gradients(leaves, edge_index, num_dst, **kwargs):
    leaves = [leaf.detach().requires_grad_(leaf.requires_grad)
              for leaf in leaves]
    out = run_fourier(leaves, edge_index, num_dst, **kwargs)
    upstream = torch.linspace(-1, 1, out.numel(), device=out.device,
                              dtype=out.dtype).view_as(out)
    (out * upstream).sum().backward()
    return [out] + [leaf.grad for leaf in leaves]


def assert_points_path_matches_pytorch(leaves, edge_index, num_dst):
    r"""The Triton kernels' output and gradients equal the PyTorch
    implementation's."""
    fused = fourier_values_and_gradients(leaves, edge_index, num_dst)
    reference = fourier_values_and_gradients(leaves, edge_index, num_dst,
                                             use_triton=False)
    for got, expected in zip(fused, reference):
        assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)


def test_points_path_pytorch_implementation_passes_gradcheck():
    # The tables phi(u), phi(v) from the points: gradients to the queries,
    # keys and points through the angles.
    leaves = fourier_leaves(6, 5, 2, 3, 4, 2, seed=0, dtype=torch.float64)
    edge_index = graph(6, 5, 12, seed=1)
    assert torch.autograd.gradcheck(
        lambda *args: run_fourier(args, edge_index, 5, use_triton=False),
        leaves, nondet_tol=1e-12)


@pytest.mark.parametrize('heads, sets, points, width, nodes', [
    (3, 2, 5, 4, 7), (1, 1, 4, 3, 6), (2, 1, 3, 2, 0)])
def test_the_points_gradient_as_one_product_equals_the_batched_one(
        heads, sets, points, width, nodes):
    # The CUDA form (one product, its diagonal blocks) against the per-head
    # batched product, here on CPU; non-contiguous inputs, and no nodes.
    generator = torch.Generator().manual_seed(heads + nodes)
    grad_angles = torch.randn(heads, nodes, sets, points, generator=generator,
                              dtype=torch.float64).transpose(0, 1)
    x = torch.randn(nodes, heads, width, generator=generator,
                    dtype=torch.float64)
    one = angle_product(grad_angles, x, one_product=True)
    batched = angle_product(grad_angles, x, one_product=False)
    assert one.shape == (sets, heads, points, width)
    assert torch.allclose(one, batched, atol=1e-12)


def test_points_path_equals_the_tables_path():
    # With points the operator is the tables path on phi(u), phi(v).
    from ikgat.kernels.random_features import fourier_features
    u, v, points, s, values = fourier_leaves(9, 9, 2, 3, 5, 2, seed=7,
                                             dtype=torch.float64)
    edge_index = graph(9, 9, 30, seed=8)
    with_points = run_fourier((u, v, points, s, values), edge_index, 9,
                              use_triton=False)
    tables = fused_transformer_attention(
        fourier_features(u, points), fourier_features(v, points), s, values,
        edge_index, 9, LOG_SQUARE, 0.3, 1e-3, use_triton=False)
    assert torch.allclose(with_points, tables, atol=1e-12)


# A graph with two sets of learned points in the fast tier (the layer tests
# take one set of drawn ones), every size, pairing and
# float64 in the slow one:
@pytest.mark.parametrize('num_src, num_dst, dtype, sets, learned', [
    (*SIZES[0], torch.float32, 2, True),
    pytest.param(*SIZES[1], torch.float32, 1, False, marks=pytest.mark.slow)
] + [pytest.param(*size, dtype, sets, learned, marks=pytest.mark.slow)
     for size in SIZES for dtype in (torch.float32, torch.float64)
     for sets, learned in ((2, True), (1, False))
     if dtype == torch.float64 or (size == SIZES[0]) != (sets == 2)])
def test_points_kernels_equal_the_pytorch_implementation(num_src, num_dst,
                                                         dtype, sets,
                                                         learned):
    # R = 5 and D = 3 pad to 8 and 4 (masked lanes); fixed points (rff)
    # store no angle gradients.
    leaves = list(fourier_leaves(num_src, num_dst, 2, 3, 5, sets, seed=2,
                                 dtype=dtype))
    leaves[2] = leaves[2].detach().requires_grad_(learned)
    edge_index = graph(num_src, num_dst, 30, seed=3)
    fused = fourier_values_and_gradients(leaves, edge_index, num_dst)
    reference = fourier_values_and_gradients(leaves, edge_index, num_dst,
                                             use_triton=False)
    assert (fused[3] is None) == (not learned)
    for got, expected in zip(fused, reference):
        if expected is not None:
            assert torch.allclose(got, expected, atol=1e-5, rtol=1e-4)
    # Isolated targets (the last two) get zeros, and no gradient:
    assert fused[0][-2:].abs().max() == 0
    assert fused[1][-2:].abs().max() == 0


@pytest.mark.parametrize('points, blocks', [
    pytest.param(200, (2, 64, 4), marks=pytest.mark.slow),  # 8 s
    pytest.param(5, (4, 8, 1), marks=pytest.mark.slow)])
def test_points_kernels_walk_blocks_of_heads_and_chunks(points, blocks):
    # R = 200 pads to 256: each kernel takes 2 heads per program (the
    # second program's second head masked) and walks R in 4 chunks of 64,
    # the last one partly masked; R = 5 pads to 8: one program of 4 heads,
    # the fourth masked, one chunk.
    leaves = fourier_leaves(11, 6, 3, 2, points, 1, seed=11,
                            dtype=torch.float32)
    edge_index = graph(11, 6, 30, seed=12)
    tile = _tiling(30, 6, 3, 2, 3, leaves[2])
    assert (tile['BLOCK_H'], tile['BLOCK_R'], tile['CHUNKS']) == blocks
    assert_points_path_matches_pytorch(leaves, edge_index, 6)


def test_points_kernels_of_wide_rows_take_edge_blocks_of_at_least_four():
    # Blocks of 2 edges made the unchunked per-source backward spill
    # (Triton 3.9, sm_90): the random-feature kernels of wide value rows
    # take 4 on sparse graphs while the tile fits, the tables' kernels keep
    # following the degree.
    assert fourier_tiling(40, 40, 8, 128, 64)['BLOCK_E'] == 4  # degree 1
    assert fourier_tiling(40, 40, 8, 128, 64)['CHUNKS'] == 1
    assert tiling(40, 40, 8, 8, 8)['BLOCK_E'] == 2
    assert fourier_tiling(40 * 16, 40, 1, 16, 7)['BLOCK_E'] == 16
    # One head of R = 512 fills a tile with 1 edge: the floor of 2 holds.
    assert fourier_tiling(40, 40, 1, 512, 8)['BLOCK_E'] == 2


def test_points_kernels_take_all_heads_in_chunks_of_points():
    # At R = 64 each kernel takes all 8 heads, 2 edges, R in 4 chunks of
    # 16 (one program per node).
    arxiv = (1_166_243, 169_343, 8, 64, 8)
    tile = fourier_tiling(*arxiv)
    assert (tile['BLOCK_H'], tile['BLOCK_E'], tile['num_warps'],
            tile['BLOCK_R'], tile['CHUNKS']) == (8, 2, 4, 16, 4)
    # Narrow rows still take edge blocks of the mean degree:
    assert fourier_tiling(1000, 100, 1, 16, 7)['BLOCK_E'] == 16
    # Wide value rows (4 heads x 64 channels spilled) take one head and R
    # whole:
    wide = fourier_tiling(1_166_243, 169_343, 8, 128, 64)
    assert (wide['BLOCK_H'], wide['BLOCK_R'], wide['CHUNKS']) == (1, 128, 1)


# The prefetching kernel runs in the fast tier's layer tests (narrow rows).
@pytest.mark.parametrize('width, prefetch', [
    pytest.param(3, True, marks=pytest.mark.slow),
    pytest.param(100, False, marks=pytest.mark.slow)])  # 7-12 s
def test_points_per_source_kernel_with_and_without_prefetch(width, prefetch):
    # The per-source kernel loads the next tile's targets ahead only where
    # its gathered rows are narrow (2 heads x 4 padded channels, not one
    # head of 128): both ways give the PyTorch implementation's values and
    # gradients.
    from ikgat.ops.runtime import record_launches
    leaves = fourier_leaves(9, 7, 2, 3, 5, 2, seed=31, dtype=torch.float32,
                            values=width)
    edge_index = graph(9, 7, 30, seed=32)
    assert prefetches_targets(dict(
        _tiling(30, 9, 2, 3, width, leaves[2]),
        BLOCK_D=4)) == prefetch
    with record_launches() as launches:
        fourier_values_and_gradients(leaves, edge_index, 7)
    [source] = [launch for launch in launches
                if launch.name == 'backward_src_kernel']
    assert source.constexprs['PREFETCH'] == prefetch
    assert_points_path_matches_pytorch(leaves, edge_index, 7)


@pytest.mark.slow  # 1 s in the interpreter
def test_points_kernels_on_a_graph_of_one_edge_per_node():
    # Degree 1: each tile of 2 edges holds one, the other masked.
    leaves = fourier_leaves(9, 7, 8, 2, 8, 2, seed=21, dtype=torch.float32)
    generator = torch.Generator().manual_seed(22)
    edge_index = torch.stack([torch.randint(0, 9, (7, ), generator=generator),
                              torch.arange(7)]).to(DEVICE)
    tile = _tiling(7, 7, 8, 2, 3, leaves[2])
    assert (tile['BLOCK_E'], tile['BLOCK_H']) == (2, 8)
    assert_points_path_matches_pytorch(leaves, edge_index, 7)


@pytest.mark.parametrize('use_triton', [
    pytest.param(True, marks=pytest.mark.slow), False])
def test_points_path_without_edges_and_with_only_the_points_learned(
        use_triton):
    # No edge: zero output and gradients; with only the points requiring a
    # gradient, the kernels still write it (and equal the reference).
    u, v, points, s, values = fourier_leaves(5, 4, 2, 3, 4, 2, seed=9,
                                             dtype=torch.float32)
    empty = torch.empty(2, 0, dtype=torch.long, device=DEVICE)
    out = run_fourier((u, v, points, s, values), empty, 4,
                      use_triton=use_triton)
    assert out.shape == (4, 2, 3) and out.abs().max() == 0
    out.sum().backward()
    assert u.grad.abs().max() == 0 and points.grad.abs().max() == 0
    leaves = [t.detach().requires_grad_(t is points) for t in
              (u, v, points, s, values)]
    edge_index = graph(5, 4, 12, seed=10)
    got = fourier_values_and_gradients(leaves, edge_index, 4,
                                       use_triton=use_triton)
    want = fourier_values_and_gradients(leaves, edge_index, 4,
                                        use_triton=False)
    assert got[1] is None and got[3] is not None
    assert torch.allclose(got[3], want[3], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('with_points', [
    pytest.param(False, marks=pytest.mark.slow), True])
def test_the_operators_pass_opcheck(with_points):
    # Schema, fake implementations (shapes and strides), autograd
    # registration, on the PyTorch implementation.
    from ikgat.ops.gat_attention import prepare_csr
    from ikgat.ops.transformer_attention import _forward_op
    u, v, points, s, values = fourier_leaves(6, 5, 2, 3, 4, 2, seed=0,
                                             dtype=torch.float64)
    if not with_points:
        u, v = (torch.randn(n, 2, 8, dtype=torch.float64, device=DEVICE,
                            requires_grad=True) for n in (5, 6))
        points = None
    csr = prepare_csr(graph(6, 5, 12, seed=1), 6, 5)
    args = (u, v, points, s, values, csr.rowptr, csr.src, csr.dst,
            csr.colptr, csr.csc_edge, csr.csc_dst, csr.rowptr, 0.3, 1e-3,
            0.0, True, False)
    torch.library.opcheck(_forward_op, args)


@pytest.mark.parametrize('use_triton', [
    pytest.param(True, marks=pytest.mark.slow),  # 9 s in the interpreter
    False])
def test_points_path_dropout_keeps_one_mask_forward_and_backward(use_triton):
    # Values one-hot per source: out[i, h, j] is the dropped weight of
    # j -> i; the keep rate lies in a binomial interval and the values'
    # gradient is those same weights (one mask in both directions).
    num_src, num_dst, heads, dropout = 24, 12, 2, 0.4
    edge_index = torch.stack([
        torch.arange(num_src).repeat(num_dst),
        torch.arange(num_dst).repeat_interleave(num_src)]).to(DEVICE)
    u, v, points, s, _ = fourier_leaves(num_src, num_dst, heads, 3, 4, 2,
                                        seed=4, dtype=torch.float32)
    values = torch.eye(num_src, device=DEVICE).unsqueeze(1).repeat(
        1, heads, 1).requires_grad_()
    leaves = (u, v, points, s, values)
    plain = run_fourier(leaves, edge_index, num_dst, 0.0, use_triton)
    out = run_fourier(leaves, edge_index, num_dst, dropout, use_triton,
                      seed=5)
    assert_one_mask(plain, out, values, dropout)


def test_points_must_match_the_queries_and_the_link():
    u, v, points, s, values = fourier_leaves(4, 4, 2, 3, 5, 2, seed=0,
                                             dtype=torch.float32)
    edge_index = graph(4, 4, 6, seed=1)
    with pytest.raises(ValueError, match=r"'points' must be \(m, H, R, D\)"):
        fused_transformer_attention(u, v, s, values, edge_index, 4,
                                    LOG_SQUARE, points=points[:, :1])
    with pytest.raises(ValueError, match="with link 'log_square'"):
        fused_transformer_attention(u, v, s, values, edge_index, 4,
                                    IDENTITY, points=points)
    with pytest.raises(ValueError, match="u's dtype and device"):
        fused_transformer_attention(u, v, s, values, edge_index, 4,
                                    LOG_SQUARE, eps=1e-3,
                                    points=points.double())
    # log(t^2 + eps) needs eps > 0 (padded lanes have t = 0):
    with pytest.raises(ValueError, match="'eps' must be positive"):
        fused_transformer_attention(u, v, s, values, edge_index, 4,
                                    LOG_SQUARE, eps=0.0, points=points)


# The kernels' keep rate in the fast tier: the dropout-vs-mask layer test
# below (its binomial interval); here in the slow tier.
@pytest.mark.parametrize('use_triton, width', [
    pytest.param(True, 4, marks=pytest.mark.slow),
    pytest.param(True, 200, marks=pytest.mark.slow), (False, 4)])
def test_keep_rate_lies_in_a_binomial_interval_and_mask_is_one(use_triton,
                                                               width):
    # With values one-hot per source and head, out[i, h, j] is the dropped
    # weight of the edge j -> i (no repeated edges here).  Width 200: two
    # blocks of heads per node (head_block), one mask all the same.
    num_src, num_dst, heads, dropout = 24, 12, 3, 0.4
    edge_index = torch.stack([
        torch.arange(num_src).repeat(num_dst),
        torch.arange(num_dst).repeat_interleave(num_src)]).to(DEVICE)
    u, v, s, _ = tables(num_src, num_dst, heads, width, 1, seed=4,
                        dtype=torch.float32)
    values = torch.eye(num_src, device=DEVICE).unsqueeze(1).repeat(
        1, heads, 1).requires_grad_()
    leaves = (u, v, s, values)
    plain = run(leaves, edge_index, num_dst, IDENTITY, 0.0, use_triton)
    out = run(leaves, edge_index, num_dst, IDENTITY, dropout, use_triton,
              seed=5)
    assert_one_mask(plain, out, values, dropout)
    # A seed repeats the mask, another seed draws another:
    again = run(leaves, edge_index, num_dst, IDENTITY, dropout, use_triton,
                seed=5)
    other = run(leaves, edge_index, num_dst, IDENTITY, dropout, use_triton,
                seed=6)
    # (the PyTorch implementation's sums on CUDA take any order, so the
    # values agree to rounding):
    assert torch.equal(out > 0, again > 0)
    assert torch.allclose(out, again, atol=1e-6)
    assert not torch.equal(out > 0, other > 0)


def count_fused_calls(monkeypatch):
    calls = []
    fused = transformer_module.transformer_attention.fused_transformer_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(transformer_module.transformer_attention,
                        'fused_transformer_attention', counted)
    return calls


LAYERS = ['rbf', 'exp', 'rff', 'direct', 'implicit', 'mikan']


def build(name, training):
    torch.manual_seed(1)
    if name == 'mikan':
        layer = MIKANTransformerConv((5, 4), 4, heads=2,
                                     num_spectral_points=8, num_samples=3)
    else:
        layer = IKTransformerConv(
            (5, 4), 4, heads=2, kernel=name, num_spectral_points=8,
            kernel_kwargs=dict(num_samples=3) if name == 'implicit' else None)
    return layer.to(DEVICE).train(training)


#: Graphs of the layer tests, (N_s, N_t, random edges, isolated targets):
#: 40 edges into 5 of 7 targets, 5 to 10 a target (repeated edges and
#: self-loops, see graph()), and 20 into 3 of 4 targets, 5 to 9 a target,
#: where the points kernels' programs in the interpreter take half the time.
GRAPHS = {'full': (11, 7, 30, 2), 'small': (7, 4, 12, 1)}


def layer_inputs(size):
    r"""Source and target features of the bipartite graph :obj:`size` of
    :data:`GRAPHS` and its edges."""
    num_src, num_dst, num_edges, isolated = GRAPHS[size]
    edge_index = graph(num_src, num_dst, num_edges, seed=7,
                       isolated=isolated)
    generator = torch.Generator().manual_seed(8)
    x = (torch.randn(num_src, 5, generator=generator).to(DEVICE),
         torch.randn(num_dst, 4, generator=generator).to(DEVICE))
    return x, edge_index


def layer_results(layer, x, edge_index, mode):
    r"""The output and the gradients of the inputs and of the parameters of
    :obj:`layer` with ``fused_attention = mode``, the spectral draws seeded
    (the same on both paths)."""
    layer.fused_attention = mode
    layer.zero_grad()
    leaves = tuple(part.clone().requires_grad_() for part in x)
    torch.manual_seed(9)
    out = layer(leaves, edge_index)
    out.square().sum().backward()
    return [out, *(leaf.grad for leaf in leaves)] + [
        parameter.grad for parameter in layer.parameters()
        if parameter.grad is not None]


def assert_attention_matters(layer, x, edge_index):
    r"""The PyTorch path's weights are far from uniform over the targets'
    in-edges (in each head, at some target the largest and the smallest
    weight differ by a quarter of the uniform weight or more; 0.37 to 2.3
    here): a fused path that got them wrong would give another output."""
    layer.fused_attention = False
    torch.manual_seed(9)
    with torch.no_grad():
        _, (_, alpha) = layer(x, edge_index, return_attention_weights=True)
    spread = []
    for target in edge_index[1].unique():
        weights = alpha[edge_index[1] == target]  # (in-degree, H)
        spread.append((weights.amax(0) - weights.amin(0)) * len(weights))
    assert torch.stack(spread).amax(0).min() > 0.25


# The fast tier: each operator path of the layers, the identity link's
# tables (rbf) and the random-feature points in training (implicit: one
# sampled draw, the points' gradient) and in evaluation (MIKAN: three draws
# as heads of one pass, their outputs averaged), the points on the small
# graph (0.7-0.8 s each on one CPU thread); the slow tier every layer and
# mode on the full one.
FAST_LAYER_CASES = [('rbf', True, 'full'), ('implicit', True, 'small'),
                    ('mikan', False, 'small')]


@pytest.mark.parametrize('name, training, size', fast_few(
    [(name, training, 'full') for name in LAYERS
     for training in (True, False)] + FAST_LAYER_CASES[1:],
    FAST_LAYER_CASES))
def test_layer_fused_path_equals_its_pytorch_path(name, training, size,
                                                  monkeypatch):
    calls = count_fused_calls(monkeypatch)
    layer = build(name, training)
    x, edge_index = layer_inputs(size)
    fused = layer_results(layer, x, edge_index, 'always')
    expected = layer_results(layer, x, edge_index, False)
    assert len(calls) == 1
    assert len(fused) == len(expected)
    for got, want in zip(fused, expected):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    assert_attention_matters(layer, x, edge_index)


def recording_masks(monkeypatch):
    r"""Wrap the layer's fused operator so that each call records its
    dropout mask ``(N_t, H, N_s)``: the operator once more on one-hot values
    (``values[j, h] = e_j``) with the same seed (the same state of the
    random generator), whose output is the dropped weight of each edge
    ``j -> i`` (a graph without repeated edges), positive where kept."""
    masks = []
    fused = transformer_module.transformer_attention.fused_transformer_attention

    def recorded(u, v, s, values, csr, num_dst, *args, points=None,
                 **kwargs):
        num_src, heads = values.shape[:2]
        one_hot = torch.eye(num_src, device=values.device).unsqueeze(
            1).repeat(1, heads, 1)
        devices = [values.device] if values.device.type == 'cuda' else []
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            probe = fused(u.detach(), v.detach(), s.detach(), one_hot, csr,
                          num_dst, *args,
                          points=None if points is None else points.detach(),
                          **kwargs)
        masks.append(probe > 0)
        return fused(u, v, s, values, csr, num_dst, *args, points=points,
                     **kwargs)

    monkeypatch.setattr(transformer_module.transformer_attention,
                        'fused_transformer_attention', recorded)
    return masks


# The table and the points kernels at p = 0.4, and p = 1 (every weight
# dropped, the root weight's term alone) in the slow tier:
@pytest.mark.parametrize('name, dropout', fast_few(
    [('rbf', 0.4), ('rff', 0.4), ('rbf', 1.0), ('direct', 1.0)],
    [('rbf', 0.4), ('rff', 0.4)]))
def test_layer_fused_path_with_dropout_equals_its_pytorch_path_on_its_mask(
        name, dropout, monkeypatch):
    # The fused kernels draw their own mask (Philox, keyed by the CSR
    # position), so the PyTorch path cannot draw it; recovered from the
    # operator on one-hot values, it replaces the PyTorch path's dropout:
    # the two paths then give the same values and gradients (inputs and
    # parameters), and the backward kernels drew the forward's mask.  (The
    # constructor takes p < 1, a layer being useless at 1; the attribute
    # takes 1.)
    masks = recording_masks(monkeypatch)
    torch.manual_seed(1)
    layer = IKTransformerConv((5, 4), 4, heads=2, kernel=name,
                              num_spectral_points=8).to(DEVICE).train()
    layer.dropout = dropout
    x, edge_index = layer_inputs('small')
    # One-hot values tell edges apart: 11 edges, 3 or 4 into each target.
    edge_index = edge_index.unique(dim=1)
    fused = layer_results(layer, x, edge_index, 'always')
    [mask] = masks
    src, dst = edge_index
    kept = mask[dst, :, src]  # (E, H), in the order of edge_index
    keep_scale = 0.0 if dropout == 1.0 else 1.0 / (1.0 - dropout)
    monkeypatch.setattr(transformer_module, 'F', SimpleNamespace(
        dropout=lambda alpha, p, training: alpha * kept * keep_scale))
    expected = layer_results(layer, x, edge_index, False)
    assert len(masks) == 1  # the PyTorch path took no fused call
    assert len(fused) == len(expected)
    for got, want in zip(fused, expected):
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    # The mask: outside the edges nothing; on them a keep rate in a
    # binomial interval (99.99%), and in each head a target with dropped
    # and kept in-edges (where attention matters):
    assert mask.sum() == kept.sum()
    rate = kept.float().mean().item()
    half_width = 3.9 * math.sqrt(dropout * (1 - dropout) / kept.numel())
    assert abs(rate - (1 - dropout)) <= half_width, rate
    if dropout < 1.0:
        mixed = [kept[dst == i].any(0) & ~kept[dst == i].all(0)
                 for i in dst.unique()]
        assert torch.stack(mixed).any(0).all()
    else:
        assert torch.allclose(fused[0], layer.lin_skip(x[1]), atol=1e-6)
    assert_attention_matters(layer, x, edge_index)


def test_layer_takes_the_pytorch_path_where_the_rule_says(monkeypatch):
    calls = count_fused_calls(monkeypatch)
    edge_index = graph(9, 9, 20, seed=10)
    x = torch.randn(9, 5, device=DEVICE)
    layer = IKTransformerConv(5, 4, heads=2, kernel='rbf').to(DEVICE)
    layer.fused_attention = 'always'
    layer(x, edge_index, return_attention_weights=True)  # weights asked
    layer.fused_attention = False
    layer(x, edge_index)
    IKTransformerConv(5, 4, heads=2, kernel='linear').to(DEVICE)(
        x, edge_index)  # no pair feature map
    assert calls == []
    layer.fused_attention = 'always'
    layer(x, edge_index)
    assert calls == [1]
    layer.fused_attention = 'sometimes'
    with pytest.raises(ValueError, match="'fused_attention' must be"):
        layer(x, edge_index)


class _FailingKernel:
    # A jitted kernel whose build fails as Triton's compiler fails.
    def __init__(self, name, error):
        self.error = error
        self.fn = lambda: None
        self.fn.__name__ = name

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            raise self.error
        return run


def test_a_kernel_that_does_not_build_is_one_line_naming_the_switch(
        monkeypatch):
    # As the GAT kernels' test (tests/benchmarks/test_gpu_compile.py), on
    # the layer's path: the error names the kernel, Triton's reason and
    # the switch that avoids the kernel, in one line.
    from triton.compiler.errors import CompilationError

    from ikgat.ops.runtime import KernelBuildError
    inner = CompilationError('def f():\n    return 1.', None,
                             'Return type mismatch: <[8, 8], fp32> and fp32')
    outer = CompilationError('p = p * _keep(...)\n        ^', None, None)
    outer.__cause__ = inner
    for name in ('forward_kernel', 'backward_dst_kernel',
                 'backward_src_kernel'):
        monkeypatch.setattr(transformer_module.transformer_attention, name,
                            _FailingKernel(name, outer))
    layer = IKTransformerConv(5, 4, heads=2, kernel='rbf').to(DEVICE)
    layer.fused_attention = 'always'
    x = torch.randn(9, 5, device=DEVICE)
    with pytest.raises(KernelBuildError) as caught:
        layer(x, graph(9, 9, 20, seed=13))
    message = str(caught.value)
    assert '\n' not in message
    assert 'forward_kernel' in message
    assert 'fused_attention=False' in message
    assert 'Return type mismatch' in message
    assert caught.value.__cause__ is None
    layer.fused_attention = False  # the switch avoids it
    assert layer(x, graph(9, 9, 20, seed=13)).shape == (9, 8)
