r"""The full-batch node-classification loop with early stopping (GAT
protocol), shared by ``ikgat train`` and the benchmarks.

Each epoch takes one optimiser step on the training nodes, then evaluates
the model once (evaluation mode, no gradient) on the validation split.
Training stops when neither the validation accuracy nor the validation loss
has improved for :obj:`patience` epochs.  The epoch that is *selected*
(reported, and whose state is kept) depends on :obj:`select`:

* ``'accuracy'`` (the GAT protocol): the best validation accuracy, ties
  broken by the lower validation loss;
* ``'nll'``: the lowest validation negative log-likelihood, for models
  whose calibration is judged (at the best accuracy, early in training, the
  softmax may still be nearly uniform).

The training loss is the NLL averaged over the training nodes, plus
:math:`\beta\,\mathrm{KL}/n` for variational layers (:math:`n` training
nodes; :math:`\beta = 1` is the exact negative ELBO per node), plus an
optional :obj:`extra_loss` (e.g. KEPGATConv's KSVD term).  The test accuracy
reported is the one at the selected epoch: the test split selects nothing.
"""
import copy
import math
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from tqdm.auto import tqdm

from ikgat.nn.losses import kl_divergence

#: What :func:`train_node_classifier` can select an epoch on.
SELECTIONS = ('accuracy', 'nll')

#: Parameter names of variational scales and singular values: regularised by
#: their KL term, so :func:`variational_adam` gives them no weight decay.
VARIATIONAL_SCALE_NAMES = ('inducing_scale', 'inducing_log_scale',
                           'log_singular_values')


@dataclass
class TrainResult:
    r"""The selected epoch's validation and test accuracy, its number, the
    epochs run, the seconds taken and (with ``keep_best_state``) its state
    dict; ``val_loss`` is its validation NLL."""
    val_acc: float
    test_acc: float
    best_epoch: int
    epochs: int
    seconds: float
    state_dict: Optional[dict] = None
    val_loss: float = math.nan


def masked_accuracy(logits: Tensor, y: Tensor, mask: Tensor) -> float:
    return float((logits[mask].argmax(-1) == y[mask]).float().mean())


def variational_adam(model: torch.nn.Module, lr: float,
                     weight_decay: float) -> torch.optim.Adam:
    r"""Adam with :obj:`weight_decay` on every parameter but the variational
    scales and singular values (:data:`VARIATIONAL_SCALE_NAMES`): those are
    regularised by the KL term, and weight decay would pull
    :math:`\exp(\text{log-scale})` to 1.  For a model without them, the
    same optimiser as ``Adam(model.parameters(), lr, weight_decay)``."""
    plain: List[Tensor] = []
    variational: List[Tensor] = []
    for name, parameter in model.named_parameters():
        is_scale = any(part in name for part in VARIATIONAL_SCALE_NAMES)
        (variational if is_scale else plain).append(parameter)
    groups = [dict(params=plain, weight_decay=weight_decay)]
    if variational:
        groups.append(dict(params=variational, weight_decay=0.0))
    return torch.optim.Adam(groups, lr=lr)


def train_node_classifier(
    model: torch.nn.Module,
    data: Data,
    lr: float = 0.005,
    weight_decay: float = 5e-4,
    epochs: int = 1000,
    patience: Optional[int] = 100,
    beta: float = 0.0,
    keep_best_state: bool = False,
    on_epoch: Optional[Callable[[int, float, float], None]] = None,
    progress: Optional[bool] = False,
    *,
    select: str = 'accuracy',
    extra_loss: Optional[Callable[[], Tensor]] = None,
    optimizer: Optional[torch.optim.Optimizer] = None,
    restore_best_state: bool = False,
    on_evaluate: Optional[Callable[[int, Tensor], None]] = None,
) -> TrainResult:
    r"""Train :obj:`model` on ``data.train_mask`` and evaluate each epoch.

    Args:
        model: Called as ``model(data.x, data.edge_index)``.
        data: A graph with ``x``, ``edge_index``, ``y`` and the three masks.
        lr, weight_decay: Adam's settings (ignored with :obj:`optimizer`).
        epochs: The most epochs to run.
        patience: Epochs without a better validation accuracy or loss
            before stopping; :obj:`None` runs all :obj:`epochs`.
        beta: Weight of the KL term of variational layers (divided by the
            number of training nodes, like the averaged NLL).
        keep_best_state: Return the state dict of the selected epoch.
        on_epoch: Called with ``(epoch, val_acc, val_loss)`` after each
            epoch (logs, progress).
        progress: Show a :mod:`tqdm` bar with the epoch's training loss and
            validation accuracy: :obj:`True`, :obj:`False`, or :obj:`None`
            for "only when writing to a terminal".
        select: The epoch selected: ``'accuracy'`` or ``'nll'`` (see the
            module docstring).  (default: ``'accuracy'``)
        extra_loss: Called after each training forward pass; its value is
            added to the loss (e.g. a KSVD term).  (default: :obj:`None`)
        optimizer: The optimiser to step, e.g. :func:`variational_adam`
            (default: ``Adam(model.parameters(), lr, weight_decay)``).
        restore_best_state: Load the selected epoch's state into
            :obj:`model` at the end (and return it).
        on_evaluate: Called with ``(epoch, logits)`` after each evaluation,
            the logits of every node in evaluation mode (recorders).
    """
    if select not in SELECTIONS:
        raise ValueError(f'select must be one of {SELECTIONS} (got '
                         f'{select!r})')
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr,
                                     weight_decay=weight_decay)
    keep_state = keep_best_state or restore_best_state
    num_train = int(data.train_mask.sum())
    has_test = 'test_mask' in data
    start = time.perf_counter()
    best_acc, best_loss, best_epoch = -1.0, math.inf, 0
    selected_acc, selected_loss, selected_test = -1.0, math.inf, 0.0
    # With NLL selection, a run whose loss never improves keeps the initial
    # state:
    best_state = (copy.deepcopy(model.state_dict())
                  if keep_state and select == 'nll' else None)
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
        if extra_loss is not None:
            loss = loss + extra_loss()
        loss.backward()
        optimizer.step()

        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
        val_loss = float(F.cross_entropy(out[data.val_mask],
                                         data.y[data.val_mask]))
        val_acc = masked_accuracy(out, data.y, data.val_mask)
        if on_evaluate is not None:
            on_evaluate(epoch, out)
        if on_epoch is not None:
            on_epoch(epoch, val_acc, val_loss)
        bar.update()
        bar.set_postfix(loss=f'{float(loss.detach()):.4f}',
                        val_acc=f'{val_acc:.4f}', refresh=False)

        if select == 'accuracy':
            improved_acc = val_acc > best_acc or (val_acc == best_acc
                                                  and val_loss < best_loss)
            selected = improved_acc
        else:
            improved_acc = val_acc > best_acc
            selected = val_loss < best_loss
        if selected:
            best_epoch = epoch
            selected_acc, selected_loss = val_acc, val_loss
            if has_test:
                selected_test = masked_accuracy(out, data.y, data.test_mask)
            if keep_state:
                best_state = copy.deepcopy(model.state_dict())
        if improved_acc:
            best_acc = val_acc
        since_acc = 0 if improved_acc else since_acc + 1
        if val_loss < best_loss:
            best_loss, since_loss = val_loss, 0
        else:
            since_loss += 1
        if (patience is not None and since_acc >= patience
                and since_loss >= patience):
            break
    bar.close()
    if restore_best_state and best_state is not None:
        model.load_state_dict(best_state)
    return TrainResult(selected_acc, selected_test, best_epoch, epoch,
                       time.perf_counter() - start, best_state,
                       selected_loss)
