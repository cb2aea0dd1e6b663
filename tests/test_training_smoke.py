import torch

from ikgat import IKGATConv
from ikgat.models import TwoLayerGAT
from ikgat.training import train_node_classifier


def test_two_layer_ikgat_learns_cora(cora):
    # A learning check, not a benchmark: 100 epochs of the GAT recipe.
    torch.manual_seed(0)
    data = cora[0]
    model = TwoLayerGAT(cora.num_features, 8, cora.num_classes, IKGATConv,
                        conv_kwargs=dict(kernel='direct'))
    result = train_node_classifier(model, data, epochs=100, patience=100)
    print(f'Cora smoke: val {result.val_acc:.3f} test {result.test_acc:.3f}')
    assert result.test_acc > 0.70
    assert result.epochs == 100
