import pytest
import torch
from torch_geometric.utils import scatter

from ikgat.ops.aggregation import attention_aggregate


def plain_aggregate(alpha, x_src, edge_index, num_dst):
    """Gather, multiply, scatter: the E x H x C way of PyG's propagate."""
    message = alpha.unsqueeze(-1) * x_src[edge_index[0]]
    return scatter(message, edge_index[1], 0, dim_size=num_dst,
                   reduce='sum')


def inputs(num_src, num_dst, num_edges, heads, channels, seed,
           dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    alpha = torch.rand(num_edges, heads, generator=generator, dtype=dtype)
    x_src = torch.randn(num_src, heads, channels, generator=generator,
                        dtype=dtype)
    edge_index = torch.stack([
        torch.randint(0, max(num_src, 1), (num_edges, ), generator=generator),
        torch.randint(0, max(num_dst, 1), (num_edges, ), generator=generator),
    ])
    return alpha.requires_grad_(), x_src.requires_grad_(), edge_index


@pytest.mark.parametrize('chunk_size', [None, 1, 7, 1000])
@pytest.mark.parametrize('num_src,num_dst', [(30, 30), (25, 11)])
def test_equals_gather_multiply_scatter_with_gradients(chunk_size, num_src,
                                                       num_dst):
    alpha, x_src, edge_index = inputs(num_src, num_dst, 200, 3, 5, seed=0)
    expected = plain_aggregate(alpha, x_src, edge_index, num_dst)
    out = attention_aggregate(alpha, x_src, edge_index, num_dst,
                              chunk_size=chunk_size)
    assert out.shape == (num_dst, 3, 5)
    assert (out - expected).abs().max() < 1e-6

    grad = torch.randn_like(out)
    expected_grads = torch.autograd.grad(expected, [alpha, x_src], grad)
    grads = torch.autograd.grad(out, [alpha, x_src], grad)
    for value, reference in zip(grads, expected_grads):
        assert value.shape == reference.shape
        assert (value - reference).abs().max() < 1e-6


@pytest.mark.parametrize('chunk_size', [None, 3])
def test_gradcheck_float64(chunk_size):
    alpha, x_src, edge_index = inputs(6, 4, 17, 2, 3, seed=1,
                                      dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda a, x: attention_aggregate(a, x, edge_index, 4, chunk_size),
        (alpha, x_src))


def test_gradient_to_one_input_only():
    alpha, x_src, edge_index = inputs(10, 10, 40, 2, 3, seed=2)
    grad = torch.randn(10, 2, 3)
    (expected, ) = torch.autograd.grad(
        plain_aggregate(alpha, x_src.detach(), edge_index, 10), [alpha], grad)
    (value, ) = torch.autograd.grad(
        attention_aggregate(alpha, x_src.detach(), edge_index, 10), [alpha],
        grad)
    assert (value - expected).abs().max() < 1e-6
    (expected, ) = torch.autograd.grad(
        plain_aggregate(alpha.detach(), x_src, edge_index, 10), [x_src], grad)
    (value, ) = torch.autograd.grad(
        attention_aggregate(alpha.detach(), x_src, edge_index, 10), [x_src],
        grad)
    assert (value - expected).abs().max() < 1e-6


def test_non_contiguous_inputs_and_int32_indices():
    alpha, x_src, edge_index = inputs(12, 9, 50, 4, 3, seed=3)
    alpha_t = alpha.detach().t().contiguous().t().requires_grad_()  # strided
    x_t = x_src.detach().permute(2, 0, 1).contiguous().permute(
        1, 2, 0).requires_grad_()
    edges = edge_index.t().contiguous().t().int()
    assert not alpha_t.is_contiguous() and not x_t.is_contiguous()
    assert not edges.is_contiguous()
    out = attention_aggregate(alpha_t, x_t, edges, 9, chunk_size=8)
    expected = plain_aggregate(alpha, x_src, edge_index, 9)
    assert (out - expected).abs().max() < 1e-6
    # An expanded (stride-0) upstream gradient, as from out.mean(dim=1):
    out.mean(dim=1).sum().backward()
    expected.mean(dim=1).sum().backward()
    assert (alpha_t.grad - alpha.grad).abs().max() < 1e-6
    assert (x_t.grad - x_src.grad).abs().max() < 1e-6


@pytest.mark.parametrize('num_src', [0, 5])
def test_empty_edge_set(num_src):
    alpha, x_src, edge_index = inputs(num_src, 4, 0, 2, 3, seed=4)
    out = attention_aggregate(alpha, x_src, edge_index, 4)
    assert out.shape == (4, 2, 3) and not out.any()
    out.sum().backward()
    assert alpha.grad.shape == (0, 2)
    assert x_src.grad.shape == (num_src, 2, 3) and not x_src.grad.any()


def test_float64_and_promotion():
    alpha, x_src, edge_index = inputs(8, 8, 30, 2, 2, seed=5,
                                      dtype=torch.float64)
    out = attention_aggregate(alpha, x_src, edge_index, 8)
    assert out.dtype == torch.float64
    expected = plain_aggregate(alpha, x_src, edge_index, 8)
    assert (out - expected).abs().max() < 1e-12
    mixed = attention_aggregate(alpha.float(), x_src, edge_index, 8)
    assert mixed.dtype == torch.float64


def test_no_edge_by_channel_tensor_is_saved_for_backward():
    num_edges, heads, channels = 4000, 4, 8
    alpha, x_src, edge_index = inputs(100, 100, num_edges, heads, channels,
                                      seed=6)
    largest = {'lean': 0, 'plain': 0}

    def run(name, function):
        def pack(tensor):
            largest[name] = max(largest[name], tensor.numel())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = function(alpha, x_src, edge_index, 100)
        out.sum().backward()

    run('lean', attention_aggregate)
    run('plain', plain_aggregate)
    assert largest['plain'] >= num_edges * heads * channels  # the test bites
    # alpha and the edge indices are E x H and 2 x E; x_src is N x H x C:
    assert largest['lean'] == num_edges * heads


def test_bad_arguments():
    alpha, x_src, edge_index = inputs(5, 5, 10, 2, 3, seed=7)
    with pytest.raises(ValueError, match='same H'):
        attention_aggregate(alpha[:, :1], x_src, edge_index, 5)
    with pytest.raises(ValueError, match=r'\(2, E\)'):
        attention_aggregate(alpha, x_src, edge_index[:, :4], 5)
    with pytest.raises(ValueError, match='chunk_size'):
        attention_aggregate(alpha, x_src, edge_index, 5, chunk_size=0)
