import inspect

import pytest
from torch_geometric.nn import GATConv

import ikgat.nn.conv.gat_base as gat_base
from ikgat import IKGATConv, KEPGATConv, MIKANConv
from ikgat.nn.conv.docstrings import GATCONV_SHAPES, shared_docstring
from ikgat.nn.conv.gat_base import GATConvBase, takes_gat_conv_parameters


def test_gat_style_conv_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match='GATConvBase'):
        from ikgat.nn.conv.gat_base import GATStyleConv
    assert GATStyleConv is GATConvBase
    with pytest.raises(AttributeError):
        _ = gat_base.NoSuchName


@pytest.mark.parametrize('layer', [IKGATConv, MIKANConv, KEPGATConv])
def test_signature_lists_gatconvs_parameters_first(layer):
    ours = inspect.signature(layer).parameters
    theirs = inspect.signature(GATConv).parameters
    gat = [name for name in theirs if name != 'kwargs']
    assert list(ours)[:len(gat)] == gat
    for name in gat:
        assert ours[name].kind == theirs[name].kind
        assert ours[name].default == theirs[name].default
    assert all(parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD)
               for parameter in list(ours.values())[len(gat):])


def test_forwarded_parameters_reach_gatconvs_constructor():
    conv = KEPGATConv(8, 4, 2, False, 0.1, 0.5, False, 3, 'add', False, True,
                      num_samples=2, aggr='add')
    assert (conv.heads, conv.concat, conv.negative_slope, conv.dropout,
            conv.add_self_loops, conv.edge_dim, conv.fill_value,
            conv.bias, conv.residual) == (2, False, 0.1, 0.5, False, 3,
                                          'add', None, True)
    assert conv.num_samples == 2 and conv.rank == 4
    with pytest.raises(TypeError):
        KEPGATConv(8, 4, 2, False, 0.1, 0.5, False, 3, 'add', False, True, 1)


def test_takes_gat_conv_parameters_wants_args_and_kwargs():
    with pytest.raises(TypeError, match='must be written'):
        takes_gat_conv_parameters(lambda self, in_channels, **kwargs: None)


def test_shared_docstring_fragments():
    for layer in (IKGATConv, MIKANConv, KEPGATConv):
        assert '{gatconv' not in layer.__doc__
        assert 'residual (bool, optional)' in layer.__doc__
        assert GATCONV_SHAPES.strip().splitlines()[-1].strip() in layer.__doc__

    with pytest.raises(KeyError, match='no docstring fragment'):
        @shared_docstring
        class Misspelt:
            """Text.

            {gatconv_shape}
            """
