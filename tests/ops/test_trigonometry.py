"""Cosines and sines of the random-feature angles: NumPy's loops on few
CPU threads, ATen's elsewhere, the same values either way."""
import pytest
import torch

from ikgat.ops import trigonometry
from ikgat.ops.trigonometry import NUMPY_THREADS, cos_sin


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_values_match_float64_and_aten(dtype):
    generator = torch.Generator().manual_seed(0)
    angles = (torch.rand(3, 257, 33, generator=generator) - 0.5) * 500
    angles = angles.to(dtype)
    assert trigonometry._numpy_applies(angles) == (
        not trigonometry.ATEN_FASTER
        and torch.get_num_threads() <= NUMPY_THREADS)
    cos, sin = cos_sin(angles)
    assert cos.dtype == sin.dtype == dtype and cos.shape == angles.shape
    reference = angles.double()
    tolerance = 2e-7 if dtype == torch.float32 else 1e-14
    torch.testing.assert_close(cos.double(), reference.cos(), rtol=0,
                               atol=tolerance)
    torch.testing.assert_close(sin.double(), reference.sin(), rtol=0,
                               atol=tolerance)
    torch.testing.assert_close(cos, angles.cos(), rtol=0, atol=tolerance)


def test_writes_into_strided_outputs():
    angles = torch.randn(2, 50, 16, dtype=torch.float64)
    cos_store = torch.full((2, 80, 16), 7.0, dtype=torch.float64)
    sin_store = torch.full((2, 80, 16), 7.0, dtype=torch.float64)
    cos, sin = cos_sin(angles, cos_store[:, 10:60], sin_store[:, 10:60])
    assert cos.data_ptr() == cos_store[:, 10:60].data_ptr()
    torch.testing.assert_close(cos_store[:, 10:60], angles.cos())
    torch.testing.assert_close(sin_store[:, 10:60], angles.sin())
    assert (cos_store[:, :10] == 7).all() and (sin_store[:, 60:] == 7).all()


@pytest.mark.parametrize('aten_faster', [False, True])
def test_values_from_either_library(monkeypatch, aten_faster):
    monkeypatch.setattr(trigonometry, 'ATEN_FASTER', aten_faster)
    generator = torch.Generator().manual_seed(1)
    angles = (torch.rand(5, 300, generator=generator) - 0.5) * 500
    cos, sin = cos_sin(angles)
    reference = angles.double()
    torch.testing.assert_close(cos.double(), reference.cos(), rtol=0,
                               atol=2e-7)
    torch.testing.assert_close(sin.double(), reference.sin(), rtol=0,
                               atol=2e-7)


def test_aten_is_used_where_numpy_does_not_apply(threads, monkeypatch):
    monkeypatch.setattr(trigonometry, 'ATEN_FASTER', False)
    angles = torch.randn(4, 8)
    torch.set_num_threads(NUMPY_THREADS + 1)
    assert not trigonometry._numpy_applies(angles)
    torch.testing.assert_close(cos_sin(angles)[0], angles.cos())
    torch.set_num_threads(1)
    assert trigonometry._numpy_applies(angles)
    monkeypatch.setattr(trigonometry, 'ATEN_FASTER', True)
    assert not trigonometry._numpy_applies(angles)
    monkeypatch.setattr(trigonometry, 'ATEN_FASTER', False)
    half = angles.to(torch.bfloat16)
    assert not trigonometry._numpy_applies(half)
    assert cos_sin(half)[1].dtype == torch.bfloat16
    meta = torch.empty(4, 8, device='meta')
    assert cos_sin(meta)[0].device.type == 'meta'


def test_sines_may_overwrite_the_angles():
    angles = torch.linspace(-40, 40, 999).reshape(3, 333)
    expected_cos, expected_sin = angles.cos(), angles.sin()
    cos, sin = cos_sin(angles, torch.empty_like(angles), angles)
    assert sin.data_ptr() == angles.data_ptr()
    torch.testing.assert_close(cos, expected_cos, rtol=0, atol=2e-7)
    torch.testing.assert_close(sin, expected_sin, rtol=0, atol=2e-7)
