"""The graph summary's sums (ikgat.kernels.graph_summary.finite_sums) against
their definition: per graph and head, the sum and the count of the rows whose
projection is finite, on CPU's plain-sums path (every value finite) and on
the masked path (a NaN or infinite entry somewhere)."""
import pytest
import torch

from ikgat.kernels.graph_summary import finite_sums, graph_summary


def reference(x, batch, num_graphs):
    finite = torch.isfinite(x).all(-1, keepdim=True)  # [N, H, 1]
    values = torch.where(finite, x, 0.0).double()
    batch = torch.zeros(x.size(0), dtype=torch.long) if batch is None else batch
    total = torch.zeros(num_graphs, *x.shape[1:], dtype=torch.double)
    count = torch.zeros(num_graphs, x.size(1), 1, dtype=torch.double)
    return (total.index_add_(0, batch, values),
            count.index_add_(0, batch, finite.double()))


@pytest.mark.parametrize('batched', [False, True])
@pytest.mark.parametrize('bad', [None, float('nan'), float('inf'),
                                 -float('inf')])
def test_finite_sums_equal_their_definition(batched, bad):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(300, 4, 5, generator=generator)
    if bad is not None:
        x[7, 2, 3] = bad
        x[250, 0, 0] = bad
    num_graphs = 3 if batched else 1
    batch = (torch.arange(300) * 3 // 300) if batched else None
    total, count = finite_sums(x, batch, num_graphs)
    expected_total, expected_count = reference(x, batch, num_graphs)
    assert total.shape == (num_graphs, 4, 5)
    assert count.shape == (num_graphs, 4, 1)
    assert torch.isfinite(total).all()
    torch.testing.assert_close(total.double(), expected_total, rtol=1e-5,
                               atol=1e-5)
    assert torch.equal(count.double(), expected_count)


def test_plain_sums_carry_the_gradient_of_the_masked_ones():
    # Every row finite (the plain-sums path on CPU) and one row not: the
    # gradient of the sums is 1 for every finite row, 0 for the other.
    for bad in (None, float('nan')):
        x = torch.randn(40, 2, 3)
        if bad is not None:
            x[5, 1, 2] = bad
        x.requires_grad_()
        total, _ = finite_sums(x)
        total.sum().backward()
        expected = torch.ones_like(x)
        if bad is not None:
            expected[5, 1] = 0.0
        assert torch.equal(x.grad, expected)


def test_summary_of_one_projection_repeats_its_mean():
    x = torch.randn(50, 2, 3)
    summary = graph_summary(x, x, None, None, 1)
    mean = x.mean(0, keepdim=True)
    torch.testing.assert_close(summary, torch.cat([mean, mean], -1))


def test_meta_tensors_take_the_masked_path():
    # No value is read off the CPU: the sums run on 'meta' without error.
    x = torch.randn(10, 2, 3, device='meta')
    total, count = finite_sums(x)
    assert total.shape == (1, 2, 3) and count.shape == (1, 2, 1)
