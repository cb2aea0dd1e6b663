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

**Mini-batches.**  With :obj:`batches` (e.g. neighbour-sampled subgraphs,
:func:`ikgat.training.sampling.minibatch_training`) an epoch takes one step per
batch, with the loss on the batch's seed nodes (the first
``batch.batch_size`` nodes), and the evaluation runs :obj:`inference`
(e.g. the layer-wise ``model.inference``) instead of one forward pass over
the whole graph.  Under :mod:`torch.distributed` every rank trains on its
share of each global batch (the loss of
:func:`ikgat.training.distributed.data_parallel_loss`), rank 0 alone evaluates, and
it sends its validation figures to the other ranks, so that every rank
selects and stops at the same epoch.

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
from typing import Callable, Iterable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.data import Data
from tqdm.auto import tqdm

from ikgat.nn.losses import kl_divergence
from ikgat.training.distributed import (
    broadcast_from_main,
    data_parallel_loss,
    world,
)
from ikgat.training.sampling import warn_sampling_caveats

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
    r"""The share of the nodes in :obj:`mask` whose arg-max logit is their
    label :obj:`y`."""
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


def minibatch_step(model: torch.nn.Module,
                   optimizer: torch.optim.Optimizer, batch: Data,
                   global_batch_size: int, beta: float = 0.0,
                   num_train: Optional[int] = None,
                   extra_loss: Optional[Callable[[], Tensor]] = None
                   ) -> Tensor:
    r"""One optimiser step on a sampled subgraph :obj:`batch`: the loss of
    :func:`ikgat.training.distributed.data_parallel_loss` on its seeds (the first
    ``batch.batch_size`` nodes) of a global batch of
    :obj:`global_batch_size` seeds, plus :obj:`extra_loss`; backward; step.
    Returns the loss."""
    optimizer.zero_grad()
    seeds = batch.batch_size
    out = model(batch.x, batch.edge_index)[:seeds]
    loss = data_parallel_loss(out, batch.y[:seeds], global_batch_size,
                              world()[1], model, beta, num_train)
    if extra_loss is not None:
        loss = loss + extra_loss()
    loss.backward()
    optimizer.step()
    return loss


def full_batch_step(model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, data: Data,
                    train_index: Tensor, beta: float = 0.0,
                    extra_loss: Optional[Callable[[], Tensor]] = None
                    ) -> Tensor:
    r"""One optimiser step on the whole graph :obj:`data`: the
    cross-entropy of the nodes :obj:`train_index` (``mask.nonzero()``,
    computed once: selecting by a boolean mask in every step would
    synchronise with a GPU), plus :math:`\beta\,\mathrm{KL} / N_{train}`
    and :obj:`extra_loss`; backward; step.  Returns the loss."""
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out.index_select(0, train_index),
                           data.y.index_select(0, train_index))
    if beta:
        loss = loss + beta * kl_divergence(model) / train_index.numel()
    if extra_loss is not None:
        loss = loss + extra_loss()
    loss.backward()
    optimizer.step()
    return loss


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
    batches: Optional[Callable[[int], Iterable[Tuple[Data, int]]]] = None,
    inference: Optional[Callable[[], Tensor]] = None,
    score: Callable[[Tensor, Tensor, Tensor], float] = masked_accuracy,
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
        batches: Called with the epoch number, returns the epoch's
            mini-batches as ``(subgraph, global_batch_size)`` pairs; the
            subgraph's first ``batch_size`` nodes are the seeds (module
            docstring).  (default: :obj:`None`, full batch)
        inference: Returns the logits of every node in evaluation mode,
            e.g. ``lambda: model.inference(data.x, data.edge_index)``.
            (default: ``model(data.x, data.edge_index)``)
        score: ``score(logits, y, mask)``, higher is better: what
            ``val_acc`` and ``test_acc`` hold and the epoch is selected on
            (e.g. the ``score`` of a
            :class:`~ikgat.data.node_dataset.NodeDataset`).
            (default: :func:`masked_accuracy`)
    """
    if select not in SELECTIONS:
        raise ValueError(f'select must be one of {SELECTIONS} (got '
                         f'{select!r})')
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr,
                                     weight_decay=weight_decay)
    keep_state = keep_best_state or restore_best_state
    module = (model.module if isinstance(model, DistributedDataParallel)
              else model)
    rank, world_size = world()
    is_main = rank == 0
    if data.train_mask.dim() != 1:
        raise ValueError(f"train_node_classifier: 'data.train_mask' must be "
                         f"1-D, one entry per node (got shape "
                         f"{tuple(data.train_mask.shape)}); for a dataset "
                         f"with several splits pick one, e.g. "
                         f"data.train_mask[:, 0]")
    train_index = data.train_mask.nonzero().view(-1)  # one sync
    num_train = train_index.numel()
    has_test = 'test_mask' in data
    if batches is not None:
        warn_sampling_caveats(module)
    start = time.perf_counter()
    best_acc, best_loss, best_epoch = -1.0, math.inf, 0
    selected_acc, selected_loss, selected_test = -1.0, math.inf, 0.0
    # With NLL selection, a run whose loss never improves keeps the initial
    # state:
    best_state = (copy.deepcopy(module.state_dict())
                  if keep_state and select == 'nll' else None)
    since_acc = since_loss = 0
    epoch = 0
    # None: tqdm's own choice (a bar only on a terminal); rank 0 alone
    # shows one.
    show = progress if is_main else False
    bar = tqdm(total=epochs, unit='epoch', leave=False, dynamic_ncols=True,
               disable=None if show is None else not show)
    for epoch in range(1, epochs + 1):
        model.train()
        if batches is None:
            loss = full_batch_step(model, optimizer, data, train_index, beta,
                                   extra_loss)
        else:
            for batch, global_batch_size in batches(epoch):
                loss = minibatch_step(model, optimizer, batch,
                                      global_batch_size, beta, num_train,
                                      extra_loss)

        model.eval()
        figures = [math.nan] * 3
        if is_main:
            # The unwrapped module: a DDP forward on rank 0 alone would
            # start a buffer broadcast that the other ranks never join.
            with torch.no_grad():
                out = (inference() if inference is not None else
                       module(data.x, data.edge_index))
            figures = [
                score(out, data.y, data.val_mask),
                float(F.cross_entropy(out[data.val_mask],
                                      data.y[data.val_mask])),
                score(out, data.y, data.test_mask)
                if has_test else 0.0]
            if on_evaluate is not None:
                on_evaluate(epoch, out)
        val_acc, val_loss, test_acc = broadcast_from_main(figures)
        if on_epoch is not None and is_main:
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
            selected_test = test_acc
            if keep_state:
                best_state = copy.deepcopy(module.state_dict())
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
        module.load_state_dict(best_state)
    return TrainResult(selected_acc, selected_test, best_epoch, epoch,
                       time.perf_counter() - start, best_state,
                       selected_loss)
