"""nonzero_dropout has the distribution of F.dropout on sparse inputs."""
import math

import pytest
import torch
import torch.nn.functional as F

from ikgat.nn.dropout import nonzero_dropout


def sparse_features(rows=200, cols=300, density=0.02, seed=0):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(rows, cols, generator=generator) < density
    return torch.rand(rows, cols, generator=generator).add(0.5) * mask


def test_keeps_zeros_and_scales_kept_entries():
    x = sparse_features()
    torch.manual_seed(0)
    out = nonzero_dropout(x, 0.6)
    assert (out[x == 0] == 0).all()
    kept = out != 0
    assert kept.any() and (x[kept] != 0).all()
    torch.testing.assert_close(out[kept], x[kept] / 0.4)


@pytest.mark.parametrize('p', [0.1, 0.6, 0.9])
def test_drop_rate_matches_p(p):
    x = sparse_features(400, 500, 0.02)
    nonzero = int((x != 0).sum())  # ~4000
    torch.manual_seed(1)
    dropped = sum(int(((nonzero_dropout(x, p) == 0) & (x != 0)).sum())
                  for _ in range(5))
    trials = 5 * nonzero
    # Binomial(trials, p): within 5 standard deviations.
    assert abs(dropped - p * trials) < 5 * math.sqrt(trials * p * (1 - p))


def test_expectation_equals_input():
    x = sparse_features(20, 30, 0.2)
    torch.manual_seed(2)
    mean = torch.stack([nonzero_dropout(x, 0.5) for _ in range(4000)]).mean(0)
    # Per entry: std of the mean is x / sqrt(4000) <= 1.5 / 63.
    assert (mean - x).abs().max() < 5 * 1.5 / math.sqrt(4000)


def test_identity_in_eval_and_for_p_zero():
    x = sparse_features()
    assert nonzero_dropout(x, 0.6, training=False) is x
    assert torch.equal(nonzero_dropout(x, 0.0), x)
    assert (nonzero_dropout(x, 1.0) == 0).all()


def test_dense_inputs_use_torch_dropout():
    x = torch.randn(50, 40)
    torch.manual_seed(3)
    expected = F.dropout(x, 0.3)
    torch.manual_seed(3)
    assert torch.equal(nonzero_dropout(x, 0.3), expected)


def test_inputs_requiring_grad_use_torch_dropout():
    # F.dropout's gradient is m / (1 - p) at zero entries too.
    x = sparse_features(30, 40, 0.1).requires_grad_()
    torch.manual_seed(4)
    expected = F.dropout(x, 0.5)
    torch.manual_seed(4)
    out = nonzero_dropout(x, 0.5)
    assert torch.equal(out, expected)
    out.sum().backward()
    assert (x.grad[x.detach() == 0] != 0).any()


def test_empty_input_and_bad_probability():
    assert nonzero_dropout(torch.zeros(0, 5), 0.5).shape == (0, 5)
    with pytest.raises(ValueError, match='1.5'):
        nonzero_dropout(torch.ones(2, 2), 1.5)
