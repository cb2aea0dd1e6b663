r"""One configuration trained once, in the recipe of ``ikgat train``: what
each trial of ``ikgat tune`` runs (scored on the validation split) and what
the tuned tables run on each evaluation seed or split (scored on the test
split too).

The recipe: :class:`~ikgat.models.TwoLayerGAT` with the layer of
:data:`~ikgat.training.layer_recipes.TRAIN_LAYERS` (self-loops added for the
transformer layers), the seed set before the model is built,
:func:`~ikgat.training.loop.variational_adam`, early stopping on the
validation score; the stochastic layers select their epoch on their
deterministic evaluation and are then scored once with
``num_samples`` draws averaged, the seed set again before the draws.
"""
import copy
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data

from ikgat.data import NodeDataset
from ikgat.models import TwoLayerGAT
from ikgat.training.layer_recipes import (
    TRAIN_LAYERS,
    evaluate_draws,
    resolve_settings,
)
from ikgat.training.loop import train_node_classifier, variational_adam
from ikgat.training.sampling import minibatch_training
from ikgat.training.search_space import SHARED_OPTIONS


@dataclass
class Fit:
    r"""The scores of one training run: at the selected epoch, or with the
    draws averaged for a stochastic layer. :obj:`test_score` is NaN when
    the test split was not read."""
    val_score: float
    test_score: float
    best_epoch: int
    epochs: int


def fit_configuration(
    dataset: NodeDataset, data: Data, layer: str, options: Dict[str, Any],
    heads: int, epochs: int, patience: int, seed: int,
    device: torch.device, read_test: bool = True,
    on_epoch: Optional[Callable[[int, float, float], None]] = None,
) -> Fit:
    r"""Train one configuration once and score it.

    Args:
        dataset (NodeDataset): The dataset (its score, heads, mini-batches).
        data (torch_geometric.data.Data): One split of it, on
            :obj:`device` (:meth:`NodeDataset.split`).
        layer (str): A key of
            :data:`~ikgat.training.layer_recipes.TRAIN_LAYERS`.
        options (dict): The layer's options and the recipe's
            (:data:`~ikgat.training.search_space.SHARED_OPTIONS`), e.g. a
            configuration's ``layer_options`` with its ``hidden``,
            ``dropout``, ``lr`` and ``weight_decay``.
        heads (int): Heads of the first layer.
        epochs (int): The most epochs.
        patience (int): Early stopping's patience.
        seed (int): The seed of the model, its dropout and its draws.
        device (torch.device): Where it trains.
        read_test (bool, optional): Whether to score the test split; a
            search passes :obj:`False` and the test masks are removed
            before training. (default: :obj:`True`)
        on_epoch (callable, optional): Called with ``(epoch, val_score,
            val_loss)`` after each epoch (a pruner).
    """
    recipe = TRAIN_LAYERS[layer]
    settings = resolve_settings(layer, {
        name: value for name, value in options.items()
        if name not in SHARED_OPTIONS})
    if not read_test:
        data = copy.copy(data)
        del data.test_mask
    torch.manual_seed(seed)
    model = TwoLayerGAT(
        dataset.num_features, options['hidden'], dataset.num_classes,
        recipe.conv(), heads=heads, out_heads=dataset.out_heads,
        dropout=options['dropout'], self_loops=recipe.self_loops,
        conv_kwargs=recipe.conv_kwargs(settings)).to(device)
    batches = inference = None
    if dataset.batch_size is not None:
        batches, inference = minibatch_training(
            model, data, dataset.batch_size, list(dataset.fan_out), 4096,
            seed)
    result = train_node_classifier(
        model, data, epochs=epochs, patience=patience,
        restore_best_state=recipe.stochastic, on_epoch=on_epoch,
        extra_loss=recipe.extra_loss(model, settings,
                                     int(data.train_mask.sum())),
        optimizer=variational_adam(model, options['lr'],
                                   options['weight_decay']),
        batches=batches, inference=inference, score=dataset.score)
    fit = Fit(result.val_acc, result.test_acc if read_test else math.nan,
              result.best_epoch, result.epochs)
    if not recipe.stochastic:
        return fit
    forward: Callable[[], Tensor] = inference or (
        lambda: model(data.x, data.edge_index))
    torch.manual_seed(seed)
    logits = evaluate_draws(model, recipe, settings['num_samples'], forward)
    fit.val_score = dataset.score(logits, data.y, data.val_mask)
    if read_test:
        fit.test_score = dataset.score(logits, data.y, data.test_mask)
    return fit
