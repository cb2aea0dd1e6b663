import pytest
import torch
from torch_geometric.utils import coalesce, softmax, to_torch_coo_tensor

from ikgat import IKGATConv, MIKANConv
from ikgat.ops.edge_softmax import (
    edge_logit,
    kernel_edge_softmax,
    select,
    select_mask,
)
from tests.helpers import random_graph


def plain_edge_softmax(score_src, score_dst, edge_index, num_dst,
                       edge_gate=None, negative_slope=0.2):
    """IKGATConv.edge_update's way: [E, H, 3] gathers, where, PyG softmax."""
    src, dst = edge_index
    rows = score_dst if score_dst.size(0) == 1 and num_dst != 1 \
        else score_dst[dst]
    score = score_src[src] + rows
    gate = score[..., 2]
    if edge_gate is not None:
        gate = gate + edge_gate
    positive = gate > 0
    logit = torch.where(positive, score[..., 0], score[..., 1])
    if edge_gate is not None:
        logit = logit + torch.where(positive, edge_gate,
                                    negative_slope * edge_gate)
    return softmax(logit, dst, num_nodes=num_dst)


def inputs(num_src, num_dst, num_edges, heads, seed, dtype=torch.float32,
           shared_dst=False, with_edge_gate=False):
    generator = torch.Generator().manual_seed(seed)
    score_src = torch.randn(num_src, heads, 3, generator=generator,
                            dtype=dtype)
    score_dst = torch.randn(1 if shared_dst else num_dst, heads, 3,
                            generator=generator, dtype=dtype)
    edge_index = torch.stack([
        torch.randint(0, max(num_src, 1), (num_edges, ), generator=generator),
        # targets from the first half only: the others are isolated
        torch.randint(0, max(num_dst // 2, 1), (num_edges, ),
                      generator=generator),
    ])
    edge_gate = torch.randn(num_edges, heads, generator=generator,
                            dtype=dtype).requires_grad_() \
        if with_edge_gate else None
    return (score_src.requires_grad_(), score_dst.requires_grad_(),
            edge_index, edge_gate)


def grads_of(out, tensors, grad):
    tensors = [t for t in tensors if t is not None]
    return torch.autograd.grad(out, tensors, grad, allow_unused=True)


CASES = [
    {'num_src': 30, 'num_dst': 30},
    {'num_src': 25, 'num_dst': 11},  # bipartite
    {'num_src': 25, 'num_dst': 11, 'shared_dst': True},  # x_dst=None
    {'num_src': 30, 'num_dst': 30, 'with_edge_gate': True},
    {'num_src': 25, 'num_dst': 11, 'shared_dst': True,
     'with_edge_gate': True},
]


@pytest.mark.parametrize('chunk_size', [None, 1, 7])
@pytest.mark.parametrize('case', CASES)
def test_equals_gather_where_softmax_with_gradients(chunk_size, case):
    num_dst = case['num_dst']
    score_src, score_dst, edge_index, edge_gate = inputs(
        case['num_src'], num_dst, 200, 3, seed=0,
        shared_dst=case.get('shared_dst', False),
        with_edge_gate=case.get('with_edge_gate', False))
    expected = plain_edge_softmax(score_src, score_dst, edge_index, num_dst,
                                  edge_gate)
    alpha = kernel_edge_softmax(score_src, score_dst, edge_index, num_dst,
                                edge_gate, chunk_size=chunk_size)
    assert alpha.shape == (200, 3)
    assert (alpha - expected).abs().max() < 1e-6
    grad = torch.randn_like(alpha)
    tensors = [score_src, score_dst, edge_gate]
    for value, reference in zip(grads_of(alpha, tensors, grad),
                                grads_of(expected, tensors, grad)):
        assert value.shape == reference.shape
        assert (value - reference).abs().max() < 1e-6


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16,
                                   torch.float32, torch.float64])
def test_select_is_where_bit_for_bit(dtype):
    generator = torch.Generator().manual_seed(0)
    gate, first, second = (torch.randn(64, 5, generator=generator).to(dtype)
                           for _ in range(3))
    specials = torch.tensor([0.0, -0.0, float('inf'), float('-inf'),
                             float('nan'), 1e-30, -1e-30], dtype=dtype)
    gate[:7, 0], first[:7, 1], second[:7, 2] = specials, specials, specials
    gate[7:14, 3] = specials
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[
        gate.element_size()]
    mask = select_mask(gate, torch.empty(gate.shape, dtype=bits))
    out = select(mask, first, second, torch.empty_like(first))
    expected = torch.where(gate > 0, first, second)
    assert torch.equal(out.view(bits), expected.view(bits))
    # out may alias the first input:
    aliased = select(mask, first.clone(), second, first.clone())
    assert torch.equal(aliased.view(bits), expected.view(bits))


@pytest.mark.parametrize('chunk_size', [None, 1, 7])
@pytest.mark.parametrize('case', CASES)
def test_logits_equal_edge_logit_bit_for_bit(chunk_size, case):
    """Without dropout alpha is exp(logit - max) / sum: the same logits
    give the same alpha, bit for bit, as exp and the sums of a one-chunk
    reference in the same order."""
    num_dst = case['num_dst']
    score_src, score_dst, edge_index, edge_gate = inputs(
        case['num_src'], num_dst, 200, 3, seed=2,
        shared_dst=case.get('shared_dst', False),
        with_edge_gate=case.get('with_edge_gate', False))
    src, dst = edge_index
    rows = score_dst.expand(num_dst, -1, -1) if score_dst.size(0) == 1 \
        else score_dst
    logit, _ = edge_logit(score_src[src], rows[dst], edge_gate, 0.2)
    group_max = torch.full((num_dst, 3), float('-inf')).scatter_reduce(
        0, dst.view(-1, 1).expand_as(logit), logit, reduce='amax')
    part = (logit - group_max[dst]).exp()
    group_sum = torch.zeros(num_dst, 3).index_add_(0, dst, part) + 1e-16
    expected = part / group_sum[dst]
    with torch.no_grad():
        alpha = kernel_edge_softmax(score_src, score_dst, edge_index, num_dst,
                                    edge_gate, chunk_size=chunk_size)
    if chunk_size is None:  # one chunk: the same sums in the same order
        assert torch.equal(alpha, expected)
    else:
        assert (alpha - expected).abs().max() < 1e-6


@pytest.mark.parametrize('chunk_size', [None, 3])
@pytest.mark.parametrize('shared_dst', [False, True])
def test_gradcheck_float64(chunk_size, shared_dst):
    score_src, score_dst, edge_index, edge_gate = inputs(
        6, 5, 17, 2, seed=1, dtype=torch.float64, shared_dst=shared_dst,
        with_edge_gate=True)
    assert torch.autograd.gradcheck(
        lambda s, t, e: kernel_edge_softmax(s, t, edge_index, 5, e,
                                            chunk_size=chunk_size),
        (score_src, score_dst, edge_gate))


def gat_softmax(gate_src, gate_dst, edge_index, num_dst, edge_gate=None,
                negative_slope=0.2):
    """GATConv's way: gather the gates, LeakyReLU, PyG softmax."""
    src, dst = edge_index
    rows = gate_dst if gate_dst.size(0) == 1 and num_dst != 1 \
        else gate_dst[dst]
    gate = (gate_src[src] + rows)[..., 0]
    if edge_gate is not None:
        gate = gate + edge_gate
    return softmax(torch.nn.functional.leaky_relu(gate, negative_slope), dst,
                   num_nodes=num_dst)


@pytest.mark.parametrize('chunk_size', [None, 1, 7])
@pytest.mark.parametrize('case', CASES)
def test_gates_alone_give_gat_softmax_with_gradients(chunk_size, case):
    num_dst = case['num_dst']
    score_src, score_dst, edge_index, edge_gate = inputs(
        case['num_src'], num_dst, 200, 3, seed=5,
        shared_dst=case.get('shared_dst', False),
        with_edge_gate=case.get('with_edge_gate', False))
    gate_src = score_src.detach()[..., 2:].clone().requires_grad_()
    gate_dst = score_dst.detach()[..., 2:].clone().requires_grad_()
    expected = gat_softmax(gate_src, gate_dst, edge_index, num_dst, edge_gate,
                           negative_slope=0.3)
    alpha = kernel_edge_softmax(gate_src, gate_dst, edge_index, num_dst,
                                edge_gate, negative_slope=0.3,
                                chunk_size=chunk_size)
    assert (alpha - expected).abs().max() < 1e-6
    grad = torch.randn_like(alpha)
    tensors = [gate_src, gate_dst, edge_gate]
    for value, reference in zip(grads_of(alpha, tensors, grad),
                                grads_of(expected, tensors, grad)):
        assert value.shape == reference.shape
        assert (value - reference).abs().max() < 1e-6


@pytest.mark.parametrize('shared_dst', [False, True])
def test_gates_alone_gradcheck_float64(shared_dst):
    score_src, score_dst, edge_index, edge_gate = inputs(
        6, 5, 17, 2, seed=6, dtype=torch.float64, shared_dst=shared_dst,
        with_edge_gate=True)
    gate_src = score_src.detach()[..., :1].clone().requires_grad_()
    gate_dst = score_dst.detach()[..., :1].clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda s, t, e: kernel_edge_softmax(s, t, edge_index, 5, e,
                                            chunk_size=3),
        (gate_src, gate_dst, edge_gate))


def test_rbf_layer_passes_the_gates_alone_and_equals_gatconv(monkeypatch):
    from torch_geometric.nn import GATConv

    import ikgat.nn.conv.ikgat_conv as module
    slots = []
    real = module.kernel_edge_softmax

    def spy(score_src, *args, **kwargs):
        slots.append(score_src.size(-1))
        return real(score_src, *args, **kwargs)

    monkeypatch.setattr(module, 'kernel_edge_softmax', spy)
    x, edge_index = random_graph(40, 160, 12, seed=7)
    for kernel, p in (('rbf', 2.0), ('rbf', 3.0), ('direct', 2.0)):
        torch.manual_seed(0)
        IKGATConv(12, 4, heads=3, kernel=kernel, p=p)(x, edge_index)
    assert slots == [1, 3, 3]
    torch.manual_seed(0)
    ours = IKGATConv(12, 4, heads=3, kernel='rbf', p=2.0)
    gat = GATConv(12, 4, heads=3)
    gat.load_state_dict(ours.state_dict(), strict=False)
    x.requires_grad_()
    out, ref = ours(x, edge_index), gat(x, edge_index)
    assert (out - ref).abs().max() < 1e-5
    grad = torch.randn_like(out)
    mine = torch.autograd.grad(out, [x, ours.att_src], grad)
    theirs = torch.autograd.grad(ref, [x, gat.att_src], grad)
    for value, reference in zip(mine, theirs):
        assert (value - reference).abs().max() < 1e-5


def test_empty_edge_set():
    score_src, score_dst, _, _ = inputs(4, 3, 0, 2, seed=2)
    edge_index = torch.empty(2, 0, dtype=torch.long)
    alpha = kernel_edge_softmax(score_src, score_dst, edge_index, 3)
    assert alpha.shape == (0, 2)
    grads = torch.autograd.grad(alpha.sum(), [score_src, score_dst])
    assert all(not grad.any() for grad in grads)


def test_saves_only_alpha_indices_and_node_scores():
    score_src, score_dst, edge_index, edge_gate = inputs(
        50, 50, 400, 4, seed=3, with_edge_gate=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(
            lambda t: saved.append(t) or t, lambda t: t):
        alpha = kernel_edge_softmax(score_src, score_dst, edge_index, 50,
                                    edge_gate)
    shapes = sorted(tuple(t.shape) for t in saved)
    assert shapes == sorted([(400, 4), (50, 4, 3), (50, 4, 3), (400, 4),
                             (400, ), (400, )])
    assert not any(t.dim() == 3 and t.size(0) == 400 for t in saved)
    del alpha


def test_bad_inputs():
    score_src, score_dst, edge_index, _ = inputs(5, 5, 10, 2, seed=4)
    with pytest.raises(ValueError, match='score_src'):
        kernel_edge_softmax(score_src[..., :2], score_dst, edge_index, 5)
    with pytest.raises(ValueError, match='edge_index'):
        kernel_edge_softmax(score_src, score_dst, edge_index[0], 5)
    with pytest.raises(ValueError, match='edge_gate'):
        kernel_edge_softmax(score_src, score_dst, edge_index, 5,
                            torch.zeros(10, 3))
    with pytest.raises(ValueError, match='chunk_size'):
        kernel_edge_softmax(score_src, score_dst, edge_index, 5,
                            chunk_size=0)


# ------------------------------------------------- inside IKGATConv / MIKAN


def both_paths(conv, x, edge_index, edge_attr=None, size=None, seed=0):
    """Output, attention weights and gradients with the lean edge softmax,
    then with edge_update (PyG's edge_updater), same dropout draws."""
    results = []
    for lean in (True, False):
        conv.lean_edge_softmax = lean
        torch.manual_seed(seed)
        out, (_, alpha) = conv(x, edge_index, edge_attr, size=size,
                               return_attention_weights=True)
        leaves = [p for p in conv.parameters() if p.requires_grad]
        leaves += [t for t in (x if isinstance(x, tuple) else (x, ))
                   if t is not None and t.requires_grad]
        if edge_attr is not None and edge_attr.requires_grad:
            leaves.append(edge_attr)
        grad = torch.randn(out.shape, generator=torch.Generator()
                           .manual_seed(1))
        grads = torch.autograd.grad(out, leaves, grad, allow_unused=True)
        results.append((out.detach(), alpha.detach(), grads))
    del conv.lean_edge_softmax
    return results


def max_abs(tensor):
    return tensor.abs().max().item() if tensor.numel() else 0.0


def assert_same(results, tolerance=1e-6, grad_tolerance=1e-5):
    """Values within tolerance; gradients of the parameters sum over all
    edges in another order, so within grad_tolerance relative to their
    size (float32 rounding; see the float64 test for exactness)."""
    (out, alpha, grads), (ref_out, ref_alpha, ref_grads) = results
    assert alpha.shape == ref_alpha.shape
    assert max_abs(alpha - ref_alpha) < tolerance
    assert max_abs(out - ref_out) < tolerance
    assert len(grads) == len(ref_grads)
    for grad, ref_grad in zip(grads, ref_grads):
        assert (grad is None) == (ref_grad is None)
        if grad is not None:
            scale = 1 + max_abs(ref_grad)
            assert max_abs(grad - ref_grad) < grad_tolerance * scale


@pytest.mark.parametrize('kernel', ['rbf', 'direct', 'rff', 'poly'])
@pytest.mark.parametrize('edge_dim', [None, 3])
def test_layer_equals_edge_updater(kernel, edge_dim):
    x, edge_index = random_graph(40, 200, 6, seed=5)
    edge_index[:, :6] = torch.tensor([[3] * 6, [3] * 6])  # self-loops too
    edge_attr = torch.randn(200, 3).requires_grad_() if edge_dim else None
    torch.manual_seed(6)
    conv = IKGATConv(6, 5, heads=3, kernel=kernel, num_spectral_points=8,
                     edge_dim=edge_dim, dropout=0.3)
    assert_same(both_paths(conv, x.requires_grad_(), edge_index, edge_attr))


@pytest.mark.parametrize('kernel', ['direct', 'rff'])
def test_layer_equals_edge_updater_float64(kernel):
    x, edge_index = random_graph(30, 150, 6, seed=16)
    torch.manual_seed(17)
    conv = IKGATConv(6, 5, heads=3, kernel=kernel, num_spectral_points=8,
                     edge_dim=2, dropout=0.3).double()
    edge_attr = torch.randn(150, 2, dtype=torch.float64).requires_grad_()
    x = x.double().requires_grad_()
    assert_same(both_paths(conv, x, edge_index, edge_attr),
                tolerance=1e-12, grad_tolerance=1e-12)


@pytest.mark.parametrize('with_dst', [True, False])
def test_layer_equals_edge_updater_bipartite_isolated_targets(with_dst):
    x_src, _ = random_graph(20, 0, 7, seed=7)
    x_dst, _ = random_graph(12, 0, 5, seed=8)
    _, edge_index = random_graph(20, 70, 1, seed=9, num_dst=6)  # 6..11 bare
    torch.manual_seed(10)
    conv = IKGATConv((7, 5), 4, heads=2, add_self_loops=False, edge_dim=2)
    edge_attr = torch.randn(70, 2).requires_grad_()
    x = (x_src.requires_grad_(), x_dst.requires_grad_() if with_dst else None)
    size = None if with_dst else (20, 12)
    assert_same(both_paths(conv, x, edge_index, edge_attr, size=size))


def test_layer_equals_edge_updater_mikan():
    x, edge_index = random_graph(30, 120, 6, seed=11)
    torch.manual_seed(12)
    conv = MIKANConv(6, 4, heads=3, num_spectral_points=8)
    assert_same(both_paths(conv, x.requires_grad_(), edge_index))
    conv.eval()  # deterministic evaluation
    assert_same(both_paths(conv, x, edge_index))


@pytest.mark.parametrize('add_self_loops', [True, False])
def test_layer_equals_edge_updater_empty_graph(add_self_loops):
    x = torch.randn(5, 4).requires_grad_()
    edge_index = torch.empty(2, 0, dtype=torch.long)
    torch.manual_seed(13)
    conv = IKGATConv(4, 3, heads=2, add_self_loops=add_self_loops)
    assert_same(both_paths(conv, x, edge_index))


def test_layer_saves_no_edge_times_three_tensor():
    x, edge_index = random_graph(30, 300, 6, seed=14)
    conv = IKGATConv(6, 4, heads=2, kernel='direct', num_spectral_points=8)

    def per_edge_saved(lean):
        conv.lean_edge_softmax = lean
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: saved.append(t) or t, lambda t: t):
            _, (edges, _) = conv(x, edge_index,
                                 return_attention_weights=True)
        num_edges = edges.size(1)
        return num_edges, [t for t in saved
                           if t.dim() > 0 and t.size(0) == num_edges]

    num_edges, lean = per_edge_saved(True)
    _, plain = per_edge_saved(False)
    del conv.lean_edge_softmax
    # alpha (E, H), saved by the edge softmax and by the aggregation, and
    # the two index rows:
    assert lean and all(t.numel() <= num_edges * 2 for t in lean)
    # edge_update's slope masks, logits, exponentials, ... :
    assert (sum(t.numel() * t.element_size() for t in lean) <
            sum(t.numel() * t.element_size() for t in plain))


def test_lean_edge_softmax_only_where_edge_updater_would_just_call_it(
        monkeypatch):
    import ikgat.nn.conv.ikgat_conv as module
    calls = []
    lean = module.kernel_edge_softmax

    def counting(*args, **kwargs):
        calls.append(1)
        return lean(*args, **kwargs)

    monkeypatch.setattr(module, 'kernel_edge_softmax', counting)
    x, edge_index = random_graph(15, 50, 5, seed=15)
    conv = IKGATConv(5, 4, heads=2)
    expected = conv(x, edge_index)
    assert len(calls) == 1
    seen = []
    handle = conv.register_edge_update_forward_hook(
        lambda module, inputs, output: seen.append(output))
    assert torch.allclose(conv(x, edge_index), expected, atol=1e-6)
    assert len(calls) == 1 and len(seen) == 1
    handle.remove()
    # A sparse adjacency keeps PyG's path:
    adj_t = to_torch_coo_tensor(coalesce(edge_index).flip(0), size=(15, 15))
    conv(x, adj_t)
    assert len(calls) == 1
    conv(x, edge_index)
    assert len(calls) == 2
