"""The live-tensor counter and the meta-device prediction of a CUDA step's
memory (benchmarks/gpu_memory.py): the counter against known allocation
patterns, and the prediction on meta against the same step counted on CPU
tensors (the fused path through Triton's interpreter)."""
import gc
import os

import pytest
import torch

from benchmarks import gpu_memory, gpu_speed
from benchmarks.harness.live_tensors import LiveTensorBytes
from tests.helpers import DEVICE

META = torch.device('meta')
SIZE = (30, 120, 12, 4)  # nodes, edges, features, classes


@pytest.mark.parametrize('device', [
    pytest.param('cpu', marks=pytest.mark.slow), 'meta'])
def test_counts_storages_from_creation_to_release(device):
    outside = torch.zeros(250, device=device)
    with LiveTensorBytes() as tracker:
        a = torch.empty(1000, device=device)  # 4000 bytes
        view = a.view(10, 100)
        outside.add_(1)  # in place: an existing storage
        same = outside.view(25, 10)
        assert tracker.now == 4000
        b = a * 2
        assert tracker.now == tracker.peak == 8000
        del a, view, b
        gc.collect()
        assert tracker.now == 0 and tracker.peak == 8000
        tracker.reset_peak()
        assert tracker.peak == 0
    assert same.shape == (25, 10)


@pytest.mark.slow  # a memory proxy, not a value (0.5 s a device)
@pytest.mark.parametrize('device', ['cpu', 'meta'])
def test_saved_tensors_count_until_the_backward_pass(device):
    weight = torch.randn(100, 100, device=device, requires_grad=True)
    x = torch.randn(100, 100, device=device)
    with LiveTensorBytes(block=512, keep_peak_tensors=True) as tracker:
        tracker.phase = 'forward'
        loss = (x @ weight).exp().sum()
        gc.collect()
        # The product is freed, exp's output is saved for the backward pass:
        assert tracker.now == 40_448 + 512
        tracker.phase = 'backward'
        loss.backward()
        del loss
        gc.collect()
        assert tracker.now == 40_448  # the gradient of the weight
        # Two products at once (the forward's, then exp's gradient and the
        # weight's), and two scalars:
        assert tracker.peak == 2 * 40_448 + 2 * 512
        assert {t.phase for t in tracker.at_peak} == {'forward', 'backward'}


def test_block_must_be_positive():
    with pytest.raises(ValueError, match="'block' must be a positive"):
        LiveTensorBytes(block=0)


@pytest.mark.parametrize('training', [False, True])
@pytest.mark.parametrize('name', [
    pytest.param('GATConv', marks=pytest.mark.slow),
    pytest.param('IKGATConv-direct', marks=pytest.mark.slow),
    pytest.param('IKGATConv-direct-unfused', marks=pytest.mark.slow),
    'MIKANConv-unfused'])
def test_meta_prediction_equals_the_same_step_on_cpu(name, training):
    # The meta device allocates what the step allocates on real tensors:
    # the same code path (the fused kernel interpreted on CPU), counted on
    # values.  On CPU the checks read a few scalars, freed at once.
    fused = 'unfused' not in name and name != 'GATConv'
    if fused:
        pytest.importorskip('triton')
        if os.environ.get('TRITON_INTERPRET') != '1':
            pytest.skip('the fused kernels run on CPU tensors only in '
                        "Triton's interpreter (set without CUDA)")
    predicted = gpu_memory.predict(name, SIZE, training)
    counted = gpu_memory.predict(name, SIZE, training,
                                 device=torch.device('cpu'))
    assert predicted['step_bytes'] == pytest.approx(counted['step_bytes'],
                                                    abs=2048)
    if not fused:  # the interpreter keeps its last kernel's arguments alive
        assert predicted['peak_bytes'] == pytest.approx(
            counted['peak_bytes'], abs=2048)
    assert 0 < predicted['step_bytes'] < predicted['peak_bytes']


def test_self_loops_are_added_where_each_layer_adds_them():
    # GATConv: in every forward pass of every layer; the unfused ikgat
    # layers: once per graph, shared; the fused ones add their own.
    # On DEVICE (CUDA on a GPU machine, else the CPU with Triton's
    # interpreter), where the fused layer runs its kernels:
    models = {name: gpu_speed.build_model(name, 4, 3, add_self_loops=False
                                          ).to(DEVICE)
              for name in ('GATConv', 'IKGATConv-direct-unfused',
                           'IKGATConv-direct')}
    seen = {}
    for model in models.values():
        gpu_memory.emulate_self_loops(model)
        for layer in (model.conv1, model.conv2):
            layer.register_forward_hook(
                lambda layer, args, out: seen.setdefault(layer, []).append(
                    args[1]))
    x = torch.randn(6, 4, device=DEVICE)
    edge_index = torch.randint(0, 6, (2, 10), device=DEVICE)
    for _ in range(2):
        for model in models.values():
            model(x, edge_index)
    given = {name: seen[model.conv1] + seen[model.conv2]
             for name, model in models.items()}
    assert all(tensor.shape == (2, 16) for tensor in
               given['GATConv'] + given['IKGATConv-direct-unfused'])
    assert torch.equal(given['GATConv'][0][:, 10:],
                       torch.arange(6, device=DEVICE).expand(2, -1))
    assert len({id(tensor) for tensor in given['GATConv']}) == 4
    assert len({id(tensor) for tensor in
                given['IKGATConv-direct-unfused']}) == 1
    fused = models['IKGATConv-direct'].conv1
    assert all(tensor is edge_index for tensor in given['IKGATConv-direct'])
    assert fused.fused_attention == 'always' and fused.add_self_loops


def test_report_names_the_method_and_the_rows(tmp_path):
    output = tmp_path / 'gpu_memory.md'
    gpu_memory.main(['--graphs', 'cora', '--models', 'GATConv',
                     'IKGATConv-rbf-unfused', '--training-graphs',
                     '--output', str(output)])
    text = output.read_text()
    assert 'not a measurement' in text and 'git commit' in text
    rows = [line for line in text.splitlines() if line.startswith('| cora')]
    assert [row.split(' | ')[3] for row in rows] == [
        'GATConv', 'IKGATConv-rbf-unfused']
    assert 'training step' not in text
