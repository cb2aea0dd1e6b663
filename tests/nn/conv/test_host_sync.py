"""No host synchronisation in a forward or backward pass off the CPU
(issue #16): value-reading checks run on CPU tensors and in PyG's debug
mode only.

On CPU the proof runs on the 'meta' device, whose tensors have no values:
reading one on the host (int(), .item(), bool(), .nonzero(), a boolean mask,
torch.unique) raises there, as it would synchronise on CUDA.  The other
direction, a host value copied to the device (``t[0] = 1.0``, a CPU tensor
meeting a device tensor), reads nothing: the steps also run under
tests.helpers.NoHostTensors, which raises there.  The CUDA test runs the
layers under torch.cuda.set_sync_debug_mode('error').
"""
import gc
import weakref

import pytest
import torch
import torch_geometric
from torch_geometric.testing import onlyCUDA
from torch_geometric.utils import add_self_loops, remove_self_loops

from ikgat import IKGATConv, KEPGATConv, MIKANConv
from ikgat.kernels import KERNELS
from ikgat.models import TwoLayerGAT
from ikgat.nn import graph_cache
from ikgat.nn.conv.checks import check_batch, check_edge_index, reads_values
from ikgat.nn.conv.gat_base import SELF_LOOPS
from ikgat.nn.conv.ikgat_conv import CSR
from ikgat.nn.dropout import nonzero_dropout
from tests.helpers import NoHostTensors, fast_few, random_graph

KERNEL_NAMES = sorted(KERNELS)
META = torch.device('meta')


def test_meta_tensors_refuse_host_reads():
    # The premise of the meta tests below.
    values = torch.randn(4, device=META)
    for read in (lambda: int(values.max()), lambda: bool((values > 0).any()),
                 lambda: values.nonzero(), lambda: values[values > 0]):
        with pytest.raises((RuntimeError, NotImplementedError)):
            read()


def test_reads_values_on_cpu_or_in_debug_mode():
    assert reads_values(torch.device('cpu'))
    assert not reads_values(torch.device('cuda'))
    assert not reads_values(META)
    with torch_geometric.debug():
        assert reads_values(torch.device('cuda'))


def test_checks_read_no_value_off_the_cpu_outside_debug_mode():
    edge_index = torch.randint(0, 5, (2, 9), device=META)
    batch = torch.zeros(5, dtype=torch.long, device=META)
    check_edge_index('IKGATConv', edge_index, 5, 5)
    check_batch('IKGATConv', 'batch', batch, 5)
    with torch_geometric.debug():  # the checks read the values again
        with pytest.raises((RuntimeError, NotImplementedError)):
            check_edge_index('IKGATConv', edge_index, 5, 5)
        with pytest.raises((RuntimeError, NotImplementedError)):
            check_batch('IKGATConv', 'batch', batch, 5)
    # On CPU the errors stay on, with their message:
    with pytest.raises(ValueError, match="holds target index 7"):
        check_edge_index('IKGATConv', torch.tensor([[0], [7]]), 5, 5)


def warm_self_loops(edge_index, num_nodes):
    """What the layers cache in the first step on a GPU (the one step that
    synchronises), computed on CPU and moved to the meta device."""
    cpu = torch.randint(0, num_nodes, tuple(edge_index.shape))
    keep = (cpu[0] != cpu[1]).nonzero().view(-1)
    looped, _ = add_self_loops(cpu[:, keep], num_nodes=num_nodes)
    graph_cache.store(edge_index, SELF_LOOPS, num_nodes,
                      (keep.to(META), looped.to(META)))


def meta_step(conv, num_nodes=10, num_edges=30, edge_dim=None, **kwargs):
    conv = conv.to(META)
    x = torch.randn(num_nodes, 6, device=META, requires_grad=True)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), device=META)
    if conv.add_self_loops:
        warm_self_loops(edge_index, num_nodes)
    if edge_dim is not None:
        kwargs['edge_attr'] = torch.randn(num_edges, edge_dim, device=META)
    with NoHostTensors():
        out = conv(x, edge_index, **kwargs)
        out.sum().backward()
    assert out.device == META and x.grad is not None


def test_host_values_meeting_device_tensors_are_refused():
    # The check itself: each pattern copies a host value to a CUDA device.
    device_tensor = torch.zeros(2, device=META)
    for write in (lambda: device_tensor.__setitem__(0, 1.0),
                  lambda: device_tensor * torch.tensor(2.0),
                  lambda: torch.ones(2).to(META)):
        with pytest.raises(AssertionError, match='host|Python value'):
            with NoHostTensors():
                write()
    with NoHostTensors():  # made on the device: no copy
        torch.cat([device_tensor.new_ones(1),
                   device_tensor.new_full((1, ), 0.2)]) * 2.0


def test_the_slopes_written_from_the_host_are_caught(monkeypatch):
    # The synchronisation the first GPU run found in every forward pass
    # (slopes[0] = 1.0), which reads no value: the check must fail on it.
    from ikgat.nn.conv.ikgat_conv import IKGATConv as Layer
    made_on_device = Layer._accumulation_inputs

    def host_written_slopes(self, x_src, x_dst):
        x_src, q, anchor, slopes = made_on_device(self, x_src, x_dst)
        slopes = anchor.new_full((2, ), self.negative_slope)
        slopes[0] = 1.0
        return x_src, q, anchor, slopes

    meta_step(IKGATConv(6, 4, heads=2, kernel='rbf'))  # as it is: passes
    monkeypatch.setattr(Layer, '_accumulation_inputs', host_written_slopes)
    with pytest.raises(AssertionError, match='aten.copy_.*Python value'):
        meta_step(IKGATConv(6, 4, heads=2, kernel='rbf'))


def test_no_device_tensor_is_made_from_python_data_in_the_library():
    # torch.tensor([...], device=...) fills a CUDA tensor from the host
    # below the dispatcher, where NoHostTensors cannot see it: the modules
    # of a training step build their constants on the device instead.
    import pathlib
    import re

    import ikgat
    root = pathlib.Path(ikgat.__file__).parent
    step_modules = [*(root / 'nn').rglob('*.py'),
                    *(root / 'kernels').rglob('*.py'),
                    root / 'models.py', root / 'training' / 'loop.py']
    found = [f'{path.relative_to(root)}:{number}'
             for path in step_modules
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r'\btorch\.(tensor|as_tensor)\(', line)
             and not line.strip().startswith(('>>>', '#'))]
    assert found == []


# Three kernels in the fast tier (exact, random features, drawn per graph),
# every kernel in the slow one:
@pytest.mark.parametrize('training', [True, False])
@pytest.mark.parametrize('kernel', fast_few(KERNEL_NAMES,
                                            ('rbf', 'direct', 'implicit')))
def test_ikgat_reads_no_value_off_the_cpu(kernel, training):
    conv = IKGATConv(6, 4, heads=2, kernel=kernel, num_spectral_points=8,
                     dropout=0.5, edge_dim=3)
    meta_step(conv.train(training), edge_dim=3)


@pytest.mark.parametrize('add_self_loops', [True, False])
def test_mikan_and_kep_read_no_value_off_the_cpu(add_self_loops):
    for conv in (MIKANConv(6, 4, heads=2, num_spectral_points=8,
                           add_self_loops=add_self_loops),
                 KEPGATConv(6, 4, heads=2, add_self_loops=add_self_loops,
                            edge_dim=2)):
        meta_step(conv, edge_dim=2 if isinstance(conv, KEPGATConv) else None)


@pytest.mark.parametrize('kernel', ['rbf', 'direct', 'implicit'])
def test_fused_path_reads_no_value_off_the_cpu(kernel):
    # On 'meta' the fused kernels are not launched (no values), but every
    # tensor of the CUDA path is allocated, with its shape and dtype.
    pytest.importorskip('triton')
    conv = IKGATConv(6, 4, heads=2, kernel=kernel, num_spectral_points=8,
                     edge_dim=3)
    conv.fused_attention = 'always'
    conv = conv.to(META)
    x = torch.randn(10, 6, device=META, requires_grad=True)
    edge_index = torch.randint(0, 10, (2, 30), device=META)
    warm_self_loops(edge_index, 10)
    edge_attr = torch.randn(30, 3, device=META)
    with NoHostTensors():
        out, (looped, alpha) = conv(x, edge_index, edge_attr,
                                    return_attention_weights=True)
        (out.sum() + alpha.sum()).backward()
    assert out.shape == (10, 8) and alpha.shape == (looped.size(1), 2)
    assert graph_cache.lookup(looped, CSR, (10, 10)) is not None  # fused
    assert x.grad.shape == x.shape and conv.att_edge.grad is not None


def test_fused_path_reads_no_value_on_a_new_graph():
    # Each mini-batch is a new graph.  The fused path adds the self-loops in
    # its CSR sort, so even a graph never seen runs without a host read;
    # the other path selects the edges that are not self-loops (one read per
    # new graph, then cached).
    pytest.importorskip('triton')
    model = TwoLayerGAT(6, 4, 3, IKGATConv, heads=2, dropout=0.0)
    for conv in (model.conv1, model.conv2):
        conv.fused_attention = 'always'
    model = model.to(META)
    for _ in range(2):  # two new graphs
        edge_index = torch.randint(0, 10, (2, 30), device=META)
        x = torch.randn(10, 6, device=META, requires_grad=True)
        with NoHostTensors():
            model(x, edge_index).sum().backward()
        assert x.grad.shape == x.shape
    for conv in (model.conv1, model.conv2):
        conv.fused_attention = False
    with pytest.raises((RuntimeError, NotImplementedError)):
        model(x, torch.randint(0, 10, (2, 30), device=META))


def test_batch_size_spares_reading_the_batch():
    conv = MIKANConv(6, 4, heads=2, num_spectral_points=8,
                     add_self_loops=False)
    batch = torch.zeros(10, dtype=torch.long, device=META)
    meta_step(conv, batch=batch, batch_size=1)
    with pytest.raises(RuntimeError, match='meta'):  # read from the batch
        meta_step(conv, batch=batch)
    # On CPU a wrong batch_size is named:
    x, edge_index = random_graph(6, 12, 6, seed=0)
    conv = MIKANConv(6, 4, heads=2, num_spectral_points=8)
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    with pytest.raises(ValueError, match='graph index 1 but batch_size=1'):
        conv((x, x), edge_index, batch=batch, batch_size=1)
    with pytest.raises(ValueError, match="'batch_size' must be a positive"):
        conv((x, x), edge_index, batch=batch, batch_size=0)
    torch.manual_seed(0)
    given = conv((x, x), edge_index, batch=batch, batch_size=2)
    torch.manual_seed(0)
    assert torch.equal(given, conv((x, x), edge_index, batch=batch))


def test_two_layer_gat_reads_no_value_off_the_cpu():
    model = TwoLayerGAT(6, 4, 3, IKGATConv, heads=2, dropout=0.5,
                        conv_kwargs={'add_self_loops': False}).to(META)
    x = torch.zeros(10, 6, device=META)
    edge_index = torch.randint(0, 10, (2, 30), device=META)
    with NoHostTensors():
        model(x, edge_index).sum().backward()
    # nonzero_dropout itself, which counts the non-zeros on CPU:
    assert nonzero_dropout(x, 0.5).device == META


def test_self_loops_cached_off_the_cpu_equal_pygs():
    x, edge_index = random_graph(8, 30, 4, seed=1)
    edge_index = torch.cat([edge_index, torch.tensor([[2, 5], [2, 5]])], 1)
    edge_attr = torch.randn(32, 3)
    for fill_value in ('mean', 2.0):
        conv = IKGATConv(4, 2, edge_dim=3, fill_value=fill_value)
        expected = add_self_loops(*remove_self_loops(edge_index, edge_attr),
                                  fill_value=fill_value, num_nodes=8)
        first = conv._cached_self_loops(edge_index, edge_index, edge_attr, 8)
        assert all(torch.equal(a, b) for a, b in zip(first, expected))
        again = conv._cached_self_loops(edge_index, edge_index, edge_attr, 8)
        assert again[0] is first[0]  # the cached edges
        assert torch.equal(again[1], expected[1])
    # Another layer given the same tensor shares them:
    other = MIKANConv(4, 2, heads=3)
    assert other._cached_self_loops(edge_index, edge_index, None,
                                    8)[0] is first[0]
    edge_index[:, 0] = 3  # in place: a self-loop now, the cache misses
    after = conv._cached_self_loops(edge_index, edge_index, None, 8)
    assert after[0].size(1) == first[0].size(1) - 1
    # Freed with the tensor, and nothing is stored on it:
    assert not vars(edge_index)
    cached = weakref.ref(after[0])
    del edge_index, after
    gc.collect()
    assert cached() is None


def cuda_cases():
    """(name, layer, forward keyword arguments) of every layer and kernel on
    the default path (self-loops added), and the unfused and dropout
    paths of IKGATConv."""
    cases = [(f'IKGATConv-{kernel}', IKGATConv(16, 8, heads=4, kernel=kernel),
              {}) for kernel in KERNEL_NAMES]
    unfused = IKGATConv(16, 8, heads=4, edge_dim=3)
    unfused.fused_attention = False
    cases += [
        ('IKGATConv-unfused-edge-features', unfused, dict(edge_dim=3)),
        ('IKGATConv-dropout', IKGATConv(16, 8, heads=4, dropout=0.5), {}),
        ('MIKANConv', MIKANConv(16, 8, heads=4), {}),
        ('KEPGATConv', KEPGATConv(16, 8, heads=4, edge_dim=3),
         dict(edge_dim=3)),
        ('TwoLayerGAT', TwoLayerGAT(16, 8, 3, IKGATConv, heads=4), {}),
    ]
    return cases


@onlyCUDA
@pytest.mark.parametrize('case', range(len(KERNEL_NAMES) + 5))
@pytest.mark.parametrize('training', [True, False])
def test_cuda_forward_and_backward_do_not_synchronise(case, training):
    name, conv, options = cuda_cases()[case]
    device = torch.device('cuda')
    conv = conv.to(device).train(training)
    generator = torch.Generator().manual_seed(case)
    x = torch.randn(300, 16, generator=generator).to(device)
    x.requires_grad_()
    edge_index = torch.randint(0, 300, (2, 1200), generator=generator)
    edge_index = edge_index.to(device)
    kwargs = {}
    if 'edge_dim' in options:
        kwargs['edge_attr'] = torch.randn(1200, options['edge_dim'],
                                          generator=generator).to(device)
    # The first step may synchronise (self-loops, sorted edges, Triton's
    # compilation); the same graph again must not:
    conv(x, edge_index, **kwargs).sum().backward()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        for _ in range(2):
            conv(x, edge_index, **kwargs).float().sum().backward()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert torch.isfinite(x.grad).all(), name


@onlyCUDA
def test_cuda_fused_path_does_not_synchronise_on_new_graphs():
    # A new graph in every step, as in mini-batch training: the fused path
    # adds the self-loops in its sort, so only the first step (Triton's
    # compilation) may synchronise.
    device = torch.device('cuda')
    torch.manual_seed(0)
    model = TwoLayerGAT(16, 8, 3, IKGATConv, heads=4, dropout=0.0)
    model = model.to(device).train()

    def step():
        x = torch.randn(300, 16, device=device, requires_grad=True)
        edge_index = torch.randint(0, 300, (2, 1200), device=device)
        model(x, edge_index).sum().backward()
        return x

    step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        grads = [step().grad for _ in range(3)]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert all(torch.isfinite(grad).all() for grad in grads)
