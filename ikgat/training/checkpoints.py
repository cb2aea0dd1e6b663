r"""Save a trained :class:`~ikgat.models.TwoLayerGAT` with what it takes to
rebuild it, and load it back (``ikgat train --save-checkpoint``, read by
``ikgat plot``).

A checkpoint is a :func:`torch.save` file holding one dict of plain values
and tensors (so it loads with ``weights_only=True``):

* ``format``/``version``: ``'ikgat-checkpoint'``, :obj:`1`;
* ``layer``: the layer class name, ``'IKGATConv'``, ``'MIKANConv'``,
  ``'KEPGATConv'``, ``'GATConv'``, ``'IKTransformerConv'``,
  ``'MIKANTransformerConv'`` or ``'TransformerConv'``;
* ``model_kwargs``: the :class:`~ikgat.models.TwoLayerGAT` constructor
  arguments other than the layer and its arguments (``in_channels``,
  ``hidden_channels``, ``out_channels``, ``heads``, ``out_heads``,
  ``dropout``, ``self_loops``); one missing from an older checkpoint takes
  the constructor's default (a checkpoint written before ``self_loops`` was
  saved loads with :obj:`False`, as it did then);
* ``conv_kwargs``: the extra layer arguments (``kernel``, ``p``,
  ``num_spectral_points``, ...; a checkpoint written with the former name
  ``num_features`` loads too), with a random-feature kernel's floor
  ``kernel_kwargs['eps']`` always written: a checkpoint without it predates
  the floor's default of :obj:`1e-2` and loads with the :obj:`1e-5` it was
  trained with (:data:`FLOOR_BEFORE_DEFAULT`);
* ``dataset``, ``normalize_features``: the data it was trained on;
* ``state_dict``; ``log`` (optional, e.g. an
  :class:`~ikgat.inspection.terms.AttentionTermsRecorder` log) and ``info``
  (optional, e.g. accuracies and the best epoch).
"""
import inspect
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

import torch

from ikgat.atomic_writes import atomic_open

#: The ``format`` field that marks a file as an ikgat checkpoint.
FORMAT = 'ikgat-checkpoint'
#: The checkpoint layout written and read; a file of another version is
#: refused with a message naming both.
VERSION = 1


#: The random-feature kernels' floor ``eps`` before its default became
#: :data:`~ikgat.kernels.random_features.DEFAULT_EPS`: a checkpoint that does
#: not record the floor was trained with it.
FLOOR_BEFORE_DEFAULT = 1e-5


def layer_classes() -> Dict[str, type]:
    r"""The layer classes a checkpoint can name."""
    from torch_geometric.nn import GATConv, TransformerConv

    from ikgat.nn import (
        IKGATConv,
        IKTransformerConv,
        KEPGATConv,
        MIKANConv,
        MIKANTransformerConv,
    )
    return {'IKGATConv': IKGATConv, 'MIKANConv': MIKANConv,
            'KEPGATConv': KEPGATConv, 'GATConv': GATConv,
            'IKTransformerConv': IKTransformerConv,
            'MIKANTransformerConv': MIKANTransformerConv,
            'TransformerConv': TransformerConv}


@dataclass
class Checkpoint:
    r"""A loaded checkpoint: the rebuilt :attr:`model` (weights loaded, in
    evaluation mode) and everything saved with it."""
    model: torch.nn.Module
    layer: str
    dataset: str
    model_kwargs: Dict[str, Any]
    conv_kwargs: Dict[str, Any]
    normalize_features: bool = True
    log: Optional[Dict[str, Any]] = None
    info: Dict[str, Any] = field(default_factory=dict)

    def load_dataset(self, root: Optional[str] = None):
        r"""The dataset the model was trained on
        (:func:`ikgat.data.load_dataset`), with its feature normalisation."""
        from ikgat.data import load_dataset
        return load_dataset(self.dataset, root)


def _model_kwargs(model: torch.nn.Module) -> Dict[str, Any]:
    # Every TwoLayerGAT constructor argument but the layer class and its
    # arguments (saved apart): load_checkpoint passes them all back, so a
    # model rebuilt from a checkpoint is the model that was saved.
    from ikgat.models import TwoLayerGAT
    if not isinstance(model, TwoLayerGAT):
        raise TypeError(f'save_checkpoint saves an ikgat.models.TwoLayerGAT '
                        f'(got {type(model).__name__})')
    conv1, conv2 = model.conv1, model.conv2
    return dict(in_channels=conv1.in_channels,
                hidden_channels=conv1.out_channels,
                out_channels=conv2.out_channels, heads=conv1.heads,
                out_heads=conv2.heads, dropout=float(model.dropout),
                self_loops=bool(model.self_loops))


def save_checkpoint(path: str, model: torch.nn.Module, dataset: str,
                    conv_kwargs: Optional[Dict[str, Any]] = None,
                    log: Optional[Dict[str, Any]] = None,
                    info: Optional[Dict[str, Any]] = None,
                    normalize_features: bool = True,
                    state_dict: Optional[Dict[str, Any]] = None) -> None:
    r"""Write :obj:`model` to :obj:`path` (folders are created), through
    a temporary file that replaces :obj:`path` only once it is complete
    (:func:`ikgat.atomic_writes.atomic_open`).

    Args:
        path: The file to write.
        model: A :class:`~ikgat.models.TwoLayerGAT`; its sizes and layer
            class are read from it.
        dataset: The dataset name (``'Cora'``, ...).
        conv_kwargs: The ``conv_kwargs`` the model was built with (kernel,
            p, num_spectral_points, ...): they cannot be read back from the
            layers.
        log: A JSON-friendly training log (optional).
        info: Anything else worth keeping, e.g. accuracies (optional).
        normalize_features: Whether the features were row-normalised.
        state_dict: The weights to save (default: ``model.state_dict()``),
            e.g. the best epoch's of ``train_node_classifier``.
    """
    layer = type(model.conv1).__name__ if hasattr(model, 'conv1') else None
    if layer not in layer_classes():
        raise TypeError(f'Unsupported layer {layer!r}: a checkpoint stores '
                        f'a TwoLayerGAT of {sorted(layer_classes())}')
    payload = dict(
        format=FORMAT, version=VERSION, layer=layer,
        model_kwargs=_model_kwargs(model),
        conv_kwargs=_with_floor(_current_names(dict(conv_kwargs or {})),
                                model.conv1),
        dataset=str(dataset),
        normalize_features=bool(normalize_features),
        state_dict={key: value.detach().cpu() for key, value in
                    (state_dict or model.state_dict()).items()},
        log=log, info=dict(info or {}))
    with atomic_open(path) as file:
        torch.save(payload, file)


def load_checkpoint(path: str, map_location: Any = 'cpu') -> Checkpoint:
    r"""Rebuild the model saved by :func:`save_checkpoint` at :obj:`path`,
    load its weights and return it in evaluation mode with the saved
    information."""
    from ikgat.models import TwoLayerGAT
    if not osp.isfile(path):
        raise FileNotFoundError(f'No checkpoint at {path!r}; write one with '
                                f'`ikgat train --save-checkpoint {path}`')
    try:
        payload = torch.load(path, map_location=map_location,
                             weights_only=True)
    except Exception as error:
        raise ValueError(f'{path} is not an ikgat checkpoint or is damaged '
                         f'({type(error).__name__}: {_first_sentence(error)}'
                         f'); write it again with `ikgat train '
                         f'--save-checkpoint`') from error
    if not isinstance(payload, dict) or payload.get('format') != FORMAT:
        raise ValueError(f'{path} is not an ikgat checkpoint (written by '
                         f'ikgat.training.checkpoints.save_checkpoint)')
    if payload.get('version') != VERSION:
        raise ValueError(f'{path} has checkpoint version '
                         f'{payload.get("version")!r}; this ikgat reads '
                         f'version {VERSION}')
    classes = layer_classes()
    if payload['layer'] not in classes:
        raise ValueError(f'{path} names the unknown layer '
                         f'{payload["layer"]!r}; known: {sorted(classes)}')
    try:
        model_kwargs = dict(payload['model_kwargs'])
        conv_kwargs = _floor_of_old(
            _current_names(dict(payload['conv_kwargs'])),
            classes[payload['layer']])
        # Every saved argument goes back to the constructor; one that an
        # older checkpoint lacks (self_loops) takes its default.
        model = TwoLayerGAT(conv=classes[payload['layer']],
                            conv_kwargs=conv_kwargs, **model_kwargs)
        model.load_state_dict(payload['state_dict'])
    except (KeyError, TypeError, ValueError, RuntimeError) as error:
        raise ValueError(f'{path} is a damaged ikgat checkpoint: its model '
                         f'cannot be rebuilt ({type(error).__name__}: '
                         f'{_first_sentence(error)}); write it again with '
                         f'`ikgat train --save-checkpoint`') from error
    model.eval()
    return Checkpoint(model=model, layer=payload['layer'],
                      dataset=payload['dataset'], model_kwargs=model_kwargs,
                      conv_kwargs=conv_kwargs,
                      normalize_features=payload['normalize_features'],
                      log=payload.get('log'), info=payload.get('info') or {})


#: Layer arguments renamed since checkpoints were first written: a checkpoint
#: that holds the old name loads under the new one, without a warning.
RENAMED_CONV_KWARGS = {'num_features': 'num_spectral_points'}


def _current_names(conv_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    return {RENAMED_CONV_KWARGS.get(name, name): value
            for name, value in conv_kwargs.items()}


def _with_floor(conv_kwargs: Dict[str, Any],
                conv: torch.nn.Module) -> Dict[str, Any]:
    # The floor of the layer's random-feature kernel, whatever was passed.
    kernel = getattr(conv, 'kernel', None)
    if getattr(kernel, 'has_spectral_points', False):
        conv_kwargs['kernel_kwargs'] = {
            **dict(conv_kwargs.get('kernel_kwargs') or {}),
            'eps': float(kernel.eps)}
    return conv_kwargs


def _floor_of_old(conv_kwargs: Dict[str, Any],
                  layer_class: type) -> Dict[str, Any]:
    # A random-feature layer saved without its floor: saved before the
    # floor was recorded, with the default of then.
    from ikgat.kernels import random_feature_kernels
    arguments = inspect.signature(layer_class).parameters
    if 'kernel_kwargs' not in arguments:
        return conv_kwargs
    # MIKAN's layers take no kernel argument: theirs is 'implicit'.
    kernel = conv_kwargs.get('kernel', arguments['kernel'].default
                             if 'kernel' in arguments else 'implicit')
    kernel_kwargs = dict(conv_kwargs.get('kernel_kwargs') or {})
    if kernel in random_feature_kernels() and 'eps' not in kernel_kwargs:
        conv_kwargs['kernel_kwargs'] = {**kernel_kwargs,
                                        'eps': FLOOR_BEFORE_DEFAULT}
    return conv_kwargs


def _first_sentence(error: Exception) -> str:
    text = ' '.join(str(error).split())
    return text.split('. ')[0]
