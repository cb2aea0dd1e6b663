r"""The per-node random Fourier feature tables of
:mod:`ikgat.nn.pair_tables` in Triton: one pass forward, two backward,
the number of launches independent of the number of nodes.

For vectors :math:`x` :math:`(N, H, D)` and stacked spectral point sets
:math:`W` :math:`(m, H, R, D)`, with angles :math:`a_{s,n,h,r} =
W_{s,h,r}^\top x_{n,h}`,

.. math::
    \phi(x)_{n,h} = \Big[\sum_s \cos a_{s,n,h};\, \sum_s \sin
    a_{s,n,h}\Big], \qquad
    \frac{\partial L}{\partial a_s} = \cos a_s \odot g_s - \sin a_s \odot
    g_c,

.. math::
    \frac{\partial L}{\partial x_{n,h}} = \sum_{s,r} \frac{\partial
    L}{\partial a_{s,n,h,r}}\, W_{s,h,r}, \qquad
    \frac{\partial L}{\partial W_{s,h,r}} = \sum_n \frac{\partial
    L}{\partial a_{s,n,h,r}}\, x_{n,h}

for the table's gradient :math:`g = [g_c; g_s]` :math:`(N, H, 2R)`.

**Kernels**, one head per program along the second grid axis, tiles of
:math:`B_N \times B_R` angles from one product of a nodes x channels and a
channels x points tile (``tl.dot`` in IEEE float32, not TF32), and their
sines and cosines from one range reduction (the steps of
:mod:`ikgat.kernels.triton_fourier`,
:func:`~ikgat.kernels.triton_fourier.point_steps`); the contractions of
the backward pass are products of tiles too (a first version formed
them one channel at a time with a reduction each, and was slower than
the passes it replaced):

* :func:`tables`: per block of nodes, each block of :math:`B_R` columns
  summed over the :math:`m` sets in registers and written once: the
  table, :math:`2NHR` floats, is all that is stored;
* :func:`tables_backward`: per block of nodes, :math:`\partial
  L/\partial x` over all :math:`mR` points, written once; and per group
  of node blocks and block of points, partial sums of :math:`\partial
  L/\partial W` (at most :data:`~ikgat.kernels.triton_fourier.MAX_PARTIALS`
  programs per head and block of points, one reduction after:
  deterministic, no atomics).  Both recompute the angles: nothing of size
  :math:`N \times H \times mR` besides the table's gradient is read or
  written.

They replace, on CUDA, the angle products in cuBLAS and the compiled
trigonometry around them, which passed over :math:`N \times H \times mR`
arrays about six times a side (``benchmarks/results/cuda-2026-11-27-h100``:
4.7 ms a side, forward and backward, at arxiv size on an H100).  All
arithmetic is float32; every launch compiles for sm_80 and sm_90 within
128 registers without spilling (``python -m benchmarks.gpu_compile``).  On
CPU tensors the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``,
for tests).
"""
from __future__ import annotations  # keeps 'tl.constexpr' a string

from typing import Dict, Tuple

import torch
from torch import Tensor

from ikgat.kernels.triton_fourier import (
    MAX_PARTIALS,
    next_power_of_2,
    point_steps,
)
from ikgat.kernels.triton_runtime import launch

#: The switch that avoids these kernels (the points kernels of the fused
#: attention), named when Triton cannot build them.
SWITCH = 'ikgat.nn.pair_tables.ENABLED = False'

# Filled by _kernels() on first use; the kernel bodies read them as module
# globals when Triton compiles (or interprets) them.
triton = None
tl = None
_point_rows = None
_sincos = None
_KERNELS: Dict[str, object] = {}

#: The widest vectors (channels a head) the kernels take: every launch up
#: to it compiles within 128 registers without spilling
#: (``benchmarks.gpu_compile``).  Wider ones spill in the backward
#: pass's product over nodes (``tl.dot`` keeps a 16-node slice of every
#: output column's operand per thread: 2.2 KB at 256 channels on sm_90,
#: 0.4 KB at 128 with 16 warps), and :mod:`ikgat.nn.pair_tables` takes its
#: compiled passes for them instead.
MAX_WIDTH = 64


def block_sizes(width: int) -> Tuple[int, int, int, int]:
    r""":math:`(B_N, B_R, B_D, \text{warps})`: all channels in one block
    of at least 16 (``tl.dot``'s smallest), 16 points, 32 nodes up to 16
    channels and 16 above; 4 warps up to 32 channels, 8 above."""
    block_d = max(16, next_power_of_2(width))
    return (32 if block_d <= 16 else 16), 16, block_d, \
        (4 if block_d <= 32 else 8)


def _angle_gradient(grad, sin, cos, offs_n, mask_n, offs_r, mask_k, h, H,
                    R):
    # dL/da = cos a * g_s - sin a * g_c, [B_N, B_R]; 0 on masked nodes and
    # points (whose angles are 0, not their gradients).
    row = grad + (offs_n[:, None] * H + h) * 2 * R + offs_r[None, :]
    mask = mask_n[:, None] & mask_k[None, :]
    grad_cos = tl.load(row, mask=mask, other=0.)
    grad_sin = tl.load(row + R, mask=mask, other=0.)
    return cos * grad_sin - sin * grad_cos


def _node_tile(x, offs_n, mask_n, offs_d, h, H, D):
    # x [B_N, B_D] of head h (0 beyond D and N).
    return tl.load(x + (offs_n[:, None] * H + h) * D + offs_d[None, :],
                   mask=mask_n[:, None] & (offs_d < D)[None, :], other=0.)


def _point_tile(points, rows, mask_k, offs_d, D):
    # W [B_R, B_D] at the given rows of the stacked sets (0 off the masks).
    return tl.load(points + rows[:, None] * D + offs_d[None, :],
                   mask=mask_k[:, None] & (offs_d < D)[None, :], other=0.)


def _angle_tile(x_tile, w_tile):
    # a [B_N, B_R] = x W^T in float32 (IEEE products, not TF32's).
    return tl.dot(x_tile, tl.trans(w_tile), input_precision='ieee')


def _tables_body(x, points, out, N, H, D, R, MR, BLOCK_N: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    h = tl.program_id(1).to(tl.int64)
    offs_n = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_n = offs_n < N
    x_tile = _node_tile(x, offs_n, mask_n, offs_d, h, H, D)
    for first in range(0, R, BLOCK_R):
        offs_r = first + tl.arange(0, BLOCK_R)
        mask_r = offs_r < R
        acc_cos = tl.zeros([BLOCK_N, BLOCK_R], dtype=tl.float32)
        acc_sin = tl.zeros([BLOCK_N, BLOCK_R], dtype=tl.float32)
        for set_start in range(0, MR, R):  # row k = s R + r of set s
            rows = _point_rows(set_start + offs_r, h, H, R)
            w_tile = _point_tile(points, rows, mask_r, offs_d, D)
            sin, cos = _sincos(_angle_tile(x_tile, w_tile))
            acc_cos += cos
            acc_sin += sin
        row = out + (offs_n[:, None] * H + h) * 2 * R + offs_r[None, :]
        mask = mask_n[:, None] & mask_r[None, :]
        tl.store(row, acc_cos, mask=mask)
        tl.store(row + R, acc_sin, mask=mask)


def _grad_x_body(grad, x, points, grad_x, N, H, D, R, MR,
                 BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
                 BLOCK_D: tl.constexpr):
    h = tl.program_id(1).to(tl.int64)
    offs_n = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    mask_n = offs_n < N
    x_tile = _node_tile(x, offs_n, mask_n, offs_d, h, H, D)
    acc = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    for first in range(0, MR, BLOCK_R):
        offs_k = first + tl.arange(0, BLOCK_R)
        mask_k = offs_k < MR
        w_tile = _point_tile(points, _point_rows(offs_k, h, H, R), mask_k,
                             offs_d, D)
        sin, cos = _sincos(_angle_tile(x_tile, w_tile))
        d = _angle_gradient(grad, sin, cos, offs_n, mask_n, offs_k % R,
                            mask_k, h, H, R)
        # dL/dx_n = sum_k d_n,k w_k:
        acc += tl.dot(d, w_tile, input_precision='ieee')
    tl.store(grad_x + (offs_n[:, None] * H + h) * D + offs_d[None, :], acc,
             mask=mask_n[:, None] & (offs_d < D)[None, :])


def _grad_points_body(grad, x, points, partial, N, H, D, R, MR,
                      NODES_PER_PROGRAM, BLOCK_N: tl.constexpr,
                      BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    program = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    offs_k = tl.program_id(2).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_d = tl.arange(0, BLOCK_D)
    mask_k = offs_k < MR
    rows = _point_rows(offs_k, h, H, R)
    w_tile = _point_tile(points, rows, mask_k, offs_d, D)
    acc = tl.zeros([BLOCK_R, BLOCK_D], dtype=tl.float32)
    start = program * NODES_PER_PROGRAM
    for first in range(start, start + NODES_PER_PROGRAM, BLOCK_N):
        offs_n = first + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        x_tile = _node_tile(x, offs_n, mask_n, offs_d, h, H, D)
        sin, cos = _sincos(_angle_tile(x_tile, w_tile))
        d = _angle_gradient(grad, sin, cos, offs_n, mask_n, offs_k % R,
                            mask_k, h, H, R)
        # dL/dw_k = sum_n d_n,k x_n:
        acc += tl.dot(tl.trans(d), x_tile, input_precision='ieee')
    # This program's partial sums at the rows of its block of points, in a
    # (P, m, H, R, D) buffer:
    tl.store(partial + program * MR * H * D + rows[:, None] * D
             + offs_d[None, :], acc,
             mask=mask_k[:, None] & (offs_d < D)[None, :])


def _kernels() -> Dict[str, object]:
    r"""The jitted kernels by name (Triton is imported and the kernels are
    jitted on the first call)."""
    global triton, tl, _point_rows, _sincos
    global _angle_gradient, _node_tile, _point_tile, _angle_tile
    if not _KERNELS:
        try:
            import triton as triton_module
            import triton.language as tl_module
        except ImportError as error:
            raise ImportError(
                "The Triton feature tables need Triton; install it with "
                "'pip install triton' (or ikgat[test])") from error
        triton, tl = triton_module, tl_module
        _point_rows, _sincos = point_steps()
        _angle_gradient = triton.jit(_angle_gradient)
        _node_tile = triton.jit(_node_tile)
        _point_tile = triton.jit(_point_tile)
        _angle_tile = triton.jit(_angle_tile)
        _KERNELS.update(tables=triton.jit(_tables_body),
                        grad_x=triton.jit(_grad_x_body),
                        grad_points=triton.jit(_grad_points_body))
    return _KERNELS


def _check_width(x: Tensor) -> Tuple[int, int, int]:
    if x.size(2) > MAX_WIDTH:
        raise ValueError(f"triton_pair_tables: vectors of {x.size(2)} "
                         f"channels a head, more than MAX_WIDTH = "
                         f"{MAX_WIDTH}; make their tables with "
                         f"ikgat.nn.pair_tables.node_tables")
    return tuple(x.shape)


def tables(x: Tensor, points: Tensor) -> Tensor:
    r""":math:`\phi(x)`, :math:`(N, H, 2R)`, of contiguous float32
    :math:`x` :math:`(N, H, D)` against the stacked sets :math:`W`
    :math:`(m, H, R, D)` (see the module docstring), :math:`D \le`
    :data:`MAX_WIDTH`."""
    num_nodes, heads, width = _check_width(x)
    num_sets, num_points = points.size(0), points.size(2)
    out = x.new_empty(num_nodes, heads, 2 * num_points)
    if out.numel() > 0:
        block_n, block_r, block_d, warps = block_sizes(width)
        launch(_kernels()['tables'], (triton.cdiv(num_nodes, block_n), heads),
               x, points, out, num_nodes, heads, width, num_points,
               num_sets * num_points, BLOCK_N=block_n, BLOCK_R=block_r,
               BLOCK_D=block_d, num_warps=warps, switch=SWITCH)
    return out


def tables_backward(grad: Tensor, x: Tensor, points: Tensor,
                    need_x: bool = True, need_points: bool = True
                    ) -> Tuple[Tensor, Tensor]:
    r""":math:`(\partial L/\partial x, \partial L/\partial W)` from the
    contiguous float32 gradient :obj:`grad` :math:`(N, H, 2R)` of
    :func:`tables`, the angles recomputed from :obj:`x` and
    :obj:`points`; a gradient not needed (:obj:`need_x`,
    :obj:`need_points`) is not launched and comes back empty."""
    num_nodes, heads, width = _check_width(x)
    num_sets, num_points = points.size(0), points.size(2)
    num_angles = num_sets * num_points
    block_n, block_r, block_d, warps = block_sizes(width)
    grad_x = torch.zeros_like(x) if need_x else x.new_empty(0)
    node_blocks = -(-num_nodes // block_n)
    # Node blocks per program: at most MAX_PARTIALS programs per head and
    # block of points (shapes only: no host synchronisation).
    blocks_per_program = max(1, -(-node_blocks // MAX_PARTIALS))
    num_programs = max(1, -(-node_blocks // blocks_per_program))
    partial = x.new_zeros(num_programs if need_points else 0, *points.shape)
    grad_points = points.new_empty(0)
    if num_nodes == 0 or num_angles == 0 or heads == 0 or width == 0:
        return grad_x, partial.sum(0) if need_points else grad_points
    jitted = _kernels()
    sizes = (num_nodes, heads, width, num_points, num_angles)
    if need_x:
        launch(jitted['grad_x'], (node_blocks, heads), grad, x, points,
               grad_x, *sizes, BLOCK_N=block_n, BLOCK_R=block_r,
               BLOCK_D=block_d, num_warps=warps, switch=SWITCH)
    if need_points:
        launch(jitted['grad_points'], (num_programs, heads,
                                       triton.cdiv(num_angles, block_r)),
               grad, x, points, partial, *sizes,
               blocks_per_program * block_n, BLOCK_N=block_n,
               BLOCK_R=block_r, BLOCK_D=block_d, num_warps=warps,
               switch=SWITCH)
        grad_points = partial.sum(0)
    return grad_x, grad_points
