r"""The node-wise random-feature estimate in Triton: one pass per direction,
the number of launches independent of the number of nodes.

The formulas are those of :mod:`ikgat.ops.node_terms` (module
docstring there): from node projections :math:`x` :math:`(N, H, C)`, the
node-side spectral points :math:`u` :math:`(H, mR, C)` and the anchor
features tiled over the sets, :math:`A^c, A^s` :math:`(H, T, mR)`,

.. math::
    f_{n,t} = \kappa \sum_{k=1}^{mR} \cos\theta_{n,k}\, A^c_{t,k}
    + \sin\theta_{n,k}\, A^s_{t,k}, \qquad \theta_{n,k} = u_k^\top x_n,

(:math:`\kappa = 1/(m^2 R)`), the kernels write :math:`\ell = \log(f^2 +
\epsilon)` and :math:`f`; and, with :math:`G = \kappa\, \partial
L/\partial \ell \cdot 2f / (f^2 + \epsilon)` (formed where the gradient
is loaded) and
:math:`D_{n,k} = \cos\theta_{n,k} \sum_t G_{n,t} A^s_{t,k}
- \sin\theta_{n,k} \sum_t G_{n,t} A^c_{t,k}`,

.. math::
    \frac{\partial L}{\partial x_n} = \sum_k D_{n,k}\, u_k, \quad
    \frac{\partial L}{\partial u_k} = \sum_n D_{n,k}\, x_n, \quad
    \frac{\partial L}{\partial A^c_{t,k}} = \sum_n G_{n,t}\cos\theta_{n,k},
    \quad
    \frac{\partial L}{\partial A^s_{t,k}} = \sum_n G_{n,t}\sin\theta_{n,k}.

**Kernels** (one head per program along the second grid axis):

* :func:`estimate`: one program per block of :math:`B_N` nodes walks the
  :math:`mR` spectral points in blocks of :math:`B_R`, forms the
  :math:`B_N \times B_R` angles one channel at a time (an outer product
  per channel, :data:`C_STEP` channels unrolled a step: no nodes x points
  x channels tile, which at 8 channels filled the register file), takes
  their sine and cosine from one range reduction and two polynomials
  (:func:`sincos_step`), and keeps each angle's terms of :math:`f`, for
  every slope, apart in registers until the walk ends, when one sum over
  the points (across threads) makes :math:`f`: :math:`N H T` floats are
  written, nothing else.
* backward, two launches that both recompute the angles and store nothing
  of size :math:`N \times H \times R`:

  1. per block of nodes, :math:`\partial L/\partial x` summed over all
     spectral points in registers (the contraction with :math:`u` one
     channel at a time, too) and written once;
  2. per group of node blocks and block of spectral points, the sums over
     nodes of :math:`\partial L/\partial u` and
     :math:`\partial L/\partial A^{c,s}` kept in registers; each program
     writes its partial sums, and one reduction over at most
     :data:`MAX_PARTIALS` programs finishes them (deterministic, no
     atomics).

  They keep their loops over channels one channel a trip and their sums a
  step at a time: terms kept apart over the walk, as the forward kernel
  keeps them, took nodes x points x channels accumulators, which Triton
  3.6 spilled (0.3-1.3 kB a thread), and loops unrolled :data:`C_STEP`
  channels a trip spilled 8-208 bytes (sm_80 and sm_90,
  ``benchmarks.gpu_compile``).

The tiles are :data:`TILE_ANGLES` angles (16 points above 32 channels):
every launch stays within 128 registers without spilling, for sm_80 and
sm_90 (``python -m benchmarks.gpu_compile``).  All arithmetic is float32.
Triton is imported on first use; on CPU tensors the kernels run in Triton's
interpreter (``TRITON_INTERPRET=1``, for tests).
"""
from __future__ import annotations  # keeps 'tl.constexpr' a string

from typing import Tuple

import torch
from torch import Tensor

from ikgat.ops.runtime import (
    NODE_TERMS_SWITCH,
    TritonConstant,
    launch,
    lazy_jit,
    next_power_of_2,
)

triton = None
tl = None

#: Upper bound on the angles of one nodes x points tile (:math:`B_N B_R`).
TILE_ANGLES = 512
#: Channels per unrolled trip of the forward kernel's loop over :math:`c`
#: (``tl.static_range``, masked past :math:`C`), so that a trip's loads
#: issue together.  One channel a trip, the loop's control and address
#: arithmetic cost the forward kernel more instructions than its angles'
#: arithmetic; with its per-block sums across threads gone too, it issues
#: 1,985 warp-instructions a program instead of 3,244 (SASS, Triton 3.6,
#: sm_90, 16 nodes x 32 points, 8 channels, mR = 128).
C_STEP = 8
_C_STEP = TritonConstant(C_STEP)
#: At most this many programs per head and block of spectral points write
#: partial sums of the spectral-point gradients (their buffer does not grow
#: with :math:`N`).
MAX_PARTIALS = 256


@lazy_jit
def _point_rows(offs_k, h, H, R):
    # Row k = s R + r of the node-side points u is w_{s,r}, stored at
    # ((s H + h) R + r) 2C of the stacked (m, H, R, 2C) sets.
    return ((offs_k // R) * H + h) * R + offs_k % R


@lazy_jit
def sincos_step(theta):
    # sin and cos of float32 angles with one range reduction, in plain
    # arithmetic (the same values in the compiler and the interpreter):
    # theta = j pi/2 + r, |r| <= pi/4, pi/2 split in three parts whose
    # products with j are exact for |j| < 2^15 (Cody and Waite); then
    # Cephes' minimax polynomials of sinf and cosf on [-pi/4, pi/4]
    # (about 1e-7 absolute error), rotated by the quadrant j mod 4.
    # libdevice's precise sinf/cosf keep a slow path for |theta| > 1e5
    # whose local array is a spill under ptxas.
    j = tl.floor(theta * 0.6366197723675814 + 0.5)
    r = theta - j * 1.5703125
    r = r - j * 4.837512969970703125e-4
    r = r - j * 7.549789948768648e-8
    r2 = r * r
    sin_r = r + r * r2 * (-1.6666654611e-1 + r2 * (
        8.3321608736e-3 + r2 * -1.9515295891e-4))
    cos_r = 1. - 0.5 * r2 + r2 * r2 * (4.166664568298827e-2 + r2 * (
        -1.388731625493765e-3 + r2 * 2.443315711809948e-5))
    quadrant = j.to(tl.int32) & 3
    swap = (quadrant & 1) == 1
    sin = tl.where(swap, cos_r, sin_r)
    cos = tl.where(swap, sin_r, cos_r)
    sin = tl.where(quadrant >= 2, -sin, sin)
    cos = tl.where((quadrant == 1) | (quadrant == 2), -cos, cos)
    return sin, cos


@lazy_jit
def _angles(x, points, offs_n, mask_n, rows, mask_k, h, H, C, OFFSET,
            BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
            STEP: tl.constexpr):
    # theta [B_N, B_R] = x_n . u_k, an outer product per channel (no nodes
    # x points x channels tile in registers), STEP channels unrolled a trip
    # (one: a plain loop); u is the half of w at columns OFFSET..OFFSET+C.
    angle = tl.zeros([BLOCK_N, BLOCK_R], tl.float32)
    x_row = x + offs_n * H * C + h * C
    u_row = points + rows * 2 * C + OFFSET
    if STEP == 1:
        for c in range(C):
            x_c = tl.load(x_row + c, mask=mask_n, other=0.)
            u_c = tl.load(u_row + c, mask=mask_k, other=0.)
            angle += x_c[:, None] * u_c[None, :]
    else:
        for first in range(0, C, STEP):
            for step in tl.static_range(STEP):
                c = first + step
                in_c = (tl.zeros([1], dtype=tl.int32) + c) < C
                x_c = tl.load(x_row + c, mask=mask_n & in_c, other=0.)
                u_c = tl.load(u_row + c, mask=mask_k & in_c, other=0.)
                angle += x_c[:, None] * u_c[None, :]
    return angle


@lazy_jit
def _anchor_tiles(cos_weight, sin_weight, h, offs_k, mask_k, offs_t, mask_t,
                  T, R):
    # The [B_R, B_T] tiles of A^c and A^s (H, T, R each) for rows k of u, at
    # r = k mod R:
    offsets = (h * T + offs_t[None, :]) * R + offs_k[:, None] % R
    mask = mask_k[:, None] & mask_t[None, :]
    return (tl.load(cos_weight + offsets, mask=mask, other=0.),
            tl.load(sin_weight + offsets, mask=mask, other=0.))


@lazy_jit
def estimate_kernel(x, points, cos_weight, sin_weight, out, estimate, eps,
                    scale, N, H, C, R, MR, T, OFFSET,
                    BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
                    BLOCK_T: tl.constexpr):
    h = tl.program_id(1).to(tl.int64)
    offs_n = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_t = tl.arange(0, BLOCK_T)
    mask_n, mask_t = offs_n < N, offs_t < T
    # Each angle's terms, summed over the points once, after the loop:
    acc = tl.zeros([BLOCK_N, BLOCK_R, BLOCK_T], dtype=tl.float32)
    for first in range(0, MR, BLOCK_R):
        offs_k = first + tl.arange(0, BLOCK_R)
        mask_k = offs_k < MR
        angle = _angles(x, points, offs_n, mask_n,
                        _point_rows(offs_k, h, H, R), mask_k, h, H, C,
                        OFFSET, BLOCK_N, BLOCK_R, _C_STEP)
        sin, cos = sincos_step(angle)
        cos_w, sin_w = _anchor_tiles(cos_weight, sin_weight, h, offs_k,
                                     mask_k, offs_t, mask_t, T, R)
        # Masked points have u = 0 (cos = 1) but zero anchor weights:
        acc += (cos[:, :, None] * cos_w[None, :, :]
                + sin[:, :, None] * sin_w[None, :, :])
    offs_nt = offs_n[:, None] * H * T + h * T + offs_t[None, :]
    mask_nt = mask_n[:, None] & mask_t[None, :]
    f = tl.sum(acc, axis=1) * scale
    tl.store(estimate + offs_nt, f, mask=mask_nt)
    tl.store(out + offs_nt, tl.log(f * f + eps), mask=mask_nt)


@lazy_jit
def _grad_estimate(grad, estimate, offs_n, mask_n, offs_t, mask_t, h, H, T,
                   eps, scale):
    # G = kappa dL/dl * 2f / (f^2 + eps), [B_N, B_T] (0 on masked rows).
    # tl.fdiv: a division without the IEEE-rounded slow path, whose
    # subroutine call spills under ptxas (2 ulp, as CUDA's fast division).
    offs = offs_n[:, None] * H * T + h * T + offs_t[None, :]
    mask = mask_n[:, None] & mask_t[None, :]
    f = tl.load(estimate + offs, mask=mask, other=0.)
    return tl.fdiv(tl.load(grad + offs, mask=mask, other=0.) * (2. * scale)
                   * f, f * f + eps)


@lazy_jit
def _grad_angle(sin, cos, grad_tile, cos_w, sin_w):
    # D = cos(theta) sum_t G_t A^s_t - sin(theta) sum_t G_t A^c_t, [B_N, B_R]
    u_sum = tl.sum(grad_tile[:, None, :] * cos_w[None, :, :], axis=2)
    v_sum = tl.sum(grad_tile[:, None, :] * sin_w[None, :, :], axis=2)
    return cos * v_sum - sin * u_sum


@lazy_jit
def grad_x_kernel(x, points, cos_weight, sin_weight, grad, estimate, eps,
                  scale, grad_x, N, H, C, R, MR, T, OFFSET,
                  BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
                  BLOCK_C: tl.constexpr, BLOCK_T: tl.constexpr):
    h = tl.program_id(1).to(tl.int64)
    offs_n = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_c = tl.arange(0, BLOCK_C)
    offs_t = tl.arange(0, BLOCK_T)
    mask_n, mask_c, mask_t = offs_n < N, offs_c < C, offs_t < T
    grad_tile = _grad_estimate(grad, estimate, offs_n, mask_n, offs_t, mask_t,
                               h, H, T, eps, scale)
    acc = tl.zeros([BLOCK_N, BLOCK_C], dtype=tl.float32)
    for first in range(0, MR, BLOCK_R):
        offs_k = first + tl.arange(0, BLOCK_R)
        mask_k = offs_k < MR
        rows = _point_rows(offs_k, h, H, R)
        angle = _angles(x, points, offs_n, mask_n, rows, mask_k, h, H, C,
                        OFFSET, BLOCK_N, BLOCK_R, 1)
        sin, cos = sincos_step(angle)
        cos_w, sin_w = _anchor_tiles(cos_weight, sin_weight, h, offs_k,
                                     mask_k, offs_t, mask_t, T, R)
        d = _grad_angle(sin, cos, grad_tile, cos_w, sin_w)  # 0 off the mask
        # dL/dx_n,c = sum_k D_n,k u_k,c, one channel at a time, placed in
        # column c of the accumulator:
        u_row = points + rows * 2 * C + OFFSET
        for c in range(C):
            u_c = tl.load(u_row + c, mask=mask_k, other=0.)
            column = tl.sum(d * u_c[None, :], axis=1)
            acc += tl.where(offs_c[None, :] == c, column[:, None], 0.)
    tl.store(grad_x + offs_n[:, None] * H * C + h * C + offs_c[None, :], acc,
             mask=mask_n[:, None] & mask_c[None, :])


@lazy_jit
def grad_points_kernel(x, points, cos_weight, sin_weight, grad, estimate, eps,
                       scale, partial_points, partial_cos, partial_sin, N, H,
                       C, R, MR, T, OFFSET, NODES_PER_PROGRAM,
                       BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
                       BLOCK_C: tl.constexpr, BLOCK_T: tl.constexpr):
    program = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    offs_k = tl.program_id(2).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_c = tl.arange(0, BLOCK_C)
    offs_t = tl.arange(0, BLOCK_T)
    mask_k, mask_c, mask_t = offs_k < MR, offs_c < C, offs_t < T
    rows = _point_rows(offs_k, h, H, R)
    cos_w, sin_w = _anchor_tiles(cos_weight, sin_weight, h, offs_k,
                                 mask_k, offs_t, mask_t, T, R)
    acc_points = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    acc_cos = tl.zeros([BLOCK_R, BLOCK_T], dtype=tl.float32)
    acc_sin = tl.zeros([BLOCK_R, BLOCK_T], dtype=tl.float32)
    start = program * NODES_PER_PROGRAM
    for first in range(start, start + NODES_PER_PROGRAM, BLOCK_N):
        offs_n = first + tl.arange(0, BLOCK_N)
        mask_n = offs_n < N
        # Masked nodes have G = 0, so they add nothing below:
        grad_tile = _grad_estimate(grad, estimate, offs_n, mask_n, offs_t,
                                   mask_t, h, H, T, eps, scale)
        angle = _angles(x, points, offs_n, mask_n, rows, mask_k, h, H, C,
                        OFFSET, BLOCK_N, BLOCK_R, 1)
        sin, cos = sincos_step(angle)
        d = _grad_angle(sin, cos, grad_tile, cos_w, sin_w)
        # dL/du_k,c = sum_n D_n,k x_n,c, one channel at a time:
        x_row = x + offs_n * H * C + h * C
        for c in range(C):
            x_c = tl.load(x_row + c, mask=mask_n, other=0.)
            column = tl.sum(d * x_c[:, None], axis=0)
            acc_points += tl.where(offs_c[None, :] == c, column[:, None], 0.)
        acc_cos += tl.sum(cos[:, :, None] * grad_tile[:, None, :], axis=0)
        acc_sin += tl.sum(sin[:, :, None] * grad_tile[:, None, :], axis=0)
    # Partial sums of dL/dw at the rows k of this block: the node half at
    # OFFSET, zeros in the other half (its gradient comes through A).
    row_ptr = (partial_points + program * MR * H * 2 * C
               + rows[:, None] * 2 * C + offs_c[None, :])
    mask_kc = mask_k[:, None] & mask_c[None, :]
    tl.store(row_ptr + OFFSET, acc_points, mask=mask_kc)
    tl.store(row_ptr + C - OFFSET, tl.zeros([BLOCK_R, BLOCK_C], tl.float32),
             mask=mask_kc)
    offs_kt = ((program * H + h) * T + offs_t[None, :]) * MR + offs_k[:, None]
    mask_kt = mask_k[:, None] & mask_t[None, :]
    tl.store(partial_cos + offs_kt, acc_cos, mask=mask_kt)
    tl.store(partial_sin + offs_kt, acc_sin, mask=mask_kt)


def block_sizes(num_angles: int, channels: int, slopes: int
                ) -> Tuple[int, int, int, int]:
    r""":math:`(B_N, B_R, B_C, B_T)`: a tile of :data:`TILE_ANGLES` nodes
    x points (fewer points when there are fewer), all channels and
    slopes.  The backward accumulators are :math:`B_N \times B_C` and
    :math:`B_R \times B_C`: above 32 channels, blocks of 16 points keep
    them within the register budget (benchmarks.gpu_compile)."""
    block_c = next_power_of_2(channels)
    block_r = min(next_power_of_2(num_angles), 32 if block_c <= 32 else 16)
    block_n = max(1, TILE_ANGLES // block_r)
    return block_n, block_r, block_c, next_power_of_2(slopes)


def estimate(x: Tensor, points: Tensor, cos_weight: Tensor,
             sin_weight: Tensor, is_source: bool, eps: float, scale: float
             ) -> Tuple[Tensor, Tensor]:
    r""":math:`\ell = \log(f^2 + \epsilon)` and :math:`f`, both of shape
    :math:`(N, H, T)`, from contiguous float32
    :math:`x` :math:`(N, H, C)`, the stacked spectral point sets
    :math:`(m, H, R, 2C)` (their node half: the last :math:`C` columns for
    sources, the first for targets) and :math:`A^c, A^s` :math:`(H, T,
    R)`."""
    num_nodes, heads, channels = x.shape
    num_sets, num_points = points.size(0), points.size(2)
    num_slopes = cos_weight.size(1)
    num_angles = num_sets * num_points
    out = x.new_empty(num_nodes, heads, num_slopes)
    estimate = torch.empty_like(out)
    if num_nodes > 0:
        block_n, block_r, _, block_t = block_sizes(num_angles, channels,
                                                   num_slopes)
        launch(estimate_kernel, (-(-num_nodes // block_n), heads),
               x, points, cos_weight, sin_weight, out, estimate, float(eps),
               float(scale), num_nodes, heads, channels, num_points,
               num_angles, num_slopes, channels if is_source else 0,
               BLOCK_N=block_n, BLOCK_R=block_r, BLOCK_T=block_t,
               switch=NODE_TERMS_SWITCH)
    return out, estimate


def estimate_backward(grad: Tensor, x: Tensor, points: Tensor,
                      cos_weight: Tensor, sin_weight: Tensor,
                      estimate: Tensor, eps: float, scale: float,
                      is_source: bool) -> Tuple[Tensor, Tensor, Tensor,
                                                Tensor]:
    r"""The gradients of :func:`estimate`'s :math:`\ell` with respect to
    :math:`x`, the stacked sets (their node half; zeros in the other half,
    whose gradient flows through :math:`A`), :math:`A^c` and :math:`A^s`,
    for the contiguous float32 gradient :obj:`grad` of :math:`\ell` and
    the saved :math:`f`, both :math:`(N, H, T)`."""
    num_nodes, heads, channels = x.shape
    num_sets, num_points = points.size(0), points.size(2)
    num_slopes = cos_weight.size(1)
    num_angles = num_sets * num_points
    block_n, block_r, block_c, block_t = block_sizes(num_angles,
                                                     channels, num_slopes)
    grad_x = torch.empty_like(x)
    node_blocks = -(-num_nodes // block_n)
    # Node blocks per program: at most MAX_PARTIALS programs per head and
    # block of points (shapes only: no host synchronisation).
    blocks_per_program = max(1, -(-node_blocks // MAX_PARTIALS))
    num_programs = max(1, -(-node_blocks // blocks_per_program))
    partial_points = x.new_empty(num_programs, *points.shape)
    partial_cos = x.new_empty(num_programs, heads, num_slopes, num_angles)
    partial_sin = torch.empty_like(partial_cos)
    if num_nodes > 0:
        offset = channels if is_source else 0
        launch(grad_x_kernel, (node_blocks, heads),
               x, points, cos_weight, sin_weight, grad, estimate, float(eps),
               float(scale), grad_x, num_nodes, heads, channels, num_points,
               num_angles, num_slopes, offset, BLOCK_N=block_n,
               BLOCK_R=block_r, BLOCK_C=block_c, BLOCK_T=block_t,
               switch=NODE_TERMS_SWITCH)
        launch(grad_points_kernel, (num_programs, heads,
                                    -(-num_angles // block_r)),
               x, points, cos_weight, sin_weight, grad, estimate, float(eps),
               float(scale), partial_points, partial_cos, partial_sin,
               num_nodes, heads, channels, num_points, num_angles,
               num_slopes, offset, blocks_per_program * block_n,
               BLOCK_N=block_n, BLOCK_R=block_r, BLOCK_C=block_c,
               BLOCK_T=block_t, switch=NODE_TERMS_SWITCH)
    else:
        for partial in (partial_points, partial_cos, partial_sin):
            partial.zero_()

    def per_point(partial: Tensor) -> Tensor:  # [P, H, T, mR] -> [H, T, R]
        return partial.view(num_programs, heads, num_slopes, num_sets,
                            num_points).sum((0, 3))

    return (grad_x, partial_points.sum(0), per_point(partial_cos),
            per_point(partial_sin))
