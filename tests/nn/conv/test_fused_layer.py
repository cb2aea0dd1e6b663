"""IKGATConv and MIKANConv through the fused Triton attention against their
current path (kernel_edge_softmax then attention_aggregate): outputs,
returned attention weights, edge features and gradients, for every kernel of
the registry and both LeakyReLU slopes.

Without CUDA the switch fused_attention='always' runs the kernels in Triton's
interpreter (TRITON_INTERPRET=1, set by tests/conftest.py), so the graphs are
small.
"""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ikgat.nn.conv.ikgat_conv as ikgat_conv_module
from ikgat import IKGATConv, MIKANConv
from ikgat.kernels import KERNELS
from ikgat.nn import graph_cache
from ikgat.nn.conv.ikgat_conv import CSR_WITH_SELF_LOOPS
from tests.helpers import DEVICE, fast_few, random_graph

pytest.importorskip('triton')

KERNEL_NAMES = sorted(KERNELS)
TOLERANCE = 1e-5
#: Gradients, relative to max(1, |grad|): they reach scalar parameters
#: (IKAN's spectral transform) through sums over every node, head and
#: point, where float32 rounding alone moves them by several 1e-6 (taking
#: the cosines from NumPy's loops instead of ATen's, both within one ULP,
#: moved MIKANConv's transform bias gradient by 6e-6 on either path).  On
#: an H100 the two paths' IKAN gradients differed by up to 2.1e-5 of that
#: scale; where they differed by 1.1e-5, the fused gradient was 1.8e-5 and
#: the unfused one 6.8e-6 from float64 with the same draws
#: (benchmarks/results/archive/cuda-2026-11-27-h100, run 6).
GRAD_TOLERANCE = 3e-5


def count_fused_calls(monkeypatch):
    """Count the layer's calls of fused_attention (the test must see the
    fused path taken, not two runs of the same path)."""
    calls = []
    fused = ikgat_conv_module.gat_attention.fused_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(ikgat_conv_module.gat_attention,
                        'fused_attention', counted)
    return calls


def both_paths(conv, x, edge_index, monkeypatch, edge_attr=None):
    """Outputs, attention weights and gradients (inputs, then parameters) of
    the current path and of the fused path, same parameters and seed; x is
    a list of one or two node feature tensors (bipartite)."""
    inputs = list(x) + ([] if edge_attr is None else [edge_attr])
    calls = count_fused_calls(monkeypatch)
    results = []
    for switch in (False, 'always'):
        conv.fused_attention = switch
        conv.zero_grad(set_to_none=True)
        leaves = [t.detach().requires_grad_() for t in inputs]
        torch.manual_seed(5)  # the stochastic kernels' draws in training
        nodes = leaves[:len(x)]
        out, (ei, alpha) = conv(
            nodes[0] if len(nodes) == 1 else tuple(nodes), edge_index,
            edge_attr=None if edge_attr is None else leaves[-1],
            return_attention_weights=True)
        upstream = torch.linspace(-1, 1, out.numel(),
                                  device=out.device).view_as(out)
        loss = (out * upstream).sum() + (alpha * alpha).sum()
        loss.backward()
        grads = [leaf.grad for leaf in leaves] + [
            p.grad for p in conv.parameters() if p.grad is not None]
        results.append((out, ei, alpha, grads))
        if switch is False:
            assert not calls  # the current path
    assert calls  # the fused path was taken
    return results


def assert_close(current, fused):
    (out, ei, alpha, grads), (out_f, ei_f, alpha_f, grads_f) = current, fused
    assert torch.equal(ei, ei_f)
    assert alpha.dtype == alpha_f.dtype and out.dtype == out_f.dtype
    assert (out - out_f).abs().max() < TOLERANCE
    assert (alpha - alpha_f).abs().max() < TOLERANCE
    assert len(grads) == len(grads_f)
    for grad, grad_f in zip(grads, grads_f):
        assert (grad - grad_f).abs().max() < GRAD_TOLERANCE * max(
            1.0, grad.abs().max())


# Both slopes for every kernel, half of the registry with each training
# mode (the stochastic kernels draw in training, average in evaluation);
# the fast tier takes two kernels of each mode, one of them stochastic:
@pytest.mark.parametrize('kernel, negative_slope', fast_few(
    [(kernel, slope) for kernel in KERNEL_NAMES for slope in (0.2, 0.0)],
    (('direct', 0.2), ('implicit', 0.0))))
def test_fused_layer_equals_current_path(kernel, negative_slope,
                                         monkeypatch):
    x, edge_index = random_graph(14, 40, 5, seed=KERNEL_NAMES.index(kernel))
    torch.manual_seed(1)
    conv = IKGATConv(5, 3, heads=2, kernel=kernel, num_spectral_points=8,
                     negative_slope=negative_slope).to(DEVICE)
    conv.train(KERNEL_NAMES.index(kernel) % 2 == 0)
    current, fused = both_paths(conv, [x.to(DEVICE)], edge_index.to(DEVICE),
                                monkeypatch)
    assert_close(current, fused)


@pytest.mark.parametrize('kernel', [
    pytest.param('rbf', marks=pytest.mark.slow), 'direct'])
def test_fused_layer_with_edge_features_and_bipartite(kernel, monkeypatch):
    x_src, edge_index = random_graph(12, 36, 4, seed=3, num_dst=9)
    x_dst = torch.randn(9, 6, generator=torch.Generator().manual_seed(4))
    edge_attr = torch.randn(36, 2, generator=torch.Generator().manual_seed(5))
    torch.manual_seed(2)
    conv = IKGATConv((4, 6), 3, heads=2, kernel=kernel, edge_dim=2,
                     num_spectral_points=8, residual=True,
                     add_self_loops=False).to(DEVICE).train()
    current, fused = both_paths(conv, [x_src.to(DEVICE), x_dst.to(DEVICE)],
                                edge_index.to(DEVICE), monkeypatch,
                                edge_attr.to(DEVICE))
    assert_close(current, fused)


def test_fused_layer_with_edge_features_and_self_loops(monkeypatch):
    x, edge_index = random_graph(10, 30, 4, seed=6)
    edge_attr = torch.randn(30, 3, generator=torch.Generator().manual_seed(7))
    torch.manual_seed(3)
    conv = IKGATConv(4, 3, heads=2, kernel='rff', edge_dim=3,
                     num_spectral_points=8, negative_slope=0.0).to(DEVICE)
    current, fused = both_paths(conv, [x.to(DEVICE)], edge_index.to(DEVICE),
                                monkeypatch, edge_attr.to(DEVICE))
    assert_close(current, fused)


# MIKAN's evaluation draws in the fast tier: the one-pass draws test below.
@pytest.mark.parametrize('training', [
    True, pytest.param(False, marks=pytest.mark.slow)])
def test_fused_mikan_equals_current_path(training, monkeypatch):
    x, edge_index = random_graph(12, 36, 5, seed=8)
    torch.manual_seed(4)
    conv = MIKANConv(5, 3, heads=2, num_spectral_points=8).to(DEVICE)
    conv.train(training)
    current, fused = both_paths(conv, [x.to(DEVICE)], edge_index.to(DEVICE),
                                monkeypatch)
    assert_close(current, fused)


@pytest.mark.parametrize('layer', [
    pytest.param('implicit', marks=pytest.mark.slow), 'mikan'])
def test_evaluation_draws_in_one_pass_average_the_single_draws(layer,
                                                                monkeypatch):
    # In evaluation the fused path stacks the num_samples draws along the
    # heads of one pass: its outputs and weights are the means of those of
    # the same draws taken one at a time (training, no dropout).
    draws, heads = 3, 2
    x, edge_index = random_graph(12, 36, 5, seed=9)
    x, edge_index = x.to(DEVICE), edge_index.to(DEVICE)
    torch.manual_seed(6)
    if layer == 'mikan':
        conv = MIKANConv(5, 3, heads=heads, num_spectral_points=8,
                         num_samples=draws)
    else:
        conv = IKGATConv(5, 3, heads=heads, kernel='implicit',
                         num_spectral_points=8,
                         kernel_kwargs=dict(num_samples=draws))
    conv = conv.to(DEVICE)
    conv.fused_attention = 'always'
    noise = torch.randn(1, draws, heads, conv.kernel.latent_dim,
                        device=DEVICE)
    chosen = []

    def given_noise(*shape, **kwargs):  # (G, S, H, D) at once, or (G, H, D)
        return noise if len(shape) == 4 else noise[:, chosen[-1]]

    monkeypatch.setattr(torch, 'randn', given_noise)
    with torch.no_grad():
        out, (_, alpha) = conv.eval()(x, edge_index,
                                      return_attention_weights=True)
        conv.train()
        singles = []
        for draw in range(draws):
            chosen.append(draw)
            singles.append(conv(x, edge_index,
                                return_attention_weights=True))
    torch.testing.assert_close(out, torch.stack(
        [single[0] for single in singles]).mean(0), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha, torch.stack(
        [single[1][1] for single in singles]).mean(0), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(singles[0][0], singles[1][0], atol=1e-3)


def with_self_loops_and_duplicates(edge_index):
    """The edges, a self-loop given twice, another once, and four edges
    given again."""
    loops = torch.tensor([[1, 1, 3], [1, 1, 3]])
    return torch.cat([edge_index, loops, edge_index[:, :4]], dim=1)


def outputs_and_gradients(conv, inputs, edge_index, weights, **kwargs):
    """The output and the gradients of the inputs (one tensor, or a pair
    whose target side may be None) and of the parameters."""
    leaves = [None if t is None else t.detach().requires_grad_()
              for t in inputs]
    conv.zero_grad(set_to_none=True)
    torch.manual_seed(6)  # the stochastic kernels' draws in training
    x = leaves[0] if len(leaves) == 1 else tuple(leaves)
    out = conv(x, edge_index, return_attention_weights=weights or None,
               **kwargs)
    out = out[0] if weights else out
    upstream = torch.linspace(-1, 1, out.numel(), device=out.device)
    (out * upstream.view_as(out)).sum().backward()
    return [out] + [leaf.grad for leaf in leaves if leaf is not None] + [
        p.grad for p in conv.parameters() if p.grad is not None]


def assert_same(results, other):
    """The outputs within TOLERANCE, the gradients within GRAD_TOLERANCE,
    both relative to max(1, the largest magnitude)."""
    for i, (a, b) in enumerate(zip(results, other, strict=True)):
        scale = max(1.0, b.abs().max().item()) if b.numel() else 1.0
        tolerance = TOLERANCE if i == 0 else GRAD_TOLERANCE
        assert torch.allclose(a, b, rtol=0.0, atol=tolerance * scale)


# A node-term, a random-feature and a stochastic kernel in the fast tier:
@pytest.mark.parametrize('kernel', fast_few(KERNEL_NAMES, ('direct', )))
def test_self_loops_added_in_the_sort_equal_the_self_looped_edges(kernel):
    # Without returned weights or edge features, the fused path adds the
    # self-loops in its CSR sort instead of selecting edges (no host sync on
    # a new graph).  Same output and gradients as the fused path over the
    # self-looped edges (taken when the weights are returned), given
    # self-loops and duplicate edges included.
    x, edge_index = random_graph(12, 36, 5, seed=11 + len(kernel))
    edge_index = with_self_loops_and_duplicates(edge_index).to(DEVICE)
    torch.manual_seed(7)
    conv = IKGATConv(5, 3, heads=2, kernel=kernel, num_spectral_points=8)
    conv = conv.to(DEVICE).train(len(kernel) % 2 == 0)
    conv.fused_attention = 'always'
    in_sort = outputs_and_gradients(conv, [x.to(DEVICE)], edge_index, False)
    assert graph_cache.lookup(edge_index, CSR_WITH_SELF_LOOPS,
                              (12, 12, 12)) is not None
    assert_same(in_sort, outputs_and_gradients(conv, [x.to(DEVICE)],
                                               edge_index, True))


@pytest.mark.parametrize('shared_target', [False, True])
def test_self_loops_in_the_sort_on_bipartite_graphs(shared_target):
    # Self-loops for the min(N_src, N_dst) nodes that are both, as GATConv
    # adds them, against the unfused path; x_dst=None takes the number of
    # targets from size.
    x_src, edge_index = random_graph(12, 30, 4, seed=12, num_dst=9)
    edge_index = with_self_loops_and_duplicates(edge_index).to(DEVICE)
    x_dst = torch.randn(9, 4, generator=torch.Generator().manual_seed(13))
    torch.manual_seed(8)
    if shared_target:
        conv = IKGATConv((4, 4), 3, heads=2, kernel='rbf')
        inputs, kwargs = [x_src, None], dict(size=(12, 9))
    else:
        conv = MIKANConv((4, 4), 3, heads=2, num_spectral_points=8).eval()
        inputs, kwargs = [x_src, x_dst], {}
    conv = conv.to(DEVICE)
    inputs = [None if t is None else t.to(DEVICE) for t in inputs]
    results = []
    for switch in ('always', False):
        conv.fused_attention = switch
        results.append(outputs_and_gradients(conv, inputs, edge_index, False,
                                             **kwargs))
    assert results[0][0].shape[0] == 9
    assert_same(*results)


@pytest.mark.slow  # 25 random graphs through the interpreter (12 s)
@settings(max_examples=25, deadline=None)
@given(num_nodes=st.integers(0, 8), data=st.data(),
       kernel=st.sampled_from(['rbf', 'direct', 'implicit']),
       heads=st.integers(1, 3), channels=st.integers(1, 3),
       training=st.booleans())
def test_self_loops_in_the_sort_on_random_graphs(num_nodes, data, kernel,
                                                 heads, channels, training):
    # Empty graphs, isolated nodes, duplicate edges and self-loops: the
    # fused path with the self-loops added in its sort equals the unfused
    # path, outputs and gradients.
    node = st.integers(0, max(num_nodes - 1, 0))
    edges = data.draw(st.lists(st.tuples(node, node),
                               max_size=20 if num_nodes else 0))
    edge_index = torch.tensor(edges, dtype=torch.long).view(-1, 2).t()
    x = torch.randn(num_nodes, 4, generator=torch.Generator().manual_seed(
        len(edges)))
    torch.manual_seed(9)
    conv = IKGATConv(4, channels, heads=heads, kernel=kernel,
                     num_spectral_points=8).to(DEVICE).train(training)
    results = []
    for switch in ('always', False):
        conv.fused_attention = switch
        results.append(outputs_and_gradients(conv, [x.to(DEVICE)],
                                             edge_index.to(DEVICE), False))
    assert_same(*results)


def test_sorted_edges_are_kept_for_the_same_edge_index(monkeypatch):
    x, edge_index = random_graph(10, 30, 4, seed=9)
    x, edge_index = x.to(DEVICE), edge_index.to(DEVICE)
    conv = IKGATConv(4, 3, heads=2, kernel='rbf', add_self_loops=False)
    conv = conv.to(DEVICE).eval()
    conv.fused_attention = 'always'
    sorts = []
    prepare = ikgat_conv_module.gat_attention.prepare_csr
    monkeypatch.setattr(ikgat_conv_module.gat_attention, 'prepare_csr',
                        lambda *args: sorts.append(1) or prepare(*args))
    first = conv(x, edge_index)
    assert torch.equal(conv(x, edge_index), first) and len(sorts) == 1
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 10  # in place: sorted again
    conv(x, edge_index)
    assert len(sorts) == 2
    conv(x, edge_index.clone())  # another tensor: sorted again
    assert len(sorts) == 3


def test_fused_path_rules():
    x, edge_index = random_graph(6, 12, 4, seed=10)
    conv = IKGATConv(4, 3, heads=2, dropout=0.5)
    # The default switch runs the Triton kernels on CUDA tensors only:
    assert conv.fused_attention is True
    expected = x.device.type == 'cuda'
    assert conv._route(edge_index, x).fused is expected
    conv.fused_attention = 'always'
    # Attention dropout is fused too, in training and evaluation:
    assert conv._route(edge_index, x).fused is True
    conv.eval()
    assert conv._route(edge_index, x).fused is True
    assert conv._route(edge_index, x.double()).fused is False
    conv.lean_aggregation = False
    assert conv._route(edge_index, x).fused is False
    conv.lean_aggregation = True
    conv.fused_attention = False
    assert conv._route(edge_index, x).fused is False
    conv.fused_attention = 'yes'
    with pytest.raises(ValueError, match="'fused_attention' must be True, "
                       "False or 'always'"):
        conv(x, edge_index)


def test_gpu_speed_times_both_paths():
    from benchmarks import gpu_speed
    for name in ('IKGATConv-rbf', 'IKGATConv-direct', 'MIKANConv'):
        assert name + '-unfused' in gpu_speed.MODELS
        fused = gpu_speed.build_model(name, 16)
        unfused = gpu_speed.build_model(name + '-unfused', 16)
        assert type(fused) is type(unfused)
        assert fused.fused_attention is True
        assert unfused.fused_attention is False
    two_layer = gpu_speed.build_model('IKGATConv-direct-unfused', 16, 5)
    assert [two_layer.conv1.fused_attention,
            two_layer.conv2.fused_attention] == [False, False]
    assert two_layer.conv2.out_channels == 5 and two_layer.dropout == 0.0
    args = gpu_speed.parse_args(['--smoke', '--output', '/tmp/x.md',
                                 '--models', 'GATConv', 'MIKANConv-unfused'])
    assert args.models == ['GATConv', 'MIKANConv-unfused']


def test_gpu_speed_reports_running_out_of_memory_in_any_round():
    from benchmarks import gpu_speed
    calls = []

    def out_of_memory():
        raise torch.OutOfMemoryError('CUDA out of memory')

    def out_of_memory_later():  # after the warm-up and one timed round
        calls.append(1)
        if len(calls) > 2:
            out_of_memory()

    timer = gpu_speed.Timer(torch.device('cpu'))
    medians = gpu_speed.measure_interleaved(
        {'warm-up': out_of_memory, 'later': out_of_memory_later,
         'fits': lambda: None}, timer, warmup=1, rounds=3)
    assert medians['warm-up'] == medians['later'] == 'OOM'
    assert isinstance(medians['fits'], float)
