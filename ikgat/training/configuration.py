r"""One training configuration as a JSON file: what ``ikgat tune`` writes
for its best trial and ``ikgat train --config`` reads.

The file holds one object::

    {"format": "ikgat-config", "version": 1,
     "dataset": "Cora", "layer": "ikgat",
     "layer_options": {"kernel": "rff", "p": 1.7, "num_spectral_points": 64},
     "hidden": 8, "heads": 8, "dropout": 0.55, "lr": 0.006,
     "weight_decay": 0.0004,
     "provenance": {...}}

``layer_options`` are the options of
:data:`ikgat.training.layer_recipes.LAYER_OPTIONS` that the layer takes;
``provenance`` (optional) says where the configuration comes from (the
study, its trial and validation score).

Seeds: a search trains with :data:`SEARCH_SEEDS`, an evaluation with
:data:`EVALUATION_SEEDS`; the two ranges do not meet, so no configuration
is ever scored on the seeds that chose it.
"""
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Dict

from ikgat.atomic_writes import write_text_atomic

#: The ``format`` field that marks a file as an ikgat configuration.
FORMAT = 'ikgat-config'
#: The layout written and read.
VERSION = 1
#: The seeds of ``ikgat train`` and the benchmarks.
EVALUATION_SEEDS = range(0, 1_000_000)
#: The seeds of ``ikgat tune``'s trials (trial ``n`` trains with seed
#: ``SEARCH_SEEDS[n]``).
SEARCH_SEEDS = range(1_000_000, 2_000_000)
#: The options of the training recipe that a configuration sets, with the
#: defaults of ``ikgat train``.
TRAIN_DEFAULTS = dict(hidden=8, heads=8, dropout=0.6, lr=0.005,
                      weight_decay=5e-4)


@dataclass
class TrainConfig:
    r"""A training configuration.

    Args:
        dataset (str): The dataset's name (:data:`ikgat.data.catalog.DATASET_NAMES`).
        layer (str): The layer (a key of
            :data:`ikgat.training.layer_recipes.TRAIN_LAYERS`).
        layer_options (dict): The layer's options that differ from its
            defaults or were searched (``kernel``, ``p``, ...).
        hidden (int): Channels per head of the first layer.
        heads (int): Heads of the first layer.
        dropout (float): Feature and attention dropout.
        lr (float): Adam's learning rate.
        weight_decay (float): Adam's weight decay.
        provenance (dict, optional): Where the configuration comes from.
    """
    dataset: str
    layer: str
    layer_options: Dict[str, Any]
    hidden: int = TRAIN_DEFAULTS['hidden']
    heads: int = TRAIN_DEFAULTS['heads']
    dropout: float = TRAIN_DEFAULTS['dropout']
    lr: float = TRAIN_DEFAULTS['lr']
    weight_decay: float = TRAIN_DEFAULTS['weight_decay']
    provenance: Dict[str, Any] = field(default_factory=dict)


def write_config(path: str, config: TrainConfig) -> None:
    r"""Write :obj:`config` to :obj:`path` as JSON, atomically
    (:func:`ikgat.atomic_writes.write_text_atomic`)."""
    payload = dict(format=FORMAT, version=VERSION, **asdict(config))
    write_text_atomic(path, json.dumps(payload, indent=2) + '\n')


def read_config(path: str) -> TrainConfig:
    r"""The configuration at :obj:`path`; a :class:`ValueError` names what
    is wrong with a file that is not one (unreadable JSON, another format
    or version, a missing or unknown field)."""
    with open(path, encoding='utf-8') as file:
        try:
            payload = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f'{path} is not JSON ({error}); write it with '
                             f'`ikgat tune --out {path}`') from None
    if not isinstance(payload, dict) or payload.get('format') != FORMAT:
        raise ValueError(f'{path} is not an ikgat configuration (written by '
                         f'`ikgat tune --out`)')
    if payload.pop('version', None) != VERSION:
        raise ValueError(f'{path} is not of configuration version '
                         f'{VERSION}; write it again with `ikgat tune`')
    payload.pop('format')
    known = set(TrainConfig.__dataclass_fields__)
    unknown = sorted(set(payload) - known)
    missing = sorted({'dataset', 'layer', 'layer_options'} - set(payload))
    if unknown or missing:
        raise ValueError(f'{path}: ' + '; '.join(
            part for part in (
                f'unknown fields {unknown}' if unknown else '',
                f'missing fields {missing}' if missing else '') if part)
            + '; write it again with `ikgat tune`')
    return TrainConfig(**payload)
