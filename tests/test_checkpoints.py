"""Checkpoints keep every argument a TwoLayerGAT is built with."""
import inspect

import torch
from torch_geometric.nn import TransformerConv

from ikgat.models import TwoLayerGAT
from ikgat.training.checkpoints import load_checkpoint, save_checkpoint

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
