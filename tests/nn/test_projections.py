"""Several linear maps of one input as one product (ikgat.nn.projections):
the same values and parameter gradients as calling each map; hooks, lazy
layers, parametrisations, subclasses and mixed biases call each map."""
import pytest
import torch
from torch.nn.utils import parametrizations
from torch_geometric.nn import Linear

import ikgat.nn.projections as projections
from ikgat import IKTransformerConv
from ikgat.nn.projections import is_plain_linear, project_together


def maps(bias=True, classes=(Linear, torch.nn.Linear, Linear)):
    torch.manual_seed(0)
    return [layer_class(5, width, bias=bias)
            for layer_class, width in zip(classes, (3, 4, 2))]


def values_and_grads(x, layers, function):
    outs = function(x, layers)
    loss = sum((out * torch.linspace(-1, 1, out.numel()).view(out.shape)
                ).sum() for out in outs)
    params = [x] + [p for layer in layers for p in layer.parameters()]
    return outs, torch.autograd.grad(loss, params)


def each(x, layers):
    return [layer(x) for layer in layers]


@pytest.mark.parametrize('bias', [True, False])
def test_one_product_equals_each_map(monkeypatch, bias):
    x = torch.randn(6, 5, requires_grad=True)
    layers = maps(bias)
    products = []
    original = projections.F.linear
    monkeypatch.setattr(projections.F, 'linear',
                        lambda *args: products.append(1) or original(*args))
    outs, grads = values_and_grads(x, layers, project_together)
    assert len(products) == 1
    # Each output owns its memory (a view would keep the joint product):
    assert all(out._base is None for out in outs)
    expected, expected_grads = values_and_grads(x, layers, each)
    for out, reference in zip(outs + list(grads),
                              expected + list(expected_grads)):
        torch.testing.assert_close(out, reference)


def test_what_is_not_plain_is_called():
    x = torch.randn(6, 5)
    seen = []

    class Scaled(Linear):
        def forward(self, x):
            return 2 * super().forward(x)

    hooked = maps()
    hooked[1].register_forward_hook(lambda *args: seen.append('hook'))
    lazy = maps()
    lazy[0] = Linear(-1, 3)
    norm = maps()
    norm[2] = parametrizations.weight_norm(norm[2])
    mixed = maps()
    mixed[0] = Linear(5, 3, bias=False)
    subclass = maps(classes=(Linear, Scaled, Linear))
    for layers in (hooked, lazy, norm, mixed, subclass):
        assert layers is mixed or not all(map(is_plain_linear, layers))
        for out, reference in zip(project_together(x, layers),
                                  each(x, layers)):
            torch.testing.assert_close(out, reference)
    assert seen == ['hook', 'hook']
    # One map in float32 among float64 ones fails on float64 inputs as its
    # own call does (a concatenation would promote it and succeed):
    mixed_dtypes = [layer.double() for layer in maps()]
    mixed_dtypes[1].float()
    with pytest.raises(RuntimeError, match='dtype'):
        project_together(x.double(), mixed_dtypes)
    # A forward set on a layer (as accelerate's hooks do) is called:
    wrapped = maps()
    wrapped[0].forward = lambda rows: torch.zeros(rows.size(0), 3)
    assert not is_plain_linear(wrapped[0])
    assert not project_together(x, wrapped)[0].any()
    assert is_plain_linear(lazy[0])  # initialised by its first call
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda *args: seen.append('global'))
    try:
        project_together(x, maps())
    finally:
        handle.remove()
    assert seen.count('global') == 3


def test_the_transformer_layer_projects_once_and_keeps_hooks(monkeypatch):
    """IKTransformerConv's four maps of x are one product (two on bipartite
    inputs); a hook on one of them still runs."""
    products = []
    original = projections.F.linear
    monkeypatch.setattr(projections.F, 'linear',
                        lambda *args: products.append(args[1].size(0))
                        or original(*args))
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    conv = IKTransformerConv(5, 4, heads=2, kernel='rbf')
    conv(torch.randn(3, 5), edge_index)
    assert products == [4 * 8]
    products.clear()
    bipartite = IKTransformerConv((5, 6), 4, heads=2, kernel='rbf')
    bipartite((torch.randn(3, 5), torch.randn(3, 6)), edge_index)
    assert sorted(products) == [2 * 8, 2 * 8]
    seen = []
    conv.lin_value.register_forward_hook(lambda *args: seen.append(1))
    conv(torch.randn(3, 5), edge_index)
    assert seen == [1]
