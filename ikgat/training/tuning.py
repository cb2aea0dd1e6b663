r"""The search of one layer's options on one dataset by validation score:
an Optuna study (``pip install 'ikgat[tune]'``), run by ``ikgat tune``.

* The study lives in a database (SQLite: ``sqlite:///study.db``) and
  records the dataset, the layer, the split and the space it was made for;
  opening it for another is refused.
* Every trial trains the recipe of ``ikgat train``
  (:class:`~ikgat.models.TwoLayerGAT`,
  :func:`~ikgat.training.loop.variational_adam`, early stopping) with the
  seed ``SEARCH_SEEDS[trial.number]``
  (:data:`~ikgat.training.configuration.SEARCH_SEEDS`, disjoint from the
  evaluation seeds), and is scored on the validation split only; the
  variational layers are scored with their draws averaged.
* The TPE sampler proposes the options; a median pruner stops a trial whose
  validation curve falls below the median of the earlier trials' at the
  same epoch (read every :data:`REPORT_EVERY` epochs), from the epoch of
  early stopping's patience on.
* Optuna writes a trial's end (state, value, options) in one transaction:
  a killed process loses the trial in flight only, which the next run
  marks failed (:func:`open_study`) before it goes on.
"""
import os
import socket
from typing import Any, Dict, List, Optional

import torch
from torch_geometric.data import Data

from ikgat.data import NodeDataset
from ikgat.training.configuration import SEARCH_SEEDS, TrainConfig
from ikgat.training.fitting import fit_configuration
from ikgat.training.layer_recipes import (
    TRAIN_LAYERS,
    resolve_settings,
    without_unused_floor,
)
from ikgat.training.search_space import (
    SHARED_OPTIONS,
    Choice,
    Distribution,
    describe_space,
)

#: How to install what ``ikgat tune`` needs.
OPTUNA_HELP = "ikgat tune needs Optuna: pip install 'ikgat[tune]'"
#: Epochs between the validation scores a trial reports to the pruner
#: (and the study stores).
REPORT_EVERY = 10
#: What a study records of what it searches, in its user attributes.
STUDY_KEYS = ('dataset', 'layer', 'split', 'space')


def require_optuna() -> None:
    r"""Raise an :class:`ImportError` saying how to install Optuna when it
    is missing."""
    try:
        import optuna  # noqa: F401
    except ImportError as error:
        raise ImportError(OPTUNA_HELP) from error


def sqlite_file(storage: str) -> Optional[str]:
    r"""The file of a ``sqlite:///PATH`` storage, or :obj:`None` for any
    other database URL."""
    prefix = 'sqlite:///'
    return storage[len(prefix):] if storage.startswith(prefix) else None


def open_study(storage: str, name: str, identity: Dict[str, Any],
               seed: int, warmup_epochs: int = 100):
    r"""Create the study :obj:`name` in :obj:`storage`, or load it to
    resume.

    Args:
        storage (str): A database URL, e.g. ``'sqlite:///study.db'``.
        name (str): The study's name.
        identity (dict): What the study searches (:data:`STUDY_KEYS`):
            a study that exists must have been made for the same.
        seed (int): The seed of the TPE sampler (pass one that changes as
            the study grows, e.g. its number of trials).
        warmup_epochs (int, optional): The epochs a trial trains before the
            pruner may stop it; pass early stopping's patience, so that no
            trial is judged before early stopping could have judged it (a
            slow learner, with a high dropout or a small learning rate,
            can be far under the median at epoch 10 and the best trial at
            its end). (default: :obj:`100`)

    Raises:
        ValueError: When the study was made for another dataset, layer,
            split or space.
    """
    import optuna
    from optuna.trial import TrialState
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        storage=storage, study_name=name, direction='maximize',
        load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=5,
                                           n_warmup_steps=warmup_epochs))
    stored = study.user_attrs
    if stored:
        different = [key for key in STUDY_KEYS
                     if stored.get(key) != identity[key]]
        if different:
            made = ' '.join(f'--{key} {stored.get(key)}' for key in different
                            if key != 'space')
            raise ValueError(
                f'the study {name!r} in {storage} was made for '
                + (made or 'the space ' + ' '.join(
                    f'--search {option}={spec}' for option, spec in
                    stored.get('space', {}).items()))
                + '; pass those options to resume it, or a new '
                '--study-name (or --storage) to start another')
    else:
        for key in STUDY_KEYS:
            study.set_user_attr(key, identity[key])
    for trial in study.get_trials(deepcopy=False,
                                  states=(TrialState.RUNNING, )):
        if not _process_alive(trial.user_attrs.get('process')):
            study.tell(trial.number, state=TrialState.FAIL)
    return study


def finished_trials(study) -> List[Any]:
    r"""The trials that ran to their end: complete or pruned."""
    from optuna.trial import TrialState
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,
                                                    TrialState.PRUNED))


def _this_process() -> str:
    return f'{socket.gethostname()}:{os.getpid()}'


def _process_alive(process: Optional[str]) -> bool:
    # A trial left RUNNING by a process of this machine that has ended was
    # killed; a trial of another machine's process may still run.
    if process is None:
        return False
    host, _, pid = process.rpartition(':')
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sample(trial, space: Dict[str, Distribution]) -> Dict[str, Any]:
    r"""The options of :obj:`trial`, drawn from :obj:`space`."""
    values = {}
    for name, distribution in space.items():
        if isinstance(distribution, Choice):
            values[name] = trial.suggest_categorical(
                name, list(distribution.values))
        elif distribution.integer:
            values[name] = trial.suggest_int(
                name, int(distribution.low), int(distribution.high),
                log=distribution.log)
        else:
            values[name] = trial.suggest_float(
                name, distribution.low, distribution.high,
                log=distribution.log)
    return values


class Objective:
    r"""The validation score of one trial's options, for
    ``optuna.study.Study.optimize``.

    Args:
        dataset (NodeDataset): The dataset.
        data (torch_geometric.data.Data): The split searched, with 1-D
            masks (e.g. :meth:`NodeDataset.split
            <ikgat.data.node_dataset.NodeDataset.split>`); its test mask is
            never read.
        layer (str): The layer (a key of
            :data:`~ikgat.training.layer_recipes.TRAIN_LAYERS`).
        space (dict): The distributions searched.
        heads (int): Heads of the first layer.
        epochs (int): The most epochs a trial trains.
        patience (int): Early stopping's patience.
        device (torch.device): Where trials train.
    """
    def __init__(self, dataset: NodeDataset, data: Data, layer: str,
                 space: Dict[str, Distribution], heads: int, epochs: int,
                 patience: int, device: torch.device):
        self.dataset = dataset
        self.data = data.to(device)
        self.layer = layer
        self.space = space
        self.heads = heads
        self.epochs = epochs
        self.patience = patience
        self.device = device

    def __call__(self, trial) -> float:
        import optuna
        trial.set_user_attr('process', _this_process())
        seed = SEARCH_SEEDS[trial.number]
        trial.set_user_attr('seed', seed)

        def report(epoch: int, val_score: float, val_loss: float) -> None:
            if epoch % REPORT_EVERY:
                return
            trial.report(val_score, epoch)
            if trial.should_prune():
                raise optuna.TrialPruned()

        fit = fit_configuration(
            self.dataset, self.data, self.layer,
            without_unused_floor(self.layer, sample(trial, self.space)),
            self.heads, self.epochs, self.patience, seed, self.device,
            read_test=False, on_epoch=report)
        trial.set_user_attr('best_epoch', fit.best_epoch)
        return fit.val_score


def identity(dataset: str, layer: str, split: int,
             space: Dict[str, Distribution]) -> Dict[str, Any]:
    r"""What a study of :obj:`layer` on :obj:`dataset` records
    (:data:`STUDY_KEYS`)."""
    return dict(dataset=dataset, layer=layer, split=split,
                space=describe_space(space))


def best_config(study, heads: int) -> TrainConfig:
    r"""The configuration of the study's best trial, with its
    provenance."""
    best = study.best_trial
    attrs = study.user_attrs
    options = without_unused_floor(attrs['layer'], dict(best.params))
    shared = {name: options.pop(name) for name in SHARED_OPTIONS}
    # The floor of a random-feature kernel, which is not searched, as the
    # trials had it: a configuration keeps it if its default changes.
    settings = resolve_settings(attrs['layer'], options)
    if 'kernel_kwargs' in TRAIN_LAYERS[attrs['layer']].conv_kwargs(settings):
        options['kernel_eps'] = settings['kernel_eps']
    return TrainConfig(
        dataset=attrs['dataset'], layer=attrs['layer'],
        layer_options=options, heads=heads, **shared,
        provenance=dict(study=study.study_name, trial=best.number,
                        validation_score=best.value,
                        split=attrs['split'], search_seed=best.user_attrs.get(
                            'seed'),
                        finished_trials=len(finished_trials(study))))
