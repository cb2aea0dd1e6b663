"""The Triton node terms (ikgat.ops.node_terms_triton) equal the plain
path, values and gradients, run through Triton's interpreter on CPU; on the
'meta' device they launch nothing."""
import os

import pytest
import torch

import ikgat.ops.node_terms_triton as node_terms_triton
from ikgat import IKGATConv, MIKANConv
from ikgat.kernels import KERNELS
from ikgat.kernels.random_features import fourier_log_similarity
from ikgat.ops.node_terms import fourier_estimate, fused_fourier_log_similarity
from ikgat.ops.runtime import jitted
from tests.helpers import DEVICE, fast_few, random_graph

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available()
    and os.environ.get('TRITON_INTERPRET') != '1',
    reason='Triton kernels need CUDA or TRITON_INTERPRET=1')
pytest.importorskip('triton')

EPS = 1e-5
# (N, H, C, R): empty, single node/head/channel/point, general sizes, and
# more points than one block of the kernels (R > 32).
SHAPES = [(0, 2, 3, 4), (1, 1, 1, 1), (37, 3, 5, 7), (70, 2, 8, 40)]


def inputs(num_nodes, heads, channels, num_points, num_sets, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape, std):
        value = std * torch.randn(*shape, generator=generator)
        return value.to(DEVICE).requires_grad_()

    x = randn(num_nodes, heads, channels, std=0.5)
    anchor = randn(heads, 2 * channels, std=0.5)
    sets = [randn(heads, num_points, 2 * channels, std=0.7)
            for _ in range(num_sets)]
    slopes = torch.cat([x.new_ones(1), x.new_full((1, ), 0.2)]).detach()
    return x, anchor, slopes, sets


def values_and_grads(function, x, anchor, side, slopes, sets, **kwargs):
    out = function(x, anchor, side, slopes, sets, EPS, **kwargs)
    weight = torch.linspace(-1.0, 1.0, out.numel(), device=out.device)
    loss = (out * weight.view(out.shape)).sum()
    grads = torch.autograd.grad(loss, [x, anchor] + sets)
    return out, grads


# Each shape once in the fast tier, more points than one block (SHAPES[-1])
# with two sets on the target side (2-3 s per case in the interpreter);
# every shape, number of sets and side in the slow tier:
@pytest.mark.parametrize('shape, num_sets, side', fast_few(
    [(shape, num_sets, side) for shape in SHAPES for num_sets in (1, 2)
     for side in (False, True)],
    ((SHAPES[0], 1, False), (SHAPES[1], 2, False), (SHAPES[2], 1, True),
     (SHAPES[3], 2, True))))
def test_triton_equals_plain_path(shape, num_sets, side):
    x, anchor, slopes, sets = inputs(*shape, num_sets)
    out, grads = values_and_grads(fused_fourier_log_similarity, x, anchor,
                                  side, slopes, sets, node_path='triton')
    # The reference in float64: near f = 0 the gradient of log(f^2 + eps)
    # is ill-conditioned, and the plain path in float32 is itself up to
    # 2e-5 of the largest gradient off (measured on one CPU of CI's kind).
    x, anchor, slopes, *sets = (t.detach().double().requires_grad_()
                                for t in (x, anchor, slopes, *sets))
    expected, expected_grads = values_and_grads(
        fourier_log_similarity, x, anchor, side, slopes.detach(), sets,
        node_path='plain')
    torch.testing.assert_close(out, expected.float(), atol=1e-5, rtol=1e-5)
    for grad, expected_grad in zip(grads, expected_grads):
        scale = max(1.0, expected_grad.abs().max().item()) if (
            expected_grad.numel()) else 1.0
        torch.testing.assert_close(grad, expected_grad.float(),
                                   atol=2e-5 * scale, rtol=0)


def test_partial_sums_over_several_programs(monkeypatch):
    # Fewer programs than node blocks: each program sums several blocks
    # before the final reduction over programs.
    monkeypatch.setattr(node_terms_triton, 'MAX_PARTIALS', 2)
    monkeypatch.setattr(node_terms_triton, 'TILE_ANGLES', 64)
    x, anchor, slopes, sets = inputs(45, 2, 4, 6, 2, seed=1)
    _, grads = values_and_grads(fused_fourier_log_similarity, x, anchor,
                                True, slopes, sets, node_path='triton')
    _, expected = values_and_grads(fourier_log_similarity, x, anchor, True,
                                   slopes, sets, node_path='plain')
    for grad, expected_grad in zip(grads, expected):
        torch.testing.assert_close(grad, expected_grad, atol=2e-5, rtol=1e-5)


def test_triton_refuses_float64():
    x, anchor, slopes, sets = inputs(3, 1, 2, 2, 1)
    with pytest.raises(ValueError, match="node_path='triton'.*float32"):
        fused_fourier_log_similarity(x.double(), anchor.double(), False,
                                     slopes.double(),
                                     [points.double() for points in sets],
                                     EPS, node_path='triton')


def test_meta_device_takes_the_operator_without_launching(monkeypatch):
    # The default node path resolves to the Triton kernels on 'meta' (which
    # stands for a CUDA device); the fake implementation gives the shapes.
    def refuse(*args, **kwargs):
        raise AssertionError('a kernel was launched on meta')

    monkeypatch.setattr(node_terms_triton, 'estimate', refuse)
    monkeypatch.setattr(node_terms_triton, 'estimate_backward', refuse)
    meta = torch.device('meta')
    x = torch.randn(50, 2, 3, device=meta, requires_grad=True)
    anchor = torch.randn(2, 6, device=meta, requires_grad=True)
    sets = [torch.randn(2, 4, 6, device=meta, requires_grad=True)]
    slopes = torch.ones(2, device=meta)
    out = fused_fourier_log_similarity(x, anchor, True, slopes, sets, EPS)
    assert out.shape == (50, 2, 2) and out.device == meta
    out.sum().backward()
    assert x.grad.shape == x.shape and sets[0].grad.shape == sets[0].shape


def test_non_contiguous_sets_are_made_contiguous():
    # The kernels index the stacked sets as contiguous: a transposed view
    # given as the only set must give the values of its contiguous copy.
    x, anchor, slopes, sets = inputs(9, 3, 4, 5, 1)
    view = sets[0].detach().transpose(0, 1).contiguous().transpose(0, 1)
    assert not view.is_contiguous()
    torch.testing.assert_close(
        fused_fourier_log_similarity(x, anchor, True, slopes, [view], EPS,
                                     node_path='triton'),
        fused_fourier_log_similarity(x, anchor, True, slopes,
                                     [view.contiguous()], EPS,
                                     node_path='triton'))


def test_operator_is_registered():
    assert fourier_estimate._qualname == 'ikgat::fourier_estimate'
    assert hasattr(torch.ops.ikgat, 'fourier_estimate_backward')


# ------------------------------------------------------------ the layers

#: The registry's random-feature kernels, and MIKANConv's copula draws.
LAYERS = sorted(name for name, kernel_class in KERNELS.items()
                if kernel_class.has_spectral_points) + ['mikan']


def make_layer(name, node_path, in_channels, **kwargs):
    kernel_kwargs = dict(node_path=node_path)
    if name == 'mikan':
        return MIKANConv(in_channels, 4, heads=3, num_spectral_points=8,
                         kernel_kwargs=kernel_kwargs, **kwargs)
    return IKGATConv(in_channels, 4, heads=3, kernel=name,
                     num_spectral_points=8, kernel_kwargs=kernel_kwargs,
                     **kwargs)


def layer_values_and_grads(name, node_path, graph, training):
    x, edge_index, size = graph
    torch.manual_seed(0)
    in_channels = (x[0].size(1), x[1].size(1) if x[1] is not None else 5
                   ) if isinstance(x, tuple) else x.size(1)
    conv = make_layer(name, node_path, in_channels,
                      add_self_loops=not isinstance(x, tuple)).to(DEVICE)
    conv.train(training)
    torch.manual_seed(1)  # the same draw for the stochastic kernels
    out = conv(x, edge_index, size=size)
    weight = torch.linspace(-1.0, 1.0, out.numel(), device=out.device)
    params = [p for p in conv.parameters() if p.requires_grad]
    leaves = [t for t in (x if isinstance(x, tuple) else (x, ))
              if t is not None]
    grads = torch.autograd.grad((out * weight.view(out.shape)).sum(),
                                leaves + params, allow_unused=True)
    return out, grads


def graphs():
    x, edge_index = random_graph(25, 90, 5, seed=4)
    x_src, _ = random_graph(25, 1, 5, seed=5)
    x_dst, bipartite = random_graph(25, 70, 6, seed=6, num_dst=12)
    x_dst = x_dst[:12]
    to = dict(device=DEVICE)
    return {
        'homogeneous': (x.to(**to).requires_grad_(), edge_index.to(**to),
                        None),
        'bipartite': ((x_src.to(**to).requires_grad_(),
                       x_dst.to(**to).requires_grad_()),
                      bipartite.to(**to), None),
        'x_dst=None': ((x_src.to(**to).requires_grad_(), None),
                       bipartite.to(**to), (25, 12)),
    }


# Every layer on a homogeneous graph, the bipartite ones for the implicit
# kernel in the fast tier; every pairing in the slow one:
@pytest.mark.parametrize('name, graph', fast_few(
    [(name, graph) for name in LAYERS
     for graph in ('homogeneous', 'bipartite', 'x_dst=None')],
    (('direct', 'bipartite'), ('mikan', 'x_dst=None'))))
def test_layer_through_triton_equals_plain(name, graph):
    case = graphs()[graph]
    for training in (True, False):
        out, grads = layer_values_and_grads(name, 'triton', case, training)
        expected, expected_grads = layer_values_and_grads(
            name, 'plain', case, training)
        torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)
        for grad, expected_grad in zip(grads, expected_grads):
            if expected_grad is None:
                assert grad is None
                continue
            scale = max(1.0, expected_grad.abs().max().item())
            # A scalar parameter's gradient sums every node's and head's
            # terms: its float32 rounding (which on a GPU follows the order
            # of the sums) grows with their number.
            rtol = 5e-4 if expected_grad.numel() == 1 else 0
            torch.testing.assert_close(grad, expected_grad,
                                       atol=5e-5 * scale, rtol=rtol)


def test_both_slopes_occur_in_the_layer_tests():
    # The layer tests above exercise both LeakyReLU slopes: some edges have
    # e_ij > 0 (c = 1) and some e_ij <= 0 (c = negative_slope).
    x, edge_index, _ = graphs()['homogeneous']
    conv = make_layer('direct', 'plain', 5).to(DEVICE)
    torch.manual_seed(0)
    conv.reset_parameters()
    x_proj = conv.lin(x).view(-1, 3, 4)
    e = ((x_proj * conv.att_src).sum(-1)[edge_index[0]]
         + (x_proj * conv.att_dst).sum(-1)[edge_index[1]])
    assert (e > 0).any() and (e <= 0).any()


@pytest.mark.parametrize('limit,atol', [(1e3, 1e-6), (3e4, 1e-5)])
def test_sincos_of_the_kernels_matches_float64(limit, atol):
    # The kernels' sin and cos (one range reduction, then polynomials; no
    # slow path whose local array spills) against float64 sin and cos of
    # the same float32 angles, over a wide range and near the quadrant
    # boundaries.
    import triton
    import triton.language as tl
    jitted(node_terms_triton.estimate_kernel)

    @triton.jit
    def sincos_kernel(theta, sin_out, cos_out, N, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < N
        sin, cos = node_terms_triton.sincos_step(
            tl.load(theta + offs, mask=mask, other=0.))
        tl.store(sin_out + offs, sin, mask=mask)
        tl.store(cos_out + offs, cos, mask=mask)

    quarter_turns = torch.arange(-8, 9, device=DEVICE) * (torch.pi / 2)
    theta = torch.cat([
        torch.linspace(-limit, limit, 20001, device=DEVICE),
        quarter_turns + 1e-6, quarter_turns - 1e-6, quarter_turns,
        limit * (2 * torch.rand(4000, device=DEVICE) - 1)]).float()
    sin, cos = torch.empty_like(theta), torch.empty_like(theta)
    sincos_kernel[(triton.cdiv(theta.numel(), 1024), )](
        theta, sin, cos, theta.numel(), BLOCK=1024)
    exact = theta.double()
    torch.testing.assert_close(sin.double(), exact.sin(), atol=atol, rtol=0)
    torch.testing.assert_close(cos.double(), exact.cos(), atol=atol, rtol=0)
