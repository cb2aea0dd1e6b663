r"""Training a node classifier: the loop with early stopping
(:mod:`~ikgat.training.loop`), the layers the command line trains
(:mod:`~ikgat.training.layer_recipes`), mini-batches
(:mod:`~ikgat.training.sampling`), processes
(:mod:`~ikgat.training.distributed`), checkpoints
(:mod:`~ikgat.training.checkpoints`) and the search of a layer's options
(:mod:`~ikgat.training.tuning`, with the ``tune`` extra)."""
from ikgat.training.loop import (
    SELECTIONS,
    VARIATIONAL_SCALE_NAMES,
    TrainResult,
    full_batch_step,
    masked_accuracy,
    minibatch_step,
    train_node_classifier,
    variational_adam,
)

__all__ = [
    'train_node_classifier', 'TrainResult', 'variational_adam',
    'masked_accuracy', 'full_batch_step', 'minibatch_step', 'SELECTIONS',
    'VARIATIONAL_SCALE_NAMES'
]
