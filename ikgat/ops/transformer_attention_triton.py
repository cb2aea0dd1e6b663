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
    aggregate_step,
    edge_rows_step,
    finish_step,
    gather_rows_step,
    in_edges_step,
    link_step,
    node_program_step,
    node_row_step,
    out_edges_step,
    softmax_start_step,
    source_gradient_step,
    source_logit_step,
    statistics_step,
    store_row_step,
    target_gradient_step,
)
from ikgat.ops.runtime import lazy_jit
from ikgat.ops.tiling import ROW_ELEMENTS, tiling

triton = None
tl = None


# ---------------------------------------------------------------------------
# Kernel bodies (jitted on their first launch: ikgat.ops.runtime).  Tensors
# are contiguous: tables (N, H, D), source terms (N_s, H), values (N_s, H, C).


@lazy_jit
def _table_program(pointers, table, H, D, C, BLOCK_H: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_C: tl.constexpr):
    # node_program_step, with the table columns' offsets and mask and the
    # program's own row of the table (N, H, D), [B_H, B_D]:
    node, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        pointers, H, C, BLOCK_H, BLOCK_C)
    offs_d = tl.arange(0, BLOCK_D)
    mask_hd = mask_h[:, None] & (offs_d < D)[None, :]
    own = node_row_step(table, node, offs_h, offs_d, H, D, mask_hd)
    return (node, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_d,
            mask_hd, own)


@lazy_jit
def forward_kernel(u, v, s, values, rowptr, src, out, row_max, row_den, seed,
                   scale, eps, dropout, keep_scale, H, D, C,
                   LOG_SQUARE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                   BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_C: tl.constexpr):
    # One program per target i and block of heads: each in-edge gathers
    # one contiguous row of B_H x D table floats and B_H x C values.
    (i, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_d, mask_hd,
     u_i) = _table_program(rowptr, u, H, D, C, BLOCK_H, BLOCK_D, BLOCK_C)
    running_max, running_sum, acc = softmax_start_step(BLOCK_H, BLOCK_C)
    for first in range(start, stop, BLOCK_E):
        e, mask_e, j, row, mask_eh = in_edges_step(src, first, stop, offs_h,
                                                   H, mask_h, BLOCK_E)
        v_j = gather_rows_step(v, row, offs_d, D, mask_e, mask_hd)
        t = scale * tl.sum(v_j * u_i[None, :, :], axis=2)  # [B_E, B_H]
        logit, _ = source_logit_step(t, s, row, mask_eh, eps, LOG_SQUARE)
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
    (i, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_d, mask_hd,
     u_i) = _table_program(rowptr, u, H, D, C, BLOCK_H, BLOCK_D, BLOCK_C)
    g_i = node_row_step(grad_out, i, offs_h, offs_c, H, C, mask_hc)
    m, den, d = statistics_step(row_max, row_den, delta, i * H + offs_h,
                                mask_h)
    acc_u = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        e, mask_e, j, row, mask_eh = in_edges_step(src, first, stop, offs_h,
                                                   H, mask_h, BLOCK_E)
        v_j = gather_rows_step(v, row, offs_d, D, mask_e, mask_hd)
        t = scale * tl.sum(v_j * u_i[None, :, :], axis=2)
        logit, slope = source_logit_step(t, s, row, mask_eh, eps, LOG_SQUARE)
        d_logit = target_gradient_step(
            logit, m, den, d, g_i, values, row, offs_c, C, mask_e, mask_hc,
            mask_eh, seed, e, offs_h, H, dropout, keep_scale, HAS_DROPOUT)
        acc_u += tl.sum((d_logit * slope * scale)[:, :, None] * v_j, axis=0)
    store_row_step(grad_u, i, offs_h, offs_d, H, D, acc_u, mask_hd)


@lazy_jit
def backward_src_kernel(u, v, s, values, colptr, csc_edge, csc_dst, row_max,
                        row_den, delta, grad_out, grad_v, grad_s, grad_values,
                        seed, scale, eps, dropout, keep_scale, H, D, C,
                        LOG_SQUARE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                        BLOCK_D: tl.constexpr, BLOCK_C: tl.constexpr):
    (j, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_d, mask_hd,
     v_j) = _table_program(colptr, v, H, D, C, BLOCK_H, BLOCK_D, BLOCK_C)
    x_j = node_row_step(values, j, offs_h, offs_c, H, C, mask_hc)
    s_j = tl.load(s + j * H + offs_h, mask=mask_h, other=0.).to(tl.float32)
    acc_v = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    acc_x = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    acc_s = tl.zeros([BLOCK_H], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        k = first + tl.arange(0, BLOCK_E)
        mask_e = k < stop
        # The CSR position and the target of each out-edge:
        e, i = out_edges_step(csc_edge, csc_dst, k, mask_e)
        row, mask_eh = edge_rows_step(i, offs_h, H, mask_e, mask_h)
        u_i = gather_rows_step(u, row, offs_d, D, mask_e, mask_hd)
        t = scale * tl.sum(u_i * v_j[None, :, :], axis=2)
        logit, slope = link_step(t, eps, LOG_SQUARE)
        d_logit, acc_x, acc_s = source_gradient_step(
            logit + s_j[None, :], row_max, row_den, delta, grad_out, x_j,
            acc_x, acc_s, row, offs_c, C, mask_e, mask_hc, mask_eh, seed, e,
            offs_h, H, dropout, keep_scale, HAS_DROPOUT)
        acc_v += tl.sum((d_logit * slope * scale)[:, :, None] * u_i, axis=0)
    store_row_step(grad_v, j, offs_h, offs_d, H, D, acc_v, mask_hd)
    store_row_step(grad_values, j, offs_h, offs_c, H, C, acc_x, mask_hc)
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
