"""torch.compile keeps the fused path: every layer and kernel compiles as one
graph (fullgraph=True) on the CUDA path, forced on CPU (fused_attention=
'always', the Triton kernels in the interpreter), equals the eager layer,
and does not recompile from step to step or for a graph of another size
(dynamic shapes).

The compile backend is 'aot_eager' (dynamo + AOTAutograd: the graph capture,
the registered operators' fake implementations and their autograd, without
Inductor's code generation, which takes minutes on this CPU); one test runs
Inductor itself.
"""
import os

import pytest
import torch

from ikgat import IKGATConv, MIKANConv
from ikgat.kernels import KERNELS
from ikgat.models import TwoLayerGAT
from ikgat.training import train_node_classifier
from tests.helpers import DEVICE, fast_few, random_graph

pytest.importorskip('triton')
pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available()
    and os.environ.get('TRITON_INTERPRET') != '1',
    reason='the CUDA path needs CUDA or TRITON_INTERPRET=1')

BACKEND = 'aot_eager'
#: Every kernel of the registry, and MIKANConv's copula.
LAYERS = sorted(KERNELS) + ['mikan']


def cuda_path_layer(name, dropout=0.0, **kwargs):
    """The layer on its CUDA path: the fused attention and, for the
    random-feature kernels, the Triton node terms."""
    rff = name == 'mikan' or KERNELS[name].has_spectral_points
    kernel_kwargs = dict(node_path='triton') if rff else None
    if name == 'mikan':
        conv = MIKANConv(6, 4, heads=2, num_spectral_points=8,
                         dropout=dropout, kernel_kwargs=kernel_kwargs,
                         **kwargs)
    else:
        conv = IKGATConv(6, 4, heads=2, kernel=name, num_spectral_points=8,
                         dropout=dropout, kernel_kwargs=kernel_kwargs,
                         **kwargs)
    conv.fused_attention = 'always'
    return conv.to(DEVICE)


def graph(num_nodes, num_edges, seed):
    x, edge_index = random_graph(num_nodes, num_edges, 6, seed=seed)
    return x.to(DEVICE), edge_index.to(DEVICE)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def output_and_grads(conv, x, edge_index, seed=7):
    x = x.detach().requires_grad_()
    torch.manual_seed(seed)  # the same draws (dropout, sampled kernels)
    out = conv(x, edge_index)
    weight = torch.linspace(-1.0, 1.0, out.numel(), device=out.device)
    params = [p for p in conv.parameters() if p.requires_grad]
    grads = torch.autograd.grad((out * weight.view(out.shape)).sum(),
                                [x] + params, allow_unused=True)
    return out, grads


def assert_same(compiled, eager):
    (out, grads), (expected, expected_grads) = compiled, eager
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    for grad, expected_grad in zip(grads, expected_grads):
        if expected_grad is None:
            assert grad is None
        else:
            torch.testing.assert_close(grad, expected_grad, atol=1e-5,
                                       rtol=1e-5)


#: Every layer in training with attention dropout (the GAT recipe, and the
#: stochastic kernels' draws), and in evaluation and in training without
#: dropout where those take other code (each case runs the interpreter).
#: The fast tier compiles rbf in training with dropout (direct's fused
#: operators in a compiled graph: test_fused_operators_are_in_the_compiled_
#: graph); the slow tier every case.
FAST = ('rbf', )
def _tier(name, training, dropout, fast):
    return ((name, training, dropout) if fast else pytest.param(
        name, training, dropout, marks=pytest.mark.slow))


CASES = ([_tier(name, True, 0.5, name in FAST) for name in LAYERS]
         + [_tier(name, False, 0.5, False)
            for name in ('rbf', 'direct', 'implicit', 'mikan')]
         + [_tier(name, True, 0.0, False) for name in ('rbf', 'mikan')])


@pytest.mark.parametrize('name, training, dropout', CASES)
def test_fullgraph_compile_equals_eager(name, training, dropout):
    torch.manual_seed(0)
    conv = cuda_path_layer(name, dropout=dropout).train(training)
    x, edge_index = graph(12, 40, seed=1)
    eager = output_and_grads(conv, x, edge_index)
    compiled_conv = torch.compile(conv, fullgraph=True, backend=BACKEND)
    assert_same(output_and_grads(compiled_conv, x, edge_index), eager)


@pytest.mark.parametrize('name', fast_few(['rbf', 'direct', 'mikan'],
                                           ('direct', )))
def test_compiled_layer_off_cuda_equals_eager(name):
    # Off CUDA with the default switch the compiled layer takes PyG's steps
    # (Inductor compiles them) around the node-term operator, where the
    # eager layer takes its chunked steps: the same outputs and gradients,
    # attention dropout and the draws of a sampled kernel included.
    torch.manual_seed(0)
    conv = (MIKANConv(6, 4, heads=2, num_spectral_points=8, dropout=0.5)
            if name == 'mikan' else
            IKGATConv(6, 4, heads=2, kernel=name, dropout=0.5))
    x, edge_index = random_graph(12, 40, 6, seed=5)
    eager = output_and_grads(conv, x, edge_index)
    compiled_conv = torch.compile(conv, fullgraph=True, backend=BACKEND)
    assert_same(output_and_grads(compiled_conv, x, edge_index), eager)


@pytest.mark.parametrize('name, switch', fast_few(
    [('direct', 'always'), ('direct', True), ('mikan', 'always'),
     ('mikan', True)], (('direct', True), )))
def test_fused_operators_are_in_the_compiled_graph(name, switch,
                                                   monkeypatch):
    # Where the Triton kernels run (CUDA tensors, or 'always'), the compiled
    # step calls the registered attention operator, not PyG's steps; off
    # CUDA with the default switch it takes PyG's steps, which Inductor
    # fuses (the operator's PyTorch implementation was slower there). The
    # node terms are one registered operator either way.
    import ikgat.nn.conv.ikgat_conv as ikgat_conv_module
    conv = cuda_path_layer(name, dropout=0.5)
    conv.fused_attention = switch
    x, edge_index = graph(12, 40, seed=2)
    fused = switch == 'always' or x.device.type == 'cuda'
    if fused:
        def refuse(*args, **kwargs):
            raise AssertionError('PyG path taken under compile')

        monkeypatch.setattr(ikgat_conv_module.IKGATConv, 'edge_update',
                            refuse)
    seen = []

    def backend(graph_module, example_inputs):
        seen.extend(str(node.target) for node in graph_module.graph.nodes)
        return graph_module.forward

    compiled_conv = torch.compile(conv, fullgraph=True, backend=backend)
    compiled_conv(x, edge_index)
    assert any('ikgat.fused_attention' in target
               for target in seen) is fused
    assert any('ikgat.fourier_estimate' in target for target in seen)


@pytest.mark.slow  # steps and sizes through the interpreter (4-5 s each)
@pytest.mark.parametrize('name', ['rbf', 'direct', 'implicit', 'mikan'])
def test_no_recompile_over_steps_and_graph_sizes(name):
    # Three optimiser steps on one graph (the parameters' versions change,
    # the dropout seed moves on: what a recompilation would key on), then
    # three other sizes (dynamic shapes).
    torch.manual_seed(0)
    conv = cuda_path_layer(name, dropout=0.5)
    optimizer = torch.optim.Adam(conv.parameters(), lr=0.01)
    compiled_conv = torch.compile(conv, dynamic=True, backend=BACKEND)
    graphs = [graph(12, 40, seed=3)] * 3 + [
        graph(num_nodes, 4 * num_nodes, seed=num_nodes)
        for num_nodes in (9, 17, 30)
    ]
    with torch._dynamo.config.patch(error_on_recompile=True):
        for x, edge_index in graphs:
            optimizer.zero_grad()
            compiled_conv(x, edge_index).square().mean().backward()
            optimizer.step()


@pytest.mark.slow
def test_inductor_compiles_the_fused_layer():
    # Inductor's own code generation around the opaque operators, once.
    torch.manual_seed(0)
    conv = cuda_path_layer('direct', dropout=0.0)
    x, edge_index = graph(12, 40, seed=4)
    eager = output_and_grads(conv, x, edge_index)
    compiled_conv = torch.compile(conv, fullgraph=True)
    compiled = output_and_grads(compiled_conv, x, edge_index)
    (out, grads), (expected, expected_grads) = compiled, eager
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad, atol=1e-4,
                                   rtol=1e-4)


@pytest.mark.slow
def test_compiled_two_layer_model_trains():
    # The GAT recipe (8 heads x 8, dropout 0.6 on features and attention),
    # compiled, through the library's training loop, on a graph whose
    # edges join nodes of one class.  With the default switch the compiled
    # layers take the registered operators (their PyTorch implementation
    # on CPU, the Triton kernels on CUDA).
    from torch_geometric.data import Data
    torch.manual_seed(0)
    x, edge_index = graph(40, 400, seed=5)
    y = x[:, :3].argmax(-1)  # learnable from the features
    edge_index = edge_index[:, y[edge_index[0]] == y[edge_index[1]]]
    masks = torch.zeros(3, 40, dtype=torch.bool, device=DEVICE)
    masks[0, :20], masks[1, 20:30], masks[2, 30:] = True, True, True
    data = Data(x=x, edge_index=edge_index, y=y, train_mask=masks[0],
                val_mask=masks[1], test_mask=masks[2])
    model = TwoLayerGAT(6, 8, 3, IKGATConv, heads=8,
                        conv_kwargs=dict(num_spectral_points=8)).to(DEVICE)

    def train_loss():
        model.eval()
        with torch.no_grad():
            out = model(x, edge_index)[data.train_mask]
        return torch.nn.functional.cross_entropy(out, y[data.train_mask])

    before = train_loss()
    compiled_model = torch.compile(model, backend=BACKEND)
    # Training and evaluation are two graphs, compiled in the first epoch;
    # none is compiled after it.
    compiled = []

    def on_epoch(epoch, val_acc, val_loss):
        compiled.append(torch._dynamo.utils.counters['stats']['unique_graphs'])

    result = train_node_classifier(compiled_model, data, lr=0.01, epochs=60,
                                   patience=None, on_epoch=on_epoch)
    assert result.epochs == 60
    assert compiled[0] > 0 and compiled[-1] == compiled[0]
    assert train_loss() < 0.5 * before


@pytest.mark.slow  # a compilation each (1 s); KEPGATConv has no fused path
@pytest.mark.parametrize('training', [True, False])
def test_kep_gat_conv_compiles_as_one_graph(training):
    # KEPGATConv has no fused path; without self-loops (whose removal reads
    # values, a graph break GATConv has too) it compiles as one graph.
    from ikgat import KEPGATConv
    torch.manual_seed(0)
    conv = KEPGATConv(6, 4, heads=2, add_self_loops=False).to(DEVICE)
    conv.train(training)
    x, edge_index = graph(12, 40, seed=6)
    eager = output_and_grads(conv, x, edge_index)
    compiled_conv = torch.compile(conv, fullgraph=True, backend=BACKEND)
    assert_same(output_and_grads(compiled_conv, x, edge_index), eager)


@pytest.mark.slow  # a compilation (0.6 s): graph capture, not values
def test_autocast_availability_is_not_traced(monkeypatch):
    # On CUDA (torch 2.11) dynamo could not trace the builtin behind
    # torch.amp.is_autocast_available: a graph break inside
    # `with without_autocast(...)` whose resumed frame recompiled at every
    # step.  Emulated here: the check may run eagerly, never while traced.
    real = torch.amp.is_autocast_available

    def eager_only(device_type):
        if torch.compiler.is_compiling():
            raise AssertionError('is_autocast_available traced')
        return real(device_type)

    monkeypatch.setattr(torch.amp, 'is_autocast_available', eager_only)
    conv = cuda_path_layer('rbf')
    x, edge_index = graph(12, 40, seed=8)
    torch.compile(conv, fullgraph=True, backend=BACKEND)(x, edge_index)


@pytest.mark.slow  # a compilation (0.5 s): graph capture, not values
def test_first_compiled_call_does_not_import_triton_in_the_graph(
        monkeypatch):
    # In a new process the Triton kernels are jitted on first use; that must
    # happen inside the operator, not in the traced wrapper (an import
    # there broke the graph of the first compiled layer).
    import ikgat.ops.attention_steps as attention_steps
    import ikgat.ops.gat_attention_triton as gat_attention_triton
    import ikgat.ops.runtime as runtime
    monkeypatch.setattr(runtime, '_JITTED', {})
    for module in (gat_attention_triton, attention_steps):
        for name, value in list(vars(module).items()):
            if getattr(getattr(value, 'fn', None), '__ikgat_lazy_jit__',
                       False):
                monkeypatch.setattr(module, name, value.fn)  # not jitted
    conv = cuda_path_layer('rbf')
    x, edge_index = graph(12, 40, seed=9)
    torch.compile(conv, fullgraph=True, backend=BACKEND)(x, edge_index)
    assert runtime._JITTED, 'the compiled call jitted no kernel'
