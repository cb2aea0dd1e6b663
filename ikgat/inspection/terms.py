r"""The similarity and magnitude terms of kernel attention over training
epochs (the IKA paper's Fig. 3): :class:`AttentionTermsRecorder`, a hook
for the training loop, and the statistics it records.
"""
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional

import torch
from torch import Tensor

from ikgat.inspection.capture import (
    LayerSelector,
    attention_layers,
    layer_decompositions,
)


def _group_spread(values: Tensor, index: Tensor, num_nodes: int) -> float:
    r"""Mean over (target node, head) groups with edges of the population
    std of :obj:`values` :math:`(E, H)` within each group."""
    from torch_geometric.utils import scatter

    values = values.double()
    count = torch.bincount(index, minlength=num_nodes)
    mean = scatter(values, index, dim=0, dim_size=num_nodes, reduce='mean')
    variance = scatter((values - mean[index])**2, index, dim=0,
                       dim_size=num_nodes, reduce='mean')
    return float(variance.clamp_min(0).sqrt()[count > 0].mean())


TERM_STATISTICS = ('log_similarity_mean', 'log_magnitude_mean',
                   'log_similarity_spread', 'log_magnitude_spread')


@dataclass(eq=False)
class AttentionTermsRecorder:
    r"""Records, per epoch and attention layer, the similarity and magnitude
    terms of the attention logits, :math:`\log\tilde\alpha_{ij} =
    \log\mathrm{sim} + \log\mathrm{mag}` (see
    :meth:`~ikgat.IKGATConv.attention_decomposition`):

    * ``log_similarity_mean``, ``log_magnitude_mean``: the means over all
      edges and heads (the magnitude includes :math:`\tfrac12\|q_i\|_p^2`,
      which is constant over each softmax group);
    * ``log_similarity_spread``, ``log_magnitude_spread``: the standard
      deviation within the incoming edges of each target node, averaged
      over nodes and heads: how much each term moves the attention
      weights (a constant per group does not).

    Use it as the :obj:`on_epoch` callback of
    :func:`ikgat.training.train_node_classifier`; it evaluates the model in
    evaluation mode on ``(x, edge_index)`` and restores the random
    generators' states, so recording does not change the training run.

    Args:
        model: The model being trained (or one layer).
        x, edge_index: The graph to evaluate the terms on.
        layer: Which layers (see :func:`attention_layers`); all by default.
        every: Record every :obj:`every`-th epoch (and the first).
        callback: Another ``on_epoch`` callback to call as well.

    The record is :attr:`log`, a JSON-friendly dict: ``epoch``, ``val_acc``,
    ``val_loss`` (lists) and ``layers``, ``name -> statistic -> list``.
    """
    model: torch.nn.Module
    x: Any = field(repr=False)
    edge_index: Any = field(repr=False)
    layer: LayerSelector = None
    every: int = 1
    callback: Optional[Callable[[int, float, float], None]] = None
    #: The names of the recorded layers (:func:`attention_layers`).
    names: List[str] = field(init=False)
    #: The record, JSON-friendly: ``epoch``, ``val_acc``, ``val_loss``
    #: (lists) and ``layers``, ``name -> statistic -> list``.
    log: Dict[str, Any] = field(init=False, repr=False)

    def __post_init__(self):
        every = self.every
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"'every' must be a positive integer (got "
                             f"{every!r})")
        self.names = [name for name, _ in attention_layers(self.model,
                                                           self.layer)]
        self.log = dict(epoch=[], val_acc=[], val_loss=[], layers={
            name or type(self.model).__name__: {key: []
                                                for key in TERM_STATISTICS}
            for name in self.names
        })

    def record(self, epoch: int, val_acc: float = float('nan'),
               val_loss: float = float('nan')) -> None:
        r"""Evaluate the terms now and append them to :attr:`log`."""
        decompositions = layer_decompositions(self.model, self.x,
                                              self.edge_index, self.layer)
        self.log['epoch'].append(int(epoch))
        self.log['val_acc'].append(float(val_acc))
        self.log['val_loss'].append(float(val_loss))
        for name, decomposition in decompositions.items():
            key = name or type(self.model).__name__
            index = decomposition.edge_index[1]
            num_nodes = int(index.max()) + 1 if index.numel() else 0
            entry = self.log['layers'][key]
            entry['log_similarity_mean'].append(
                float(decomposition.log_similarity.double().mean()))
            entry['log_magnitude_mean'].append(
                float(decomposition.log_magnitude.double().mean()))
            entry['log_similarity_spread'].append(
                _group_spread(decomposition.log_similarity, index, num_nodes))
            entry['log_magnitude_spread'].append(
                _group_spread(decomposition.log_magnitude, index, num_nodes))

    def __call__(self, epoch: int, val_acc: float, val_loss: float) -> None:
        if epoch == 1 or epoch % self.every == 0:
            self.record(epoch, val_acc, val_loss)
        if self.callback is not None:
            self.callback(epoch, val_acc, val_loss)


def check_terms_log(log: Any, label: str) -> None:
    if not isinstance(log, Mapping) or 'epoch' not in log or (
            'layers' not in log):
        raise ValueError(f'{label} is not a log of AttentionTermsRecorder '
                         f'(a dict with "epoch" and "layers")')
    if not log['epoch']:
        raise ValueError(f'{label} has no recorded epochs')
