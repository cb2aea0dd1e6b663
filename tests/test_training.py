"""The training loop: model selection, hooks, extra loss and optimiser."""
import pytest
import torch

from ikgat import IKGATConv
from ikgat.data import toy_citation_graph
from ikgat.models import TwoLayerGAT
from ikgat.training import (
    full_batch_step,
    train_node_classifier,
    variational_adam,
)


def tiny():
    torch.manual_seed(0)
    data = toy_citation_graph(num_nodes=48, num_classes=3, num_train=12,
                              num_val=18)
    model = TwoLayerGAT(data.num_features, 4, 3, IKGATConv, heads=2,
                        conv_kwargs=dict(kernel='rbf'))
    return model, data


@pytest.mark.parametrize('select', ['accuracy', 'nll'])
def test_selection_reports_and_restores_the_selected_epoch(select):
    model, data = tiny()
    seen = []
    result = train_node_classifier(
        model, data, lr=0.01, epochs=30, patience=None, select=select,
        on_epoch=lambda epoch, acc, loss: seen.append((epoch, acc, loss)),
        restore_best_state=True)
    assert result.epochs == 30 and len(seen) == 30  # patience=None: no stop
    if select == 'nll':
        best = min(seen, key=lambda item: item[2])
    else:  # best accuracy, ties to the lower loss, first epoch on full ties
        best = min(seen, key=lambda item: (-item[1], item[2], item[0]))
    assert result.best_epoch == best[0]
    assert result.val_acc == best[1] and result.val_loss == best[2]
    with torch.no_grad():
        out = model.eval()(data.x, data.edge_index)
    loss = torch.nn.functional.cross_entropy(out[data.val_mask],
                                             data.y[data.val_mask])
    assert float(loss) == pytest.approx(best[2], abs=1e-6)


def test_extra_loss_and_evaluation_hook():
    model, data = tiny()
    calls, logits = [], []

    def extra():
        calls.append(1)
        return torch.zeros(())

    train_node_classifier(model, data, epochs=4, patience=None,
                          extra_loss=extra,
                          on_evaluate=lambda epoch, out: logits.append(out))
    assert len(calls) == 4 and len(logits) == 4
    assert logits[0].shape == (data.num_nodes, 3)


def test_optimizer_and_early_stopping():
    model, data = tiny()
    optimizer = variational_adam(model, lr=0.0, weight_decay=0.0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = train_node_classifier(model, data, epochs=50, patience=3,
                                   optimizer=optimizer)
    # lr 0: nothing moves, so nothing improves after the first epoch.
    assert result.epochs == 4 and result.best_epoch == 1
    assert all(torch.equal(before[k], v)
               for k, v in model.state_dict().items())
    with pytest.raises(ValueError, match="select must be one of"):
        train_node_classifier(model, data, epochs=1, select='loss')


@pytest.mark.slow
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


def test_full_batch_step_selects_the_training_nodes_without_a_sync():
    # The loss of the masked nodes, from indices computed once; on 'meta'
    # (no values: a host read raises there, as it would sync on a GPU) the
    # whole step runs, the fused attention included.
    pytest.importorskip('triton')
    data = toy_citation_graph(seed=0)
    torch.manual_seed(0)
    model = TwoLayerGAT(data.num_features, 4, int(data.y.max()) + 1,
                        IKGATConv, heads=2, dropout=0.0)
    train_index = data.train_mask.nonzero().view(-1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    loss = full_batch_step(model, optimizer, data, train_index)
    expected = torch.nn.functional.cross_entropy(
        model(data.x, data.edge_index)[data.train_mask],
        data.y[data.train_mask])
    assert torch.allclose(loss, expected)
    for conv in (model.conv1, model.conv2):
        conv.fused_attention = 'always'
    meta = torch.device('meta')
    loss = full_batch_step(model.to(meta), torch.optim.SGD(
        model.parameters(), lr=0.1), data.to(meta), train_index.to(meta))
    assert loss.device == meta


def test_a_mask_of_several_splits_is_refused_with_the_fix():
    data = toy_citation_graph(seed=0)
    data.train_mask = torch.stack([data.train_mask] * 3, dim=1)
    model = TwoLayerGAT(data.num_features, 4, int(data.y.max()) + 1,
                        IKGATConv, heads=2)
    with pytest.raises(ValueError, match=r"must be 1-D.*train_mask\[:, 0\]"):
        train_node_classifier(model, data, epochs=1)
