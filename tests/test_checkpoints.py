"""Checkpoints keep every argument a TwoLayerGAT is built with."""
import inspect

import pytest
import torch
from torch_geometric.nn import TransformerConv

from ikgat import (
    IKGATConv,
    IKTransformerConv,
    KEPGATConv,
    MIKANConv,
    MIKANTransformerConv,
)
from ikgat.kernels.random_features import DEFAULT_EPS
from ikgat.models import TwoLayerGAT
from ikgat.training.checkpoints import (
    FLOOR_BEFORE_DEFAULT,
    load_checkpoint,
    save_checkpoint,
)

# Saved apart from model_kwargs (the layer class and save_checkpoint's
# conv_kwargs) or not saved: out_conv_kwargs, which TwoLayerGAT does not
# keep (no model that is saved uses it).
LAYER_ARGUMENTS = {'self', 'conv', 'conv_kwargs', 'out_conv_kwargs'}


def transformer_model() -> TwoLayerGAT:
    torch.manual_seed(0)
    return TwoLayerGAT(4, 2, 3, TransformerConv, heads=2, dropout=0.3,
                       self_loops=True).eval()


def test_every_constructor_argument_is_saved(tmp_path):
    path = str(tmp_path / 'model.pt')
    save_checkpoint(path, transformer_model(), 'Cora')
    saved = torch.load(path, weights_only=True)['model_kwargs']
    arguments = set(inspect.signature(TwoLayerGAT).parameters)
    assert set(saved) == arguments - LAYER_ARGUMENTS
    assert saved['self_loops'] is True and saved['dropout'] == 0.3


def test_a_checkpoint_without_self_loops_loads_with_the_old_default(
        tmp_path):
    # Checkpoints written before self_loops was saved rebuilt the model
    # without self-loops: they still do.
    path = str(tmp_path / 'model.pt')
    save_checkpoint(path, transformer_model(), 'Cora')
    payload = torch.load(path, weights_only=True)
    del payload['model_kwargs']['self_loops']
    torch.save(payload, path)
    assert load_checkpoint(path).model.self_loops is False


def _saved_and_loaded(tmp_path, conv, conv_kwargs, drop_floor=False):
    torch.manual_seed(0)
    model = TwoLayerGAT(4, 2, 3, conv, heads=2,
                        conv_kwargs=conv_kwargs).eval()
    path = str(tmp_path / 'model.pt')
    save_checkpoint(path, model, 'Cora', conv_kwargs=conv_kwargs)
    payload = torch.load(path, weights_only=True)
    if drop_floor:
        payload['conv_kwargs'].pop('kernel_kwargs', None)
        torch.save(payload, path)
    return payload['conv_kwargs'], load_checkpoint(path).model


@pytest.mark.parametrize('conv, conv_kwargs, floor', [
    (IKGATConv, dict(kernel='rff'), DEFAULT_EPS),
    (IKGATConv, dict(), DEFAULT_EPS),  # the default kernel, 'direct'
    (MIKANConv, dict(kernel_kwargs=dict(eps=0.05)), 0.05),
    (IKTransformerConv, dict(kernel='implicit',
                             kernel_kwargs=dict(lengthscale=2.0)),
     DEFAULT_EPS),
])
def test_a_random_feature_kernels_floor_is_saved(tmp_path, conv,
                                                 conv_kwargs, floor):
    saved, model = _saved_and_loaded(tmp_path, conv, conv_kwargs)
    assert saved['kernel_kwargs']['eps'] == floor
    assert model.conv1.kernel.eps == floor
    if 'lengthscale' in conv_kwargs.get('kernel_kwargs', {}):
        assert model.conv1.kernel.lengthscale == 2.0


@pytest.mark.parametrize('conv, conv_kwargs', [
    (IKGATConv, dict(kernel='direct')), (IKGATConv, dict()),
    (MIKANConv, dict()), (MIKANTransformerConv, dict())])
def test_a_checkpoint_without_the_floor_loads_with_the_old_default(
        tmp_path, conv, conv_kwargs):
    # Checkpoints written before the floor was saved were trained with the
    # floor's default of then, 1e-5.
    _, model = _saved_and_loaded(tmp_path, conv, conv_kwargs,
                                 drop_floor=True)
    assert model.conv1.kernel.eps == FLOOR_BEFORE_DEFAULT == 1e-5


@pytest.mark.parametrize('conv, conv_kwargs', [
    (IKGATConv, dict(kernel='rbf')), (IKGATConv, dict(kernel='poly')),
    (KEPGATConv, dict())])
def test_layers_without_a_random_feature_kernel_save_no_floor(
        tmp_path, conv, conv_kwargs):
    saved, model = _saved_and_loaded(tmp_path, conv, conv_kwargs)
    assert 'kernel_kwargs' not in saved
    _, old = _saved_and_loaded(tmp_path, conv, conv_kwargs, drop_floor=True)
    if conv_kwargs.get('kernel') == 'poly':
        assert model.conv1.kernel.eps == old.conv1.kernel.eps == 1e-5
