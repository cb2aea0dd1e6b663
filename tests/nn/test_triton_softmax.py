"""The softmax steps shared by the fused attention kernels: the dropout
factor and its PyTorch mask, and one jitted helper of each kind for every
kernel module (the kernels' values: tests/nn/test_triton_attention.py,
test_triton_transformer.py and test_fused_dropout.py)."""
import pytest
import torch

from ikgat.nn.triton_softmax import keep_scale, torch_keep
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
    import ikgat.nn.triton_attention as triton_attention
    import ikgat.nn.triton_fourier_pairs as triton_fourier_pairs
    import ikgat.nn.triton_transformer as triton_transformer
    from ikgat.nn.triton_softmax import helpers
    triton_attention._kernels()
    triton_transformer._kernels()
    triton_fourier_pairs._kernels()
    shared = helpers()
    steps = ('node_program', 'aggregate', 'finish', 'softmax_weight',
             'logit_gradient', 'statistics')
    for module in (triton_attention, triton_transformer,
                   triton_fourier_pairs):
        for step in steps:
            assert getattr(module, '_' + step) is shared[step], step
    for module in (triton_transformer, triton_fourier_pairs):
        assert module._link is shared['link']
        assert module._gather_rows is shared['gather_rows']
        assert module._node_row is shared['node_row']
    assert triton_attention._keep is shared['keep']
