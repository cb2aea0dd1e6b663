r"""A model's attention layers and what they compute on the inputs they
see: the first step of :mod:`ikgat.inspection` and of the figures of
:mod:`ikgat.inspection.figures`.

* :func:`attention_layers` and :func:`layer_decompositions` — a model's
  kernel-attention layers and the per-edge terms of their attention on the
  inputs they see (:meth:`ikgat.IKGATConv.attention_decomposition`).
* :func:`weighting_layers` and :func:`attention_weights` — the attention
  weights of any layer that returns them as GATConv does.

The model runs once in evaluation mode; its training mode and the random
generators' states are restored afterwards, so looking at a model never
changes a training run.
"""
import inspect
from typing import Any, Callable, Dict, List, Sequence, Tuple, Union

import torch
from torch import Tensor

from ikgat.nn.conv.ik_transformer_conv import IKTransformerConv
from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv
from ikgat.nn.conv.mikan_conv import MIKANConv
from ikgat.nn.conv.mikan_transformer_conv import MIKANTransformerConv

LayerSelector = Union[None, str, torch.nn.Module]

#: The kernel-attention layers (those with a kernel and an
#: ``attention_decomposition``): the GAT form and the transformer form.
KERNEL_LAYERS = (IKGATConv, IKTransformerConv)
#: The layers whose heads are tied by a learned copula.
COPULA_LAYERS = (MIKANConv, MIKANTransformerConv)
_KERNEL_LAYER_NAMES = ('IKGATConv, MIKANConv, IKTransformerConv or '
                       'MIKANTransformerConv')


def attention_layers(model: torch.nn.Module,
                     layer: LayerSelector = None) -> List[Tuple[str, Any]]:
    r"""The kernel-attention layers of :obj:`model` as ``(name, layer)``
    pairs, in module order.

    Args:
        model: A model, or a kernel-attention layer itself (named ``''``).
        layer: :obj:`None` for all :data:`KERNEL_LAYERS` submodules
            (:class:`~ikgat.IKGATConv`, :class:`~ikgat.MIKANConv`,
            :class:`~ikgat.IKTransformerConv`,
            :class:`~ikgat.MIKANTransformerConv`), a submodule name such as
            ``'conv1'``, or the layer module itself.
    """
    if isinstance(layer, str):
        try:
            module = model.get_submodule(layer)
        except AttributeError as error:
            names = [name for name, _ in attention_layers(model)]
            raise ValueError(f"{type(model).__name__} has no layer {layer!r}; "
                             f"its attention layers are {names}") from error
        if not isinstance(module, KERNEL_LAYERS):
            raise TypeError(f"Layer {layer!r} is a {type(module).__name__}, "
                            f"not an {_KERNEL_LAYER_NAMES}")
        return [(layer, module)]
    if isinstance(layer, torch.nn.Module):
        for name, module in model.named_modules():
            if module is layer:
                return [(name, layer)]
        raise ValueError(f'The given {type(layer).__name__} is not a '
                         f'submodule of the {type(model).__name__}')
    if layer is not None:
        raise TypeError(f"'layer' must be None, a submodule name or a module "
                        f"(got {type(layer).__name__})")
    found = [(name, module) for name, module in model.named_modules()
             if isinstance(module, KERNEL_LAYERS)]
    if not found:
        raise ValueError(f'{type(model).__name__} has no '
                         f'{_KERNEL_LAYER_NAMES} layer; build the model with '
                         f'ikgat\'s layers (GATConv and TransformerConv have '
                         f'no kernel to plot)')
    return found


def layer_label(name: str, layer: torch.nn.Module) -> str:
    return f'{name} ({type(layer).__name__})' if name else type(
        layer).__name__


@torch.no_grad()
def _capture_inputs(model: torch.nn.Module, layers: Sequence[Tuple[str, Any]],
                    x: Any, edge_index: Any, **forward_kwargs: Any
                    ) -> Dict[str, Dict[str, Any]]:
    r"""Run :obj:`model` once in evaluation mode and return, per layer, the
    arguments of its forward call as keyword arguments of
    :meth:`~ikgat.IKGATConv.attention_decomposition`."""
    captured: Dict[str, Dict[str, Any]] = {}
    handles = []

    def hook_for(name: str, layer: torch.nn.Module) -> Callable:
        signature = inspect.signature(layer.forward)

        def hook(module, args, kwargs):
            bound = signature.bind(*args, **kwargs)
            arguments = dict(bound.arguments)
            arguments.pop('return_attention_weights', None)
            captured[name] = arguments

        return hook

    for name, layer in layers:
        handles.append(
            layer.register_forward_pre_hook(hook_for(name, layer),
                                            with_kwargs=True))
    was_training = model.training
    model.eval()
    # Monte-Carlo evaluation (num_samples > 1) draws random numbers: fork the
    # generators so that looking at a model never changes a training run.
    devices = []
    if isinstance(x, Tensor) and x.is_cuda:
        devices = [x.device.index if x.device.index is not None else
                   torch.cuda.current_device()]
    try:
        with torch.random.fork_rng(devices=devices):
            model(x, edge_index, **forward_kwargs)
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    missing = [name for name, _ in layers if name not in captured]
    if missing:
        raise RuntimeError(f'The forward pass of {type(model).__name__} did '
                           f'not call the layers {missing}')
    return captured


@torch.no_grad()
def layer_decompositions(model: torch.nn.Module, x: Any, edge_index: Any,
                         layer: LayerSelector = None, **forward_kwargs: Any
                         ) -> Dict[str, AttentionDecomposition]:
    r"""The :meth:`~ikgat.IKGATConv.attention_decomposition` of every
    selected layer on the inputs that layer receives when :obj:`model` runs
    on ``(x, edge_index)`` in evaluation mode (without dropout), keyed by
    layer name.  The model's training mode and the random generators'
    states are restored afterwards, so calling this between epochs does not
    change a training run."""
    layers = attention_layers(model, layer)
    inputs = _capture_inputs(model, layers, x, edge_index, **forward_kwargs)
    out = {}
    for name, module in layers:
        was_training = module.training
        module.eval()
        try:
            out[name] = module.attention_decomposition(**inputs[name])
        finally:
            module.train(was_training)
    return out


def weighting_layers(model: torch.nn.Module) -> List[Tuple[str, Any]]:
    r"""The layers of :obj:`model` that return attention weights as
    GATConv does (``return_attention_weights=True``): PyG's GATConv and
    every ikgat layer (and PyG's TransformerConv, which the transformer
    layers extend), as ``(name, layer)`` pairs in module order."""
    from torch_geometric.nn import GATConv, TransformerConv

    from ikgat.nn.conv.gat_base import GATConvBase
    return [(name, module) for name, module in model.named_modules()
            if isinstance(module, (GATConvBase, GATConv, TransformerConv))]


@torch.no_grad()
def attention_weights(model: torch.nn.Module, x: Any, edge_index: Any,
                      layer: LayerSelector = None, **forward_kwargs: Any
                      ) -> Tuple[str, Tensor, Tensor]:
    r"""The attention weights :math:`(E, H)` of one layer of :obj:`model`
    (a submodule name or the module; the first of :func:`weighting_layers`
    by default)
    on the inputs it receives when the model runs on ``(x, edge_index)`` in
    evaluation mode, with the layer's name and the edges they weigh
    (self-loops included).  Any layer that returns attention weights as
    GATConv does: GATConv, :class:`~ikgat.IKGATConv`,
    :class:`~ikgat.MIKANConv`, KEPGATConv, TransformerConv,
    :class:`~ikgat.IKTransformerConv`, :class:`~ikgat.MIKANTransformerConv`
    (which attend over the given edges, without self-loops)."""
    layers = dict(weighting_layers(model))
    if not layers:
        raise ValueError(f'{type(model).__name__} has no layer that returns '
                         f'attention weights (GATConv or an ikgat layer)')
    if isinstance(layer, torch.nn.Module):
        layer = next((name for name, module in layers.items()
                      if module is layer), repr(layer))
    name = next(iter(layers)) if layer is None else layer
    if name not in layers:
        raise ValueError(f"{type(model).__name__} has no attention layer "
                         f"{name!r}; its attention layers are "
                         f"{list(layers)}")
    module = layers[name]
    inputs = _capture_inputs(model, [(name, module)], x, edge_index,
                             **forward_kwargs)[name]
    was_training = module.training
    module.eval()
    try:
        _, (edges, alpha) = module(**inputs, return_attention_weights=True)
    finally:
        module.train(was_training)
    return name, alpha, edges
