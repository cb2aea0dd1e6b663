r"""Per-node random Fourier feature tables for the fused transformer
attention on a GPU.

For vectors :math:`x` (:math:`N \times H \times D`: queries or keys) and
stacked spectral point sets :math:`W` (:math:`m \times H \times R \times
D`), the table is

.. math::
    \phi(x)_{n,h} = \Big[\sum_{s=1}^m \cos a_{s,n,h};\,
    \sum_{s=1}^m \sin a_{s,n,h}\Big] \in \mathbb{R}^{2R}, \qquad
    a_{s,n,h} = W_{s,h}\, x_{n,h},

and its backward pass, from the table's gradient :math:`g = [g_c; g_s]`,
recomputes the angles and takes

.. math::
    \frac{\partial L}{\partial a_s} = \cos a_s \odot g_s
    - \sin a_s \odot g_c, \qquad
    \frac{\partial L}{\partial x_{n,h}} = \sum_s W_{s,h}^\top
    \frac{\partial L}{\partial a_{s,n,h}}, \qquad
    \frac{\partial L}{\partial W_{s,h}} = \sum_n
    \frac{\partial L}{\partial a_{s,n,h}}\, x_{n,h}^\top

(the last one product per side,
:func:`~ikgat.ops.fourier_features.angle_product`).  Only :math:`x` and
:math:`W` are saved.  Both directions are registered operators
(``ikgat::node_tables`` and ``ikgat::node_tables_backward``, opaque under
:func:`torch.compile`); on CUDA each is one compiled pass after the angle
product (:class:`~ikgat.ops.compiled.CompiledOrEager`), elsewhere eager
PyTorch.

:class:`~ikgat.IKTransformerConv` gives the gathered-table kernels of
:func:`~ikgat.ops.transformer_attention.fused_transformer_attention` these
tables, :math:`O(N H R)` floats per side, instead of the spectral points
(whose kernels make :math:`\phi` per edge, :math:`O(E H)` memory): on an
H100 at arxiv size a layer step of ``direct`` took 22.0-22.4 ms with
tables against 48.9 ms with points, and 3.2 GB of peak memory against 2.0
GB (``benchmarks/results/archive/cuda-2026-11-27-h100``).  :func:`uses_tables` is the
rule: off the CPU while :data:`ENABLED`.
"""
from typing import Tuple

import torch
from torch import Tensor

from ikgat.ops.compiled import CompiledOrEager
from ikgat.ops.fourier_features import angle_product

#: Whether the layers give the fused attention per-node tables on CUDA
#: (:func:`uses_tables`); :obj:`False` keeps the points kernels, the
#: leanest in memory.
ENABLED = True


def uses_tables(x: Tensor) -> bool:
    r"""Whether the fused attention of vectors :obj:`x` takes the tables of
    :func:`node_tables` instead of spectral points: off the CPU (CUDA, and
    the ``meta`` device standing for it in the launch counts), while
    :data:`ENABLED`."""
    return ENABLED and x.device.type != 'cpu'


def tables(x: Tensor, points: Tensor) -> Tensor:
    r""":math:`\phi(x)`, :math:`(N, H, 2R)`, of :obj:`x` :math:`(N, H, D)`
    against :obj:`points` :math:`(m, H, R, D)`."""
    angles = torch.einsum('nhd,mhrd->nhmr', x, points)
    return torch.cat([angles.cos().sum(2), angles.sin().sum(2)], dim=-1)


def angle_gradient(grad: Tensor, x: Tensor, points: Tensor) -> Tensor:
    r""":math:`\partial L/\partial a`, :math:`(N, H, m, R)`, from the
    table's gradient :obj:`grad` :math:`(N, H, 2R)` (the angles
    recomputed)."""
    num_points = points.size(2)
    angles = torch.einsum('nhd,mhrd->nhmr', x, points)
    grad_cos = grad[..., :num_points].unsqueeze(2)
    grad_sin = grad[..., num_points:].unsqueeze(2)
    return angles.cos() * grad_sin - angles.sin() * grad_cos


_FALLBACK = 'eager PyTorch runs it from now on'
_compiled_tables = CompiledOrEager(
    tables, 'ikgat: compiling the transformer feature tables', _FALLBACK)
_compiled_angle_gradient = CompiledOrEager(
    angle_gradient, "ikgat: compiling the transformer feature tables'"
    ' backward', _FALLBACK)


# Registered operators (opaque under torch.compile, one operation each in
# the launch counts); the compiled functions on CUDA, eager elsewhere.

@torch.library.custom_op('ikgat::node_tables', mutates_args=())
def _tables_op(x: Tensor, points: Tensor) -> Tensor:
    function = _compiled_tables if x.device.type == 'cuda' else tables
    return function(x, points)


@_tables_op.register_fake
def _(x, points):
    return x.new_empty(x.size(0), x.size(1), 2 * points.size(2))


@torch.library.custom_op('ikgat::node_tables_backward', mutates_args=())
def _backward_op(grad: Tensor, x: Tensor, points: Tensor,
                 need_x: bool, need_points: bool) -> Tuple[Tensor, Tensor]:
    function = _compiled_angle_gradient if x.device.type == 'cuda' \
        else angle_gradient
    grad_angles = function(grad.contiguous(), x, points)
    grad_x = torch.einsum('nhmr,mhrd->nhd', grad_angles, points
                          ).contiguous() if need_x else x.new_empty(0)
    grad_points = angle_product(grad_angles, x, x.device.type != 'cpu'
                                ).contiguous() if need_points \
        else points.new_empty(0)
    return grad_x, grad_points


@_backward_op.register_fake
def _(grad, x, points, need_x, need_points):
    return (torch.empty_like(x) if need_x else x.new_empty(0),
            torch.empty_like(points) if need_points else points.new_empty(0))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _autograd_backward(ctx, grad):
    x, points = ctx.saved_tensors
    need_x, need_points = ctx.needs_input_grad
    grad_x, grad_points = _backward_op(grad, x, points, need_x, need_points)
    return (grad_x if need_x else None,
            grad_points if need_points else None)


_tables_op.register_autograd(_autograd_backward, setup_context=_setup_context)


def node_tables(x: Tensor, points: Tensor) -> Tensor:
    r""":math:`\phi(x)`, :math:`(N, H, 2R)`, differentiable in :obj:`x`
    :math:`(N, H, D)` and :obj:`points` :math:`(m, H, R, D)`, saving only
    them (see the module docstring): the registered operator
    ``ikgat::node_tables`` (and its ``_backward``), compiled on CUDA, eager
    elsewhere.  Not twice differentiable."""
    if x.dim() != 3 or points.dim() != 4 or points.shape[1] != x.shape[1] \
            or points.shape[3] != x.shape[2]:
        raise ValueError(f"node_tables: expected x (N, H, D) and points "
                         f"(m, H, R, D) of the same H and D (got "
                         f"{tuple(x.shape)} and {tuple(points.shape)})")
    return _tables_op(x, points)
