r"""A full-batch node-classification loop with early stopping (GAT protocol).

Model selection uses the validation split only: the reported test accuracy is
the one at the epoch of the best validation accuracy (ties broken by the
lower validation loss).  Training stops when neither the validation accuracy
nor the validation loss has improved for :obj:`patience` epochs.  Variational
models minimise the negative ELBO per training node,
:math:`\frac{1}{n}\sum_i -\log p(y_i \mid \cdot) + \beta\,\mathrm{KL}/n`
with :math:`n` training nodes (:math:`\beta = 1` is the exact ELBO).
"""
import copy
import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from tqdm.auto import tqdm

from ikgat.nn.kl import kl_divergence


@dataclass
class TrainResult:
    val_acc: float
    test_acc: float
    best_epoch: int
    epochs: int
    seconds: float
    state_dict: Optional[dict] = None


def masked_accuracy(logits: torch.Tensor, y: torch.Tensor,
                    mask: torch.Tensor) -> float:
    return float((logits[mask].argmax(-1) == y[mask]).float().mean())


def train_node_classifier(
    model: torch.nn.Module,
    data: Data,
    lr: float = 0.005,
    weight_decay: float = 5e-4,
    epochs: int = 1000,
    patience: int = 100,
    beta: float = 0.0,
    keep_best_state: bool = False,
    on_epoch: Optional[Callable[[int, float, float], None]] = None,
    progress: Optional[bool] = False,
) -> TrainResult:
    r"""Train :obj:`model` on ``data.train_mask`` and evaluate each epoch.

    Args:
        model: Called as ``model(data.x, data.edge_index)``.
        data: A graph with ``x``, ``edge_index``, ``y`` and the three masks.
        lr, weight_decay: Adam's settings.
        epochs: The most epochs to run.
        patience: Epochs without a better validation accuracy or loss
            before stopping.
        beta: Weight of the KL term of variational layers (divided by the
            number of training nodes, like the averaged NLL).
        keep_best_state: Return the state dict of the best epoch.
        on_epoch: Called with ``(epoch, val_acc, val_loss)`` after each
            epoch (logs, recorders).
        progress: Show a :mod:`tqdm` bar with the epoch's training loss and
            validation accuracy: :obj:`True`, :obj:`False`, or :obj:`None`
            for "only when writing to a terminal".
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr,
                                 weight_decay=weight_decay)
    num_train = int(data.train_mask.sum())
    start = time.perf_counter()
    best_acc, best_loss, best_test, best_epoch = -1.0, float('inf'), 0.0, 0
    best_state = None
    since_acc = since_loss = 0
    epoch = 0
    bar = tqdm(total=epochs, unit='epoch', leave=False, dynamic_ncols=True,
               disable=None if progress is None else not progress)
    for epoch in range(1, epochs + 1):
        model.train()
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        if beta:
            loss = loss + beta * kl_divergence(model) / num_train
        loss.backward()
        optimizer.step()

        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
        val_loss = float(F.cross_entropy(out[data.val_mask],
                                         data.y[data.val_mask]))
        val_acc = masked_accuracy(out, data.y, data.val_mask)
        if on_epoch is not None:
            on_epoch(epoch, val_acc, val_loss)
        bar.update()
        bar.set_postfix(loss=f'{float(loss.detach()):.4f}',
                        val_acc=f'{val_acc:.4f}', refresh=False)

        improved_acc = val_acc > best_acc or (val_acc == best_acc
                                              and val_loss < best_loss)
        if improved_acc:
            best_acc, best_epoch = val_acc, epoch
            best_test = masked_accuracy(out, data.y, data.test_mask)
            if keep_best_state:
                best_state = copy.deepcopy(model.state_dict())
        since_acc = 0 if improved_acc else since_acc + 1
        if val_loss < best_loss:
            best_loss, since_loss = val_loss, 0
        else:
            since_loss += 1
        if since_acc >= patience and since_loss >= patience:
            break
    bar.close()
    return TrainResult(best_acc, best_test, best_epoch, epoch,
                       time.perf_counter() - start, best_state)
