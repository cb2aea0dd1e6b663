r"""The Triton kernels of :mod:`ikgat.ops.transformer_attention` on node
tables (its module docstring has the formulas), and their tiling
(:func:`table_tiling`): one program per target and block of heads for the
forward pass (:func:`forward_kernel`) and the queries' gradient
(:func:`backward_dst_kernel`), one per source for the keys', values' and
source terms' gradients (:func:`backward_src_kernel`).  The kernels with
spectral points are :mod:`ikgat.ops.transformer_fourier`'s; the online
softmax, the dropout draw and the steps around them are
:mod:`ikgat.ops.attention_steps`'.  Launched, and jitted on their first
launch (:mod:`ikgat.ops.runtime`), by
:mod:`ikgat.ops.transformer_attention`.
"""
from __future__ import annotations  # keeps 'tl.constexpr' a string

from ikgat.ops.attention_steps import (
    ROW_ELEMENTS,
    aggregate_step,
    finish_step,
    gather_rows_step,
    link_step,
    logit_gradient_step,
    node_program_step,
    node_row_step,
    softmax_weight_step,
    statistics_step,
    tiling,
)
from ikgat.ops.runtime import lazy_jit

triton = None
tl = None


# ---------------------------------------------------------------------------
# Kernel bodies (jitted on their first launch: ikgat.ops.runtime).  Tensors
# are contiguous: tables (N, H, D), source terms (N_s, H), values (N_s, H, C).


@lazy_jit
def forward_kernel(u, v, s, values, rowptr, src, out, row_max, row_den, seed,
                   scale, eps, dropout, keep_scale, H, D, C,
                   LOG_SQUARE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                   BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_C: tl.constexpr):
    # One program per target i and block of heads: each in-edge gathers
    # one contiguous row of B_H x D table floats and B_H x C values.
    i, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        rowptr, H, C, BLOCK_H, BLOCK_C)
    offs_e = tl.arange(0, BLOCK_E)
    offs_d = tl.arange(0, BLOCK_D)
    mask_hd = mask_h[:, None] & (offs_d < D)[None, :]
    u_i = node_row_step(u, i, offs_h, offs_d, H, D, mask_hd)  # [B_H, B_D]
    running_max = tl.full([BLOCK_H], float('-inf'), tl.float32)
    running_sum = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        e = first + offs_e
        mask_e = e < stop
        j = tl.load(src + e, mask=mask_e, other=0).to(tl.int64)
        row = j[:, None] * H + offs_h[None, :]  # [B_E, B_H]
        mask_eh = mask_e[:, None] & mask_h[None, :]
        v_j = gather_rows_step(v, row, offs_d, D, mask_e, mask_hd)
        t = scale * tl.sum(v_j * u_i[None, :, :], axis=2)  # [B_E, B_H]
        logit, _ = link_step(t, eps, LOG_SQUARE)
        logit += tl.load(s + row, mask=mask_eh, other=0.).to(tl.float32)
        logit = tl.where(mask_e[:, None], logit, float('-inf'))
        # Online softmax per head (ikgat.ops.attention_steps):
        running_max, running_sum, acc = aggregate_step(
            running_max, running_sum, acc, logit, values, row, offs_c, C,
            mask_e, mask_hc, seed, e, offs_h, H, dropout, keep_scale,
            HAS_DROPOUT)
    finish_step(out, row_max, row_den, acc, running_max, running_sum, i,
                offs_h, offs_c, H, C, mask_h, mask_hc)


@lazy_jit
def backward_dst_kernel(u, v, s, values, rowptr, src, row_max, row_den, delta,
                        grad_out, grad_u, seed, scale, eps, dropout,
                        keep_scale, H, D, C, LOG_SQUARE: tl.constexpr,
                        HAS_DROPOUT: tl.constexpr, BLOCK_E: tl.constexpr,
                        BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                        BLOCK_C: tl.constexpr):
    i, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        rowptr, H, C, BLOCK_H, BLOCK_C)
    offs_e = tl.arange(0, BLOCK_E)
    offs_d = tl.arange(0, BLOCK_D)
    mask_hd = mask_h[:, None] & (offs_d < D)[None, :]
    u_i = node_row_step(u, i, offs_h, offs_d, H, D, mask_hd)
    g_i = node_row_step(grad_out, i, offs_h, offs_c, H, C, mask_hc)
    m, den, d = statistics_step(row_max, row_den, delta, i * H + offs_h,
                                mask_h)
    acc_u = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        e = first + offs_e
        mask_e = e < stop
        j = tl.load(src + e, mask=mask_e, other=0).to(tl.int64)
        row = j[:, None] * H + offs_h[None, :]
        mask_eh = mask_e[:, None] & mask_h[None, :]
        v_j = gather_rows_step(v, row, offs_d, D, mask_e, mask_hd)
        t = scale * tl.sum(v_j * u_i[None, :, :], axis=2)
        logit, slope = link_step(t, eps, LOG_SQUARE)
        logit += tl.load(s + row, mask=mask_eh, other=0.).to(tl.float32)
        alpha = softmax_weight_step(logit, m[None, :], den[None, :], mask_eh)
        x = gather_rows_step(values, row, offs_c, C, mask_e, mask_hc)
        # dL/dalpha~ = <G_i, x_j>; dL/dl = alpha (dL/dalpha - D_i):
        d_logit, _ = logit_gradient_step(
            alpha, tl.sum(x * g_i[None, :, :], axis=2), d[None, :], seed, e,
            offs_h, H, dropout, keep_scale, HAS_DROPOUT)
        d_t = d_logit * slope * scale
        acc_u += tl.sum(d_t[:, :, None] * v_j, axis=0)
    tl.store(grad_u + (i * H + offs_h[:, None]) * D + offs_d[None, :], acc_u,
             mask=mask_hd)


@lazy_jit
def backward_src_kernel(u, v, s, values, colptr, csc_edge, csc_dst, row_max,
                        row_den, delta, grad_out, grad_v, grad_s, grad_values,
                        seed, scale, eps, dropout, keep_scale, H, D, C,
                        LOG_SQUARE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                        BLOCK_D: tl.constexpr, BLOCK_C: tl.constexpr):
    j, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        colptr, H, C, BLOCK_H, BLOCK_C)
    offs_e = tl.arange(0, BLOCK_E)
    offs_d = tl.arange(0, BLOCK_D)
    mask_hd = mask_h[:, None] & (offs_d < D)[None, :]
    v_j = node_row_step(v, j, offs_h, offs_d, H, D, mask_hd)
    x_j = node_row_step(values, j, offs_h, offs_c, H, C, mask_hc)
    s_j = tl.load(s + j * H + offs_h, mask=mask_h, other=0.).to(tl.float32)
    acc_v = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    acc_x = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    acc_s = tl.zeros([BLOCK_H], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        k = first + offs_e
        mask_e = k < stop
        # The CSR position and the target of each out-edge:
        e = tl.load(csc_edge + k, mask=mask_e, other=0).to(tl.int64)
        i = tl.load(csc_dst + k, mask=mask_e, other=0).to(tl.int64)
        row = i[:, None] * H + offs_h[None, :]
        mask_eh = mask_e[:, None] & mask_h[None, :]
        u_i = gather_rows_step(u, row, offs_d, D, mask_e, mask_hd)
        t = scale * tl.sum(u_i * v_j[None, :, :], axis=2)
        logit, slope = link_step(t, eps, LOG_SQUARE)
        m, den, d = statistics_step(row_max, row_den, delta, row, mask_eh)
        alpha = softmax_weight_step(logit + s_j[None, :], m, den, mask_eh)
        g = gather_rows_step(grad_out, row, offs_c, C, mask_e, mask_hc)
        d_logit, kept = logit_gradient_step(
            alpha, tl.sum(g * x_j[None, :, :], axis=2), d, seed, e, offs_h,
            H, dropout, keep_scale, HAS_DROPOUT)
        acc_x += tl.sum(kept[:, :, None] * g, axis=0)
        acc_s += tl.sum(d_logit, axis=0)
        acc_v += tl.sum((d_logit * slope * scale)[:, :, None] * u_i, axis=0)
    tl.store(grad_v + (j * H + offs_h[:, None]) * D + offs_d[None, :], acc_v,
             mask=mask_hd)
    tl.store(grad_values + (j * H + offs_h[:, None]) * C + offs_c[None, :],
             acc_x, mask=mask_hc)
    tl.store(grad_s + j * H + offs_h, acc_s, mask=mask_h)


#: The widest gathered row (:math:`B_H \times \max(B_D, B_C)` floats) of
#: the tables' kernels, and the largest tile of two such rows that stays at
#: 4 warps: all 8 heads of :math:`2R = 128` random features in one program.
#: On an H100 at arxiv size (forward and backward of the three kernels,
#: ``benchmarks/results/archive/cuda-2026-11-27-h100/tables.md``) 8 heads x 2 edges
#: at 4 warps took 13.5 ms, against 20.3 ms for the rows of
#: :data:`ROW_ELEMENTS` (4 heads x 2 edges, 8 warps) and 20.1 ms for 8
#: heads x 2 edges at 8 warps.  Each kernel timed by the profiler (run 4
#: there): the forward took 1.99 ms in one-edge tiles at 2 warps against
#: 2.74 ms at 2 edges and 4 warps, which :func:`table_tiling` takes for
#: rows wider than :data:`ROW_ELEMENTS`; the backward kernels at 2 warps
#: took 3.65 and 4.46 ms against 3.93 and 4.74 ms, but they spill (48-372
#: bytes at 128 registers, ``benchmarks.gpu_compile``), so they stay at 4.
TABLE_ROW_ELEMENTS = 2 * ROW_ELEMENTS


def table_tiling(num_edges: int, num_nodes: int, heads: int, width: int,
                 channels: int, forward: bool = False) -> dict:
    r""":func:`tiling` of the tables' kernels: heads in rows of up to
    :data:`TABLE_ROW_ELEMENTS`, edge tiles of :data:`ROW_ELEMENTS` (at
    least two edges), at 4 warps up to two rows of
    :data:`TABLE_ROW_ELEMENTS`; with :obj:`forward` (the forward kernel),
    rows wider than :data:`ROW_ELEMENTS` in one-edge tiles at 2 warps."""
    constants = tiling(num_edges, num_nodes, heads, width, channels,
                       TABLE_ROW_ELEMENTS)
    row = constants['BLOCK_H'] * max(constants['BLOCK_D'],
                                     constants['BLOCK_C'])
    if constants['BLOCK_E'] * row <= 2 * TABLE_ROW_ELEMENTS:
        constants['num_warps'] = 4
        if forward and row > ROW_ELEMENTS:
            constants.update(BLOCK_E=1, num_warps=2)
    return constants
