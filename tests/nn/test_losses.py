import importlib
import sys

import pytest
import torch

from ikgat import IKGATConv, KEPGATConv, MIKANConv
from ikgat.nn import kl_divergence, ksvd_loss
from ikgat.nn.conv import kep_gat_conv
from tests.helpers import random_graph


def test_losses_sum_the_outermost_layers():
    x, edge_index = random_graph(10, 30, 5, seed=0)
    model = torch.nn.ModuleList([
        MIKANConv(5, 4, heads=2, num_spectral_points=4),
        KEPGATConv(5, 4, heads=2),
        IKGATConv(5, 4, heads=2, kernel='rbf'),
    ]).train()
    for layer in model:
        layer(x, edge_index)
    expected_kl = sum(layer.kl_divergence() for layer in model)
    assert torch.allclose(kl_divergence(model), expected_kl)
    assert torch.allclose(ksvd_loss(model), model[1].ksvd_loss())
    assert kl_divergence(torch.nn.Linear(2, 2)).item() == 0.0


def test_the_former_import_paths_still_work():
    assert kep_gat_conv.ksvd_loss is ksvd_loss
    sys.modules.pop('ikgat.nn.kl', None)
    with pytest.warns(DeprecationWarning, match='ikgat.nn.losses'):
        former = importlib.import_module('ikgat.nn.kl')
    assert former.kl_divergence is kl_divergence
