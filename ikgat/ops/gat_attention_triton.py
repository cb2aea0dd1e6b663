r"""The Triton kernels of :mod:`ikgat.ops.gat_attention` (its module
docstring has the formulas): one program per target for the forward pass
(:func:`forward_kernel`) and the attention weights (:func:`alpha_kernel`),
one per source and one per target for the backward pass
(:func:`backward_src_kernel`, :func:`backward_dst_kernel`).  The logit of
an edge comes from the packed node scores (:func:`_edge_logit`, the slope
picked by the sign of the gate, :func:`_edge_slope`); the online softmax,
the dropout draw and the steps around them are
:mod:`ikgat.ops.attention_steps`'.  Launched, and jitted on their first
launch (:mod:`ikgat.ops.runtime`), by :mod:`ikgat.ops.gat_attention`.
"""
from __future__ import annotations  # keeps 'tl.constexpr' a string

from ikgat.ops.attention_steps import (
    aggregate_step,
    edge_rows_step,
    finish_step,
    in_edges_step,
    keep_step,
    logit_gradient_step,
    node_edges_step,
    node_program_step,
    node_row_step,
    out_edges_step,
    softmax_start_step,
    softmax_weight_step,
    statistics_step,
    store_row_step,
)
from ikgat.ops.runtime import lazy_jit

triton = None
tl = None


# ---------------------------------------------------------------------------
# Kernel bodies (jitted on their first launch: ikgat.ops.runtime).  Tensors
# are contiguous: scores (N, H, 3), features (N, H, C), edge tensors (E, H)
# in CSR order.


@lazy_jit
def _edge_slope(g_src, g_dst, eps, HAS_GATE: tl.constexpr):
    # t = [gate <= 0]; returns gate > 0 (t = 0, slope c = 1).  The same
    # additions in the same order as kernel_edge_softmax, so the same choice.
    gate = g_src + g_dst
    if HAS_GATE:
        gate = gate + eps
    return gate > 0


@lazy_jit
def _edge_logit(s0_src, s1_src, g_src, s0_dst, s1_dst, g_dst, eps,
                negative_slope, HAS_GATE: tl.constexpr):
    # logit = s_src[j, t] + s_dst[i, t] (+ c_t eps), as kernel_edge_softmax:
    positive = _edge_slope(g_src, g_dst, eps, HAS_GATE)
    logit = tl.where(positive, s0_src + s0_dst, s1_src + s1_dst)
    if HAS_GATE:
        logit = logit + tl.where(positive, eps, negative_slope * eps)
    return logit, positive


@lazy_jit
def _scores(scores, offsets, mask):
    # The three packed scores (slope 1, slope c, gate) at element offsets
    # (row * H + head) * 3, upcast:
    s0 = tl.load(scores + offsets, mask=mask, other=0.).to(tl.float32)
    s1 = tl.load(scores + offsets + 1, mask=mask, other=0.).to(tl.float32)
    g = tl.load(scores + offsets + 2, mask=mask, other=0.).to(tl.float32)
    return s0, s1, g


@lazy_jit
def _edge_values(values, e, offs_h, H, mask_eh):
    # An (E, H) edge tensor at a block of CSR positions, upcast:
    return tl.load(values + e[:, None] * H + offs_h[None, :], mask=mask_eh,
                   other=0.).to(tl.float32)


@lazy_jit
def _in_edge_logits(score_src, edge_gate, src, first, stop, offs_h, mask_h, H,
                    s0_dst, s1_dst, g_dst, negative_slope,
                    HAS_GATE: tl.constexpr, BLOCK_E: tl.constexpr):
    # A target's tile of in-edges from CSR position first (in_edges_step),
    # and their logits from the gathered source scores and the target's own:
    # returns (e, mask_e, row, mask_eh, logit).
    e, mask_e, _, row, mask_eh = in_edges_step(src, first, stop, offs_h, H,
                                               mask_h, BLOCK_E)
    s0, s1, g = _scores(score_src, row * 3, mask_eh)
    eps = 0.
    if HAS_GATE:
        eps = _edge_values(edge_gate, e, offs_h, H, mask_eh)
    logit, _ = _edge_logit(s0, s1, g, s0_dst[None, :], s1_dst[None, :],
                           g_dst[None, :], eps, negative_slope, HAS_GATE)
    return e, mask_e, row, mask_eh, logit


@lazy_jit
def forward_kernel(score_src, score_dst, x_src, edge_gate, rowptr, src, out,
                   group_max, group_den, seed, negative_slope, dropout,
                   keep_scale, H, C, BROADCAST: tl.constexpr,
                   HAS_GATE: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                   BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_C: tl.constexpr):
    i, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        rowptr, H, C, BLOCK_H, BLOCK_C)
    dst_row = i * (1 - BROADCAST)  # row 0 of a (1, H, 3) score_dst
    s0_dst, s1_dst, g_dst = _scores(score_dst, (dst_row * H + offs_h) * 3,
                                    mask_h)
    running_max, running_sum, acc = softmax_start_step(BLOCK_H, BLOCK_C)
    for first in range(start, stop, BLOCK_E):
        e, mask_e, row, _, logit = _in_edge_logits(
            score_src, edge_gate, src, first, stop, offs_h, mask_h, H, s0_dst,
            s1_dst, g_dst, negative_slope, HAS_GATE, BLOCK_E)
        # Online softmax and dropout (ikgat.ops.attention_steps): the softmax
        # sums the undropped terms, the output the dropped ones.
        running_max, running_sum, acc = aggregate_step(
            running_max, running_sum, acc, logit, x_src, row, offs_c, C,
            mask_e, mask_hc, seed, e, offs_h, H, dropout, keep_scale,
            HAS_DROPOUT)
    finish_step(out, group_max, group_den, acc, running_max, running_sum, i,
                offs_h, offs_c, H, C, mask_h, mask_hc)


@lazy_jit
def alpha_kernel(score_src, score_dst, edge_gate, rowptr, src, group_max,
                 group_den, alpha, seed, negative_slope, dropout, keep_scale,
                 H, BROADCAST: tl.constexpr, HAS_GATE: tl.constexpr,
                 HAS_DROPOUT: tl.constexpr, BLOCK_E: tl.constexpr,
                 BLOCK_H: tl.constexpr):
    i, offs_h, start, stop, mask_h = node_edges_step(rowptr, H, BLOCK_H)
    row = i * (1 - BROADCAST)
    s0_dst, s1_dst, g_dst = _scores(score_dst, (row * H + offs_h) * 3,
                                    mask_h)
    m = tl.load(group_max + i * H + offs_h, mask=mask_h, other=0.)
    den = tl.load(group_den + i * H + offs_h, mask=mask_h, other=1.)
    for first in range(start, stop, BLOCK_E):
        e, _, _, mask_eh, logit = _in_edge_logits(
            score_src, edge_gate, src, first, stop, offs_h, mask_h, H, s0_dst,
            s1_dst, g_dst, negative_slope, HAS_GATE, BLOCK_E)
        weight = softmax_weight_step(logit, m[None, :], den[None, :], mask_eh)
        if HAS_DROPOUT:
            weight = weight * keep_step(seed, e, offs_h, H, dropout,
                                        keep_scale)
        tl.store(alpha + e[:, None] * H + offs_h[None, :], weight,
                 mask=mask_eh)


@lazy_jit
def backward_src_kernel(score_src, score_dst, x_src, edge_gate, colptr,
                        csc_edge, csc_dst, group_max, group_den, delta,
                        grad_out, grad_alpha, grad_x, grad_score_src,
                        grad_logit, seed, negative_slope, dropout, keep_scale,
                        H, C, stride_n, stride_h, stride_c,
                        BROADCAST: tl.constexpr, HAS_GATE: tl.constexpr,
                        HAS_DROPOUT: tl.constexpr,
                        HAS_GRAD_ALPHA: tl.constexpr,
                        STORE_GRAD_LOGIT: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                        BLOCK_C: tl.constexpr):
    j, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        colptr, H, C, BLOCK_H, BLOCK_C)
    offs_e = tl.arange(0, BLOCK_E)
    s0_src, s1_src, g_src = _scores(score_src, (j * H + offs_h) * 3, mask_h)
    x_j = node_row_step(x_src, j, offs_h, offs_c, H, C, mask_hc)
    acc_x = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    acc_pos = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc_neg = tl.zeros([BLOCK_H], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        k = first + offs_e
        mask_e = k < stop
        # The CSR position and the target of each out-edge:
        e, i = out_edges_step(csc_edge, csc_dst, k, mask_e)
        node_eh, mask_eh = edge_rows_step(i, offs_h, H, mask_e, mask_h)
        row = i * (1 - BROADCAST)
        s0, s1, g = _scores(score_dst,
                            (row[:, None] * H + offs_h[None, :]) * 3, mask_eh)
        eps = 0.
        if HAS_GATE:
            eps = _edge_values(edge_gate, e, offs_h, H, mask_eh)
        logit, positive = _edge_logit(s0_src[None, :], s1_src[None, :],
                                      g_src[None, :], s0, s1, g, eps,
                                      negative_slope, HAS_GATE)
        m, den, d = statistics_step(group_max, group_den, delta, node_eh,
                                    mask_eh)
        alpha = softmax_weight_step(logit, m, den, mask_eh)
        g_out = tl.load(grad_out + i[:, None, None] * stride_n
                        + offs_h[None, :, None] * stride_h
                        + offs_c[None, None, :] * stride_c,
                        mask=mask_e[:, None, None] & mask_hc[None, :, :],
                        other=0.).to(tl.float32)
        # With the dropped weights a~ = m alpha / (1 - p):
        # dL/da~_e = <G_i, x_j> (+ g_e), dL/dalpha_e = m/(1-p) dL/da~_e,
        # dL/dlogit = alpha (dL/dalpha - D_i), dL/dx_j = sum_e a~_e G_i.
        d_alpha = tl.sum(g_out * x_j[None, :, :], axis=2)
        if HAS_GRAD_ALPHA:
            d_alpha += _edge_values(grad_alpha, e, offs_h, H, mask_eh)
        d_logit, kept = logit_gradient_step(alpha, d_alpha, d, seed, e, offs_h,
                                            H, dropout, keep_scale, HAS_DROPOUT)
        acc_x += tl.sum(kept[:, :, None] * g_out, axis=0)
        acc_pos += tl.sum(tl.where(positive, d_logit, 0.), axis=0)
        acc_neg += tl.sum(tl.where(positive, 0., d_logit), axis=0)
        if STORE_GRAD_LOGIT:
            tl.store(grad_logit + e[:, None] * H + offs_h[None, :], d_logit,
                     mask=mask_eh)
    store_row_step(grad_x, j, offs_h, offs_c, H, C, acc_x, mask_hc)
    grad_ptr = grad_score_src + j * H * 3 + offs_h * 3
    tl.store(grad_ptr, acc_pos, mask=mask_h)
    tl.store(grad_ptr + 1, acc_neg, mask=mask_h)
    tl.store(grad_ptr + 2, tl.zeros([BLOCK_H], dtype=tl.float32),
             mask=mask_h)


@lazy_jit
def backward_dst_kernel(score_src, score_dst, edge_gate, rowptr, src,
                        grad_logit, grad_score_dst, grad_edge_gate,
                        negative_slope, H, BROADCAST: tl.constexpr,
                        HAS_GATE: tl.constexpr, NEED_GATE_GRAD: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr):
    i, offs_h, start, stop, mask_h = node_edges_step(rowptr, H, BLOCK_H)
    row = i * (1 - BROADCAST)
    g_dst = tl.load(score_dst + row * H * 3 + offs_h * 3 + 2, mask=mask_h,
                    other=0.).to(tl.float32)
    acc_pos = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc_neg = tl.zeros([BLOCK_H], dtype=tl.float32)
    for first in range(start, stop, BLOCK_E):
        e, _, _, row_eh, mask_eh = in_edges_step(src, first, stop, offs_h, H,
                                                 mask_h, BLOCK_E)
        g = tl.load(score_src + row_eh * 3 + 2, mask=mask_eh,
                    other=0.).to(tl.float32)
        eps = 0.
        if HAS_GATE:
            eps = _edge_values(edge_gate, e, offs_h, H, mask_eh)
        positive = _edge_slope(g, g_dst[None, :], eps, HAS_GATE)
        d_logit = _edge_values(grad_logit, e, offs_h, H, mask_eh)
        acc_pos += tl.sum(tl.where(positive, d_logit, 0.), axis=0)
        acc_neg += tl.sum(tl.where(positive, 0., d_logit), axis=0)
        if NEED_GATE_GRAD:
            tl.store(grad_edge_gate + e[:, None] * H + offs_h[None, :],
                     tl.where(positive, d_logit, negative_slope * d_logit),
                     mask=mask_eh)
    tl.store(grad_score_dst + i * H * 2 + offs_h * 2, acc_pos, mask=mask_h)
    tl.store(grad_score_dst + i * H * 2 + offs_h * 2 + 1, acc_neg,
             mask=mask_h)
