"""The softmax steps shared by the fused attention kernels: the dropout
factor and its PyTorch mask, and one jitted helper of each kind for every
kernel module (the kernels' values: tests/ops/test_gat_attention.py,
test_transformer_attention.py and test_fused_dropout.py)."""
import inspect
import sys

import pytest
import torch

from ikgat.ops.attention_steps import keep_scale, torch_keep
from tests.helpers import DEVICE


def test_keep_scale_is_dropout_s_factor():
    assert keep_scale(0.0) == 1.0
    assert keep_scale(0.75) == 4.0
    assert keep_scale(1.0) == 0.0  # every weight dropped


def test_torch_keep_is_a_seeded_scaled_mask():
    like = torch.zeros(1, device=DEVICE)
    seed = torch.tensor([12345], device=DEVICE)
    keep = torch_keep(seed, (400, 3), 0.25, like)
    assert keep.shape == (400, 3) and keep.device == like.device
    assert keep.dtype == torch.float32
    assert keep.unique().tolist() == pytest.approx([0.0, 4.0 / 3.0])
    torch.testing.assert_close(torch_keep(seed, (400, 3), 0.25, like), keep)
    assert not torch.equal(torch_keep(seed + 1, (400, 3), 0.25, like), keep)
    assert torch.equal(torch_keep(seed, (400, 3), 0.0, like),
                       like.new_ones(()))
    assert not torch_keep(seed, (400, 3), 1.0, like).any()


def test_every_kernel_module_calls_the_same_jitted_steps():
    # Each module's shared steps are, once one of its kernels is jitted,
    # the one jitted version of attention_steps' function.
    pytest.importorskip('triton')
    import ikgat.ops.attention_steps as attention_steps
    import ikgat.ops.gat_attention_triton as gat_attention
    import ikgat.ops.transformer_attention_triton as transformer_attention
    import ikgat.ops.transformer_fourier as transformer_fourier
    from ikgat.ops.runtime import jitted
    modules = (gat_attention, transformer_attention, transformer_fourier)
    for module in modules:
        jitted(module.forward_kernel)
    steps = [name for name in vars(attention_steps) if name.endswith('_step')]
    assert len(steps) == 22, steps
    for name in steps:
        shared = getattr(attention_steps, name)
        assert not inspect.isfunction(shared), name  # jitted
        for module in modules:
            if name in vars(module):
                assert getattr(module, name) is shared, (module.__name__,
                                                         name)
    assert 'aggregate_step' in vars(gat_attention)
    assert transformer_fourier.sincos_step is \
        sys.modules['ikgat.ops.node_terms_triton'].sincos_step
