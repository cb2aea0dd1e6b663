"""An index out of range in ``edge_index`` is an error on every layer and
every path, never a read out of bounds: a one-line ValueError naming the
index where values can be read (CPU, PyG's debug mode), a device-side
assertion where they cannot (a GPU outside debug mode, stood for here by
switching ``reads_values`` off, and every path while torch.compile traces,
the fused operators included), so that no host synchronisation is added.
"""
import pytest
import torch

import ikgat.nn.conv.checks as checks
from ikgat import IKTransformerConv, MIKANTransformerConv
from ikgat.kernels import KERNELS
from tests.helpers import LAYER_NAMES, make_layer

TRANSFORMER_NAMES = [f'transformer-{name}' for name in sorted(KERNELS)
                     if KERNELS[name].pairs_vectors] + ['mikan-transformer']
NAMES = LAYER_NAMES + TRANSFORMER_NAMES

#: Source index 13 on a graph of 10 nodes (the report's repro).
BAD = torch.tensor([[0, 1, 2, 13], [1, 2, 3, 4]])
#: Target index 12 instead.
BAD_TARGET = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 12]])
#: A negative source index (PyTorch's indexing would wrap it around).
NEGATIVE = torch.tensor([[0, -1, 2, 3], [1, 2, 3, 4]])


def layer(name):
    torch.manual_seed(0)
    if name == 'mikan-transformer':
        conv = MIKANTransformerConv(8, 4, heads=2, num_spectral_points=8)
    elif name.startswith('transformer-'):
        conv = IKTransformerConv(8, 4, heads=2,
                                 kernel=name[len('transformer-'):],
                                 num_spectral_points=8)
    elif name == 'kep':
        conv = make_layer(name, 8, 4, heads=2)
    else:
        conv = make_layer(name, 8, 4, heads=2, num_spectral_points=8)
    return conv.eval()


@pytest.mark.parametrize('name', NAMES)
def test_eager_cpu_names_the_index(name):
    conv = layer(name)
    x = torch.randn(10, 8)
    with pytest.raises(ValueError, match='source index 13, out of range'):
        conv(x, BAD)
    with pytest.raises(ValueError, match='target index 12, out of range'):
        conv(x, BAD_TARGET)
    with pytest.raises(ValueError, match='source index -1, out of range'):
        conv(x, NEGATIVE)


@pytest.mark.parametrize('name', NAMES)
def test_off_the_cpu_a_device_assertion_stops_the_step(name, monkeypatch):
    # As on a GPU outside debug mode: no value is read on the host, and
    # the device-side assertion raises (on CPU at once).
    monkeypatch.setattr(checks, 'reads_values', lambda device: False)
    conv = layer(name)
    x = torch.randn(10, 8)
    for edge_index in (BAD, BAD_TARGET, NEGATIVE):
        with pytest.raises(RuntimeError, match='index out of range'):
            conv(x, edge_index)
    assert conv(x, BAD[:, :3]).shape[0] == 10  # in range: it runs


@pytest.mark.slow  # a compilation per layer (1-2 s each)
@pytest.mark.parametrize('name', NAMES)
def test_compiled_layer_asserts_the_range(name):
    torch._dynamo.reset()
    conv = layer(name)
    compiled = torch.compile(conv, backend='aot_eager')
    x = torch.randn(10, 8)
    good = compiled(x, BAD[:, :3])
    torch.testing.assert_close(good, conv(x, BAD[:, :3]))
    for edge_index in (BAD, BAD_TARGET, NEGATIVE):
        with pytest.raises(RuntimeError, match='index out of range'):
            compiled(x, edge_index)
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize('name', ['ikgat-direct', 'mikan'])
def test_inductor_compiled_layer_asserts_the_range(name):
    # The report's repro, with Inductor's own code.
    torch._dynamo.reset()
    conv = layer(name)
    with pytest.raises(RuntimeError, match='index out of range'):
        torch.compile(conv)(torch.randn(10, 8), BAD)
    torch._dynamo.reset()
