"""The softmax steps shared by the fused attention kernels: the dropout
factor and its PyTorch mask, and one jitted helper of each kind for every
kernel module (the kernels' values: tests/ops/test_gat_attention.py,
test_transformer_attention.py and test_fused_dropout.py)."""
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
    pytest.importorskip('triton')
    import ikgat.ops.gat_attention as gat_attention
    import ikgat.ops.transformer_attention as transformer_attention
    import ikgat.ops.transformer_fourier as transformer_fourier
    from ikgat.ops.attention_steps import helpers
    gat_attention._kernels()
    transformer_attention._kernels()
    transformer_fourier._kernels()
    shared = helpers()
    steps = ('node_program', 'aggregate', 'finish', 'softmax_weight',
             'logit_gradient', 'statistics')
    for module in (gat_attention, transformer_attention,
                   transformer_fourier):
        for step in steps:
            assert getattr(module, '_' + step) is shared[step], step
    for module in (transformer_attention, transformer_fourier):
        assert module._link is shared['link']
        assert module._gather_rows is shared['gather_rows']
        assert module._node_row is shared['node_row']
    assert gat_attention._keep is shared['keep']
