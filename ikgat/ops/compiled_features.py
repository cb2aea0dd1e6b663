r"""Per-node random Fourier features on CPU as loops that
:func:`torch.compile` fuses, for :mod:`ikgat.ops.edge_fourier`.

For rows :math:`x` (:math:`n \times H_g \times C`) and a head group's
spectral points laid out as :math:`W` (:math:`H_g \times C \times mR`, the
:math:`m` sets side by side), the feature table is

.. math::
    \phi(x) = \Big[\sum_{s=1}^m \cos a_s;\, \sum_{s=1}^m \sin a_s\Big]
    \in \mathbb{R}^{H_g \times n \times 2R}, \qquad a = x W,

and its backward pass, from the gradient :math:`g = [g_c; g_s]` of the
table, recomputes the angles and takes

.. math::
    \frac{\partial \ell}{\partial a_s} = \cos a_s \odot g_s
    - \sin a_s \odot g_c, \qquad
    \frac{\partial \ell}{\partial x} = \frac{\partial \ell}{\partial a}
    W^\top, \qquad
    \frac{\partial \ell}{\partial W} = x^\top
    \frac{\partial \ell}{\partial a}.

Eager PyTorch runs each step as its own pass over memory: the angles, the
cosines, the sines, the sums over the sets (and, in the backward pass, a
cache of the cosines and sines).  Compiled, the angle product stays a
matrix product and everything after it is one loop with vectorised
trigonometry, which writes only the table (or the angles' gradient), and
the backward pass needs no cache of cosines and sines.

The compiled functions are used on CPU for float32 and float64 inputs of
at least :data:`MIN_ANGLES` angles: where compiling pays within a training
run.  A first compilation on a machine without Inductor's cache took 12.4
s; it then saved 31 ms a step of ``IKTransformerConv(kernel='direct')``
(8 heads x 8) on Cora (2.8 M angles a side: 396 steps to repay it, more
than the GAT recipe's runs take) and 127 ms at PubMed size (20 M angles:
91 steps), on one thread of an Intel Xeon
(``benchmarks/results/compile_pays.md``, from ``python -m
benchmarks.compile_pays``).  So Cora-size graphs run eager from their
first step.  They compile once per process and dtype (dynamic
shapes);
if compiling fails (no C++ compiler, for one), a warning says so, and
:data:`ENABLED` is cleared so that the callers' eager path runs from then
on.  Setting :data:`ENABLED` to :obj:`False` switches them off.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from ikgat.ops.compiled import CompiledOrEager

#: Whether the compiled functions may be used at all.
ENABLED = True
#: The fewest angles (:math:`n H_g m R`) for which they are used: 16 M,
#: between Cora's and PubMed's (see the module docstring).
MIN_ANGLES = 1 << 24


def features(x: Tensor, matrix: Tensor, num_points: int) -> Tensor:
    r"""The table :math:`\phi(x)`, :math:`(H_g, n, 2R)`, of rows :obj:`x`
    :math:`(n, H_g, C)` against :obj:`matrix` :math:`(H_g, C, mR)`."""
    angles = torch.bmm(x.transpose(0, 1), matrix)
    sets = angles.unflatten(2, (-1, num_points))
    return torch.cat([sets.cos().sum(2), sets.sin().sum(2)], dim=-1)


def features_backward(grad: Tensor, x: Tensor, matrix: Tensor,
                      num_points: int) -> Tuple[Tensor, Tensor]:
    r"""The gradients of :func:`features` with respect to :obj:`x` and
    :obj:`matrix`, from the table's gradient :obj:`grad` :math:`(H_g, n,
    2R)`."""
    angles = torch.bmm(x.transpose(0, 1), matrix)
    sets = angles.unflatten(2, (-1, num_points))
    grad_cos = grad[..., :num_points].unsqueeze(2)
    grad_sin = grad[..., num_points:].unsqueeze(2)
    grad_angles = (sets.cos() * grad_sin - sets.sin() * grad_cos).flatten(2)
    grad_x = torch.bmm(grad_angles, matrix.transpose(1, 2)).transpose(0, 1)
    return grad_x, torch.bmm(x.permute(1, 2, 0), grad_angles)


def use_compiled(x: Tensor, angles: int,
                 min_angles: Optional[int] = None) -> bool:
    r"""Whether the compiled functions run for rows :obj:`x` and
    :obj:`angles` angles in all: on CPU, float32 or float64, at least
    :obj:`min_angles` angles (by default :data:`MIN_ANGLES`), while
    :data:`ENABLED` and not inside a trace."""
    return (ENABLED and x.device.type == 'cpu'
            and x.dtype in (torch.float32, torch.float64)
            and angles >= (MIN_ANGLES if min_angles is None else min_angles)
            and not torch.compiler.is_compiling())


def _disable() -> None:
    r"""Clear :data:`ENABLED` (after a failed compilation), so that the
    callers' own eager path (row chunks, cached cosines and sines) takes
    over."""
    global ENABLED
    ENABLED = False


_FALLBACK = 'the eager path is used from now on'
#: :func:`features` and :func:`features_backward` compiled.
compiled_features = CompiledOrEager(
    features, 'ikgat: compiling the random-feature tables', _FALLBACK,
    on_failure=_disable)
compiled_features_backward = CompiledOrEager(
    features_backward, "ikgat: compiling the random-feature tables'"
    ' backward', _FALLBACK, on_failure=_disable)
