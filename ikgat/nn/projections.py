r"""Several linear maps of one input as one matrix product.

A graph transformer projects the same node features several times
(queries and skip connection from the targets, keys and values from the
sources): :math:`y_k = x W_k^\top + b_k`.  Stacking the maps,

.. math::
    [y_1 \,\|\, \dots \,\|\, y_K] = x\,[W_1; \dots; W_K]^\top +
    [b_1 \,\|\, \dots \,\|\, b_K],

reads :math:`x` once in the forward pass and makes its gradient one
product instead of :math:`K` products and :math:`K - 1` sums in the
backward pass.  The parameters stay the layers' own (their gradients flow
through the concatenation), so optimisers, :meth:`state_dict` and DDP see
no difference.
"""
from typing import List, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parameter import Parameter
from torch.nn.utils import parametrize
from torch_geometric.nn.dense.linear import Linear

#: The classes whose forward pass is exactly ``F.linear(x, weight, bias)``.
PLAIN_LINEAR_CLASSES = (Linear, torch.nn.Linear)


def is_plain_linear(module: torch.nn.Module) -> bool:
    r"""Whether :obj:`module` computes ``F.linear(x, module.weight,
    module.bias)`` and nothing else: a :class:`torch_geometric.nn.Linear`
    or :class:`torch.nn.Linear` itself (not a subclass, no
    :meth:`forward` set on the layer), whose weight and bias are plain
    :class:`~torch.nn.Parameter` objects (initialised, not a tensor
    subclass such as a quantised weight), without parametrisations and
    without hooks of its own (global module hooks are checked by
    :func:`project_together`)."""
    return (type(module) in PLAIN_LINEAR_CLASSES
            and 'forward' not in module.__dict__
            and type(module.weight) is Parameter
            and (module.bias is None or type(module.bias) is Parameter)
            and not parametrize.is_parametrized(module)
            and not module._forward_pre_hooks and not module._forward_hooks
            and not module._backward_pre_hooks
            and not module._backward_hooks)


def _global_module_hooks() -> bool:
    modules = torch.nn.modules.module
    return any(map(bool, (modules._global_forward_pre_hooks,
                          modules._global_forward_hooks,
                          modules._global_backward_pre_hooks,
                          modules._global_backward_hooks)))


def project_together(x: Tensor,
                     maps: Sequence[torch.nn.Module]) -> List[Tensor]:
    r"""Return :obj:`[m(x) for m in maps]`, as one product where every map
    is a plain linear layer (:func:`is_plain_linear`), all with a bias or
    none, their weights of one dtype and device, and no global module hook
    is registered; else each map is called, so that hooks, lazy
    initialisation, parametrisations and subclasses behave as they
    would.  Each output is a tensor of its own (not a view of the joint
    product, which would keep all of them alive for as long as autograd
    keeps one)."""
    if len(maps) < 2 or _global_module_hooks() or not all(
            map(is_plain_linear, maps)):
        return [module(x) for module in maps]
    with_bias = [module.bias is not None for module in maps]
    kinds = {(module.weight.dtype, module.weight.device) for module in maps}
    if any(with_bias) != all(with_bias) or len(kinds) > 1:
        return [module(x) for module in maps]
    weight = torch.cat([module.weight for module in maps])
    bias = (torch.cat([module.bias for module in maps]) if with_bias[0]
            else None)
    out = F.linear(x, weight, bias)
    return [part.contiguous() for part in out.split(
        [module.weight.size(0) for module in maps], dim=-1)]
