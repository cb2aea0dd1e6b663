import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ikgat.nn.norms import LOG_MAX, SMALL, lp_norm_squared

finite = st.floats(-50, 50, allow_nan=False, width=64)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=8),
       st.floats(0.05, 6.0, allow_nan=False))
def test_matches_the_definition_away_from_zero(values, p):
    x = torch.tensor(values, dtype=torch.double)
    expected = (x.abs()**p).sum()**(2 / p)
    if x.abs().min() > SMALL and math.log(max(expected.item(), 1e-300)) < \
            LOG_MAX:
        assert torch.allclose(lp_norm_squared(x, p), expected, rtol=1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=1, max_size=8),
       st.sampled_from([0.1, 0.5, 1.0, 2.0, 4.0]))
def test_finite_value_and_gradient_everywhere(values, p):
    x = torch.tensor(values + [0.0], requires_grad=True)
    value = lp_norm_squared(x, p)
    value.backward()
    assert torch.isfinite(value) and value >= 0
    assert torch.isfinite(x.grad).all()


def test_exact_at_p2_and_zero_vector():
    x = torch.tensor([3.0, -4.0])
    assert lp_norm_squared(x, 2.0) == 25.0
    assert math.isclose(lp_norm_squared(x, 1.0).item(), 49.0, rel_tol=1e-6)
    zero = torch.zeros(3, requires_grad=True)
    for p in (0.1, 1.0, 3.0):
        value = lp_norm_squared(zero, p)
        value.backward()
        assert value == 0 and torch.equal(zero.grad, torch.zeros(3))


def test_clamped_in_log_space_for_tiny_p():
    x = torch.full((64, ), 1e3)
    assert lp_norm_squared(x, 0.1) == math.exp(LOG_MAX)


def test_half_precision_inputs_accumulate_in_float32():
    # ||x||_2^2 = 360000 overflows float16 (max 65504), and the clamp at
    # e^40 cannot even be converted to float16:
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.full((4, ), 300.0, dtype=dtype)
        for p in (2.0, 3.0):
            value = lp_norm_squared(x, p)
            assert value.dtype == torch.float32
            expected = lp_norm_squared(x.float(), p)
            assert torch.isfinite(value) and value == expected


def test_the_former_module_path_warns_and_still_works():
    import importlib
    import sys
    sys.modules.pop('ikgat.norms', None)
    with pytest.warns(DeprecationWarning, match='ikgat.nn.norms'):
        former = importlib.import_module('ikgat.norms')
    assert former.lp_norm_squared is lp_norm_squared
