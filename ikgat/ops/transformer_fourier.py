r"""The random-feature tables of dot-product kernel attention computed inside
its fused kernels, for :mod:`ikgat.ops.transformer_attention` with spectral
points.

With :math:`m` stacked sets of :math:`R` spectral points :math:`W_s`
:math:`(m, H, R, D)`, a query or key :math:`x` :math:`(H, D)` has, per
head, the features

.. math::
    \phi(x) = \Big[\sum_{s=1}^m \cos W_s x;\ \sum_{s=1}^m \sin W_s x\Big]
    \in \mathbb{R}^{2R},

and an edge :math:`j \to i` the link :math:`t = c\,\phi(q_i)^\top
\phi(k_j)` of the ``'log_square'`` logit (module docstring of
:mod:`ikgat.ops.transformer_attention`).  Gathering the tables would move
:math:`2R` floats per edge and head; here each kernel computes the
features of the edge's other end from its :math:`D` floats, and those of
its own node once per program:

* the **forward** kernel, per target :math:`i`: :math:`\phi(q_i)` once,
  then per in-edge :math:`t_{ij}` and the online softmax of the gathered
  kernels; it stores each edge's :math:`t_{ij}` (:math:`E \times H`
  floats, CSR order);
* the **per-target backward**: :math:`\partial L/\partial\phi(q_i) = c
  \sum_j \partial L/\partial t_{ij}\,\phi(k_j)`;
* the **per-source backward**: :math:`\partial L/\partial\phi(k_j) = c
  \sum_i \partial L/\partial t_{ij}\,\phi(q_i)`, and the gradients of the
  source terms and values.

Both backward kernels read :math:`t_{ij}` instead of making it, so that
they need no features of their own node before the sum.  Every kernel
makes each edge's other end's :math:`\phi` once, in ``CHUNKS`` blocks of
:math:`B_R` points, and adds each block into a dot (forward) or into
accumulators laid out :math:`B_H \times` ``CHUNKS`` :math:`\times B_R`
(backward; the forward holds its own node's :math:`\phi` so), through a
one-hot select: the live tiles are those of one chunk, which lets one
program hold all heads.

Each backward kernel ends at its own node's angles :math:`a_s = W_s x`:

.. math::
    \frac{\partial L}{\partial a_s} = \cos a_s \odot g_{\sin}
    - \sin a_s \odot g_{\cos}, \qquad
    \frac{\partial L}{\partial x} = \sum_s W_s^\top
    \frac{\partial L}{\partial a_s},

with :math:`g_{\cos}, g_{\sin}` the two halves of
:math:`\partial L/\partial\phi(x)`; it writes :math:`\partial L/\partial
x` and, when the points need a gradient, :math:`\partial L/\partial a`
:math:`(N, H, m, R)`, from which
:math:`\partial L/\partial W_s = \sum_n (\partial L/\partial a_{n,s})\,
x_n^\top` is one node-level product per side (in torch).  Per edge and
head a kernel computes :math:`2mR` sines and cosines (each pair from one
range reduction and two polynomials,
:func:`~ikgat.ops.node_terms_triton.sincos_step`) and :math:`2mRD` FLOPs of
angles, and gathers :math:`D` floats instead of :math:`2R`.

Each kernel loads the next edge tile's other ends before the current
tile's work, so that the load's latency overlaps it (the per-source
kernel where its rows are narrow: ``PREFETCH``,
:func:`prefetches_targets`).
The tiles are :math:`B_E \times B_H \times B_R` (edges, heads, points);
the angles are accumulated over :math:`d` from single columns, so that no
tile carries the :math:`D` axis.  The loops over :math:`d` (``D`` is a
compile-time constant) are unrolled :data:`D_STEP` columns at a time, and
those over the chunks whole (``tl.static_range``), so that a step's loads
issue together (on an H100 at arxiv size, D = 8: 71.6 to 59.6 ms a layer
step, ``benchmarks/results/archive/cuda-2026-11-26-h100``).  The kernels
and their tiling (:func:`fourier_tiling`) are here; the launches and the
registered operator are :mod:`ikgat.ops.transformer_attention`'s.
"""
from __future__ import annotations  # keeps 'tl.constexpr' a string

from ikgat.ops.attention_steps import (
    aggregate_step,
    edge_rows_step,
    finish_step,
    first_tile_step,
    link_step,
    next_tile_step,
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
from ikgat.ops.node_terms_triton import sincos_step
from ikgat.ops.runtime import TritonConstant, lazy_jit, next_power_of_2
from ikgat.ops.tiling import ROW_ELEMENTS, edge_tiling, head_block, tiling

#: Columns of the vectors per unrolled step of the loops over :math:`d`
#: (``tl.static_range``), so that a step's loads issue together.  Whole
#: loops unrolled (D = 64, one head: 64 loads of 128 points hoisted) spilled
#: 1.4-1.9 kB per thread (``benchmarks.gpu_compile``, Triton 3.6 and 3.9).
D_STEP = 8

triton = None
tl = None
_D_STEP = TritonConstant(D_STEP)


@lazy_jit
def _features(x, points, nodes, offs_h, offs_r, mask_n, H, D, R,
              num_sets, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
              BLOCK_R: tl.constexpr):
    # phi of the rows x[nodes, offs_h] of x (N, H, D): the sums over the
    # sets of cos and sin of the angles W_s x, [B_N, B_H, B_R] each, zero
    # outside the masks.
    rows = nodes[:, None] * H + offs_h[None, :]  # [B_N, B_H]
    mask_h = offs_h < H
    mask_hr = mask_h[:, None] & (offs_r < R)[None, :]
    mask_nh = mask_n[:, None] & mask_h[None, :]
    cos_sum = tl.zeros([BLOCK_N, BLOCK_H, BLOCK_R], dtype=tl.float32)
    sin_sum = tl.zeros([BLOCK_N, BLOCK_H, BLOCK_R], dtype=tl.float32)
    for s in range(num_sets):
        angle = tl.zeros([BLOCK_N, BLOCK_H, BLOCK_R], dtype=tl.float32)
        point = points + ((s * H + offs_h[:, None]) * R
                          + offs_r[None, :]) * D  # [B_H, B_R]
        for first in range(0, D, _D_STEP):  # D_STEP columns at a time
            for step in tl.static_range(_D_STEP):
                d = first + step
                in_d = (tl.zeros([1, 1], dtype=tl.int32) + d) < D
                x_d = tl.load(x + rows * D + d, mask=mask_nh & in_d,
                              other=0.)
                w_d = tl.load(point + d, mask=mask_hr & in_d, other=0.)
                angle += x_d.to(tl.float32)[:, :, None] * w_d.to(
                    tl.float32)[None, :, :]
        sin, cos = sincos_step(angle)
        cos_sum += cos
        sin_sum += sin
    mask = mask_nh[:, :, None] & mask_hr[None, :, :]
    return tl.where(mask, cos_sum, 0.), tl.where(mask, sin_sum, 0.)


@lazy_jit
def _angle_gradients(x, points, node, offs_h, offs_r, offs_d, grad_cos,
                     grad_sin, grad_angles, H, D, R, num_sets,
                     STORE_ANGLES: tl.constexpr, BLOCK_H: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    # From dL/dphi(x_node) = [grad_cos; grad_sin] at the points offs_r
    # ([B_H, B_R] each): the angles' dL/da_s = cos a_s grad_sin - sin a_s
    # grad_cos (stored in grad_angles (N, H, m, R) with STORE_ANGLES), and
    # their part of dL/dx = sum_s W_s^T dL/da_s, returned [B_H, B_D].
    mask_h = offs_h < H
    mask_hr = mask_h[:, None] & (offs_r < R)[None, :]
    row = node * H + offs_h  # [B_H]
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    for s in range(num_sets):
        point = points + ((s * H + offs_h[:, None]) * R
                          + offs_r[None, :]) * D  # [B_H, B_R]
        angle = tl.zeros([BLOCK_H, BLOCK_R], dtype=tl.float32)
        for first in range(0, D, _D_STEP):
            for step in tl.static_range(_D_STEP):
                d = first + step
                in_d = (tl.zeros([1], dtype=tl.int32) + d) < D
                x_d = tl.load(x + row * D + d, mask=mask_h & in_d, other=0.)
                w_d = tl.load(point + d, mask=mask_hr & in_d[:, None],
                              other=0.)
                angle += x_d.to(tl.float32)[:, None] * w_d.to(tl.float32)
        sin, cos = sincos_step(angle)
        grad_angle = tl.where(mask_hr, cos * grad_sin - sin * grad_cos, 0.)
        if STORE_ANGLES:
            tl.store(grad_angles + (row[:, None] * num_sets + s) * R
                     + offs_r[None, :], grad_angle, mask=mask_hr)
        for first in range(0, D, _D_STEP):  # columns d of W_s^T dL/da_s
            for step in tl.static_range(_D_STEP):
                d = first + step
                in_d = (tl.zeros([1, 1], dtype=tl.int32) + d) < D
                w_d = tl.load(point + d, mask=mask_hr & in_d,
                              other=0.).to(tl.float32)
                column = tl.sum(grad_angle * w_d, axis=1)  # [B_H]
                acc += tl.where(offs_d[None, :] == d, column[:, None], 0.)
    return acc


@lazy_jit
def _add_chunk(acc, part, offs_chunk, chunk):
    # acc [B_H, CHUNKS, B_R] with part [B_H, B_R] added at chunk (a one-hot
    # select: the chunk axis of a tile cannot be indexed).
    return acc + tl.where((offs_chunk == chunk)[None, :, None],
                          part[:, None, :], 0.)


@lazy_jit
def _chunk(acc, offs_chunk, chunk):
    # The chunk of acc [B_H, CHUNKS, B_R], [B_H, B_R].
    return tl.sum(tl.where((offs_chunk == chunk)[None, :, None], acc, 0.),
                  axis=1)


@lazy_jit
def _own_features(x, points, node, offs_h, offs_r, offs_chunk, H, D, R,
                  num_sets, BLOCK_H: tl.constexpr,
                  BLOCK_R: tl.constexpr, CHUNKS: tl.constexpr):
    # phi of the program's own node, [B_H, CHUNKS, B_R] each.
    nodes = node + tl.zeros([1], dtype=tl.int64)
    own_cos = tl.zeros([BLOCK_H, CHUNKS, BLOCK_R], dtype=tl.float32)
    own_sin = tl.zeros([BLOCK_H, CHUNKS, BLOCK_R], dtype=tl.float32)
    for chunk in tl.static_range(CHUNKS):
        cos, sin = _features(x, points, nodes, offs_h,
                             chunk * BLOCK_R + offs_r, nodes >= 0, H, D, R,
                             num_sets, 1, BLOCK_H, BLOCK_R)
        own_cos = _add_chunk(own_cos, tl.sum(cos, axis=0), offs_chunk, chunk)
        own_sin = _add_chunk(own_sin, tl.sum(sin, axis=0), offs_chunk, chunk)
    return own_cos, own_sin


@lazy_jit
def _dot(own_cos, own_sin, x, points, nodes, offs_h, offs_r, offs_chunk,
         mask_e, H, D, R, num_sets, BLOCK_E: tl.constexpr,
         BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
         CHUNKS: tl.constexpr):
    # phi(own)^T phi(x_e) per edge e of the tile and head, [B_E, B_H], from
    # the own node's features [B_H, CHUNKS, B_R], the other ends' made one
    # chunk of points at a time.
    dot = tl.zeros([BLOCK_E, BLOCK_H], dtype=tl.float32)
    for chunk in tl.static_range(CHUNKS):
        cos, sin = _features(x, points, nodes, offs_h,
                             chunk * BLOCK_R + offs_r, mask_e, H, D, R,
                             num_sets, BLOCK_E, BLOCK_H, BLOCK_R)
        dot += tl.sum(cos * _chunk(own_cos, offs_chunk, chunk)[None, :, :]
                      + sin * _chunk(own_sin, offs_chunk, chunk)[None, :, :],
                      axis=2)
    return dot


@lazy_jit
def _accumulate(acc_cos, acc_sin, d_t, x, points, nodes, offs_h, offs_r,
                offs_chunk, mask_e, H, D, R, num_sets,
                BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                BLOCK_R: tl.constexpr, CHUNKS: tl.constexpr):
    # dL/dphi(own) += sum_e dL/dt_e phi(x_e) (the scale in d_t [B_E, B_H]),
    # into [B_H, CHUNKS, B_R], the other ends' features made one chunk of
    # points at a time.
    for chunk in tl.static_range(CHUNKS):
        cos, sin = _features(x, points, nodes, offs_h,
                             chunk * BLOCK_R + offs_r, mask_e, H, D, R,
                             num_sets, BLOCK_E, BLOCK_H, BLOCK_R)
        acc_cos = _add_chunk(acc_cos, tl.sum(d_t[:, :, None] * cos, axis=0),
                             offs_chunk, chunk)
        acc_sin = _add_chunk(acc_sin, tl.sum(d_t[:, :, None] * sin, axis=0),
                             offs_chunk, chunk)
    return acc_cos, acc_sin


@lazy_jit
def _feature_gradient_start(BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
                            CHUNKS: tl.constexpr):
    # dL/dphi of the program's own node, cosine and sine halves, zero, each
    # [B_H, CHUNKS, B_R] (_accumulate adds to them):
    return (tl.zeros([BLOCK_H, CHUNKS, BLOCK_R], dtype=tl.float32),
            tl.zeros([BLOCK_H, CHUNKS, BLOCK_R], dtype=tl.float32))


@lazy_jit
def _store_gradient(grad_x, x, points, node, offs_h, offs_r, offs_chunk,
                    acc_cos, acc_sin, grad_angles, H, D, R, num_sets,
                    STORE_ANGLES: tl.constexpr, BLOCK_H: tl.constexpr,
                    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
                    CHUNKS: tl.constexpr):
    # dL/dx of the own node from dL/dphi(x) [B_H, CHUNKS, B_R] each, chunk
    # by chunk, stored into grad_x (N, H, D) (and dL/da with STORE_ANGLES).
    offs_d = tl.arange(0, BLOCK_D)
    rows = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    for chunk in tl.static_range(CHUNKS):
        rows += _angle_gradients(
            x, points, node, offs_h, chunk * BLOCK_R + offs_r, offs_d,
            _chunk(acc_cos, offs_chunk, chunk),
            _chunk(acc_sin, offs_chunk, chunk), grad_angles, H, D, R,
            num_sets, STORE_ANGLES, BLOCK_H, BLOCK_R, BLOCK_D)
    store_row_step(grad_x, node, offs_h, offs_d, H, D, rows,
                   (offs_h < H)[:, None] & (offs_d < D)[None, :])


@lazy_jit
def _fourier_program(pointers, H, C, BLOCK_E: tl.constexpr,
                     BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
                     BLOCK_C: tl.constexpr, CHUNKS: tl.constexpr):
    # node_program_step, with the offsets of a tile's edges, of a chunk's
    # points and of the chunks:
    node, offs_h, start, stop, offs_c, mask_h, mask_hc = node_program_step(
        pointers, H, C, BLOCK_H, BLOCK_C)
    return (node, offs_h, start, stop, offs_c, mask_h, mask_hc,
            tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_R),
            tl.arange(0, CHUNKS))


@lazy_jit
def _saved_t(t_saved, e, offs_h, H, mask_eh):
    # The edges' t stored by the forward kernel (E, H), in CSR order:
    return tl.load(t_saved + e[:, None] * H + offs_h[None, :], mask=mask_eh,
                   other=0.).to(tl.float32)


@lazy_jit
def forward_kernel(q, k, points, s, values, rowptr, src, out, row_max,
                   row_den, t_out, seed, scale, eps, dropout, keep_scale, H,
                   D: tl.constexpr, R, C, num_sets, HAS_DROPOUT: tl.constexpr,
                   BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                   CHUNKS: tl.constexpr):
    # One program per target i and block of heads: phi(q_i) once, in
    # [B_H, CHUNKS, B_R]; phi(k_j) per in-edge, a chunk at a time.
    (i, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_e, offs_r,
     offs_chunk) = _fourier_program(rowptr, H, C, BLOCK_E, BLOCK_H, BLOCK_R,
                                    BLOCK_C, CHUNKS)
    q_cos, q_sin = _own_features(q, points, i, offs_h, offs_r, offs_chunk, H,
                                 D, R, num_sets, BLOCK_H, BLOCK_R, CHUNKS)
    running_max, running_sum, acc = softmax_start_step(BLOCK_H, BLOCK_C)
    # The sources of the first tile; each tile loads the next one's before
    # its own work (ikgat.ops.attention_steps.next_tile_step):
    j_ahead = first_tile_step(src, start, stop, BLOCK_E)
    for first in range(start, stop, BLOCK_E):
        e = first + offs_e
        mask_e = e < stop
        j, j_ahead = next_tile_step(j_ahead, src, e, stop, BLOCK_E)
        row, mask_eh = edge_rows_step(j, offs_h, H, mask_e, mask_h)
        t = scale * _dot(q_cos, q_sin, k, points, j, offs_h, offs_r,
                         offs_chunk, mask_e, H, D, R, num_sets, BLOCK_E,
                         BLOCK_H, BLOCK_R, CHUNKS)
        # The edges' t for the backward kernels (CSR order):
        tl.store(t_out + e[:, None] * H + offs_h[None, :], t, mask=mask_eh)
        logit, _ = source_logit_step(t, s, row, mask_eh, eps, True)
        running_max, running_sum, acc = aggregate_step(
            running_max, running_sum, acc, logit, values, row, offs_c, C,
            mask_e, mask_hc, seed, e, offs_h, H, dropout, keep_scale,
            HAS_DROPOUT)
    finish_step(out, row_max, row_den, acc, running_max, running_sum, i,
                offs_h, offs_c, H, C, mask_h, mask_hc)


@lazy_jit
def backward_dst_kernel(q, k, points, s, values, rowptr, src, row_max,
                        row_den, delta, grad_out, grad_q, grad_angles, t_saved,
                        seed, scale, eps, dropout, keep_scale, H,
                        D: tl.constexpr, R, C, num_sets, STORE_ANGLES: tl.constexpr,
                        HAS_DROPOUT: tl.constexpr, BLOCK_E: tl.constexpr,
                        BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
                        BLOCK_C: tl.constexpr, BLOCK_D: tl.constexpr,
                        CHUNKS: tl.constexpr):
    # One program per target i and block of heads; the edges' t comes from
    # the forward pass (contiguous in CSR order), and each in-edge's
    # phi(k_j) is made once, a chunk at a time.
    (i, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_e, offs_r,
     offs_chunk) = _fourier_program(rowptr, H, C, BLOCK_E, BLOCK_H, BLOCK_R,
                                    BLOCK_C, CHUNKS)
    g_i = node_row_step(grad_out, i, offs_h, offs_c, H, C, mask_hc)
    m, den, d = statistics_step(row_max, row_den, delta, i * H + offs_h,
                                mask_h)
    acc_cos, acc_sin = _feature_gradient_start(BLOCK_H, BLOCK_R, CHUNKS)
    j_ahead = first_tile_step(src, start, stop, BLOCK_E)
    for first in range(start, stop, BLOCK_E):
        e = first + offs_e
        mask_e = e < stop
        j, j_ahead = next_tile_step(j_ahead, src, e, stop, BLOCK_E)
        row, mask_eh = edge_rows_step(j, offs_h, H, mask_e, mask_h)
        logit, slope = source_logit_step(_saved_t(t_saved, e, offs_h, H,
                                                  mask_eh),
                                         s, row, mask_eh, eps, True)
        d_logit = target_gradient_step(
            logit, m, den, d, g_i, values, row, offs_c, C, mask_e, mask_hc,
            mask_eh, seed, e, offs_h, H, dropout, keep_scale, HAS_DROPOUT)
        acc_cos, acc_sin = _accumulate(
            acc_cos, acc_sin, d_logit * slope * scale, k, points, j, offs_h,
            offs_r, offs_chunk, mask_e, H, D, R, num_sets, BLOCK_E, BLOCK_H,
            BLOCK_R, CHUNKS)
    _store_gradient(grad_q, q, points, i, offs_h, offs_r, offs_chunk, acc_cos,
                    acc_sin, grad_angles, H, D, R, num_sets, STORE_ANGLES,
                    BLOCK_H, BLOCK_R, BLOCK_D, CHUNKS)


@lazy_jit
def backward_src_kernel(q, k, points, s, values, colptr, csc_edge, csc_dst,
                        row_max, row_den, delta, grad_out, grad_k, grad_s,
                        grad_values, grad_angles, t_saved, seed, scale, eps,
                        dropout, keep_scale, H, D: tl.constexpr, R, C, num_sets,
                        STORE_ANGLES: tl.constexpr, HAS_DROPOUT: tl.constexpr,
                        BLOCK_E: tl.constexpr, BLOCK_H: tl.constexpr,
                        BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                        BLOCK_D: tl.constexpr, CHUNKS: tl.constexpr,
                        PREFETCH: tl.constexpr):
    # One program per source j and block of heads; the edges' t comes from
    # the forward pass, and each out-edge's phi(q_i) is made once, a chunk
    # at a time.
    (j, offs_h, start, stop, offs_c, mask_h, mask_hc, offs_e, offs_r,
     offs_chunk) = _fourier_program(colptr, H, C, BLOCK_E, BLOCK_H, BLOCK_R,
                                    BLOCK_C, CHUNKS)
    x_j = node_row_step(values, j, offs_h, offs_c, H, C, mask_hc)
    s_j = tl.load(s + j * H + offs_h, mask=mask_h, other=0.).to(tl.float32)
    acc_cos, acc_sin = _feature_gradient_start(BLOCK_H, BLOCK_R, CHUNKS)
    acc_x = tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32)
    acc_s = tl.zeros([BLOCK_H], dtype=tl.float32)
    # The targets of the first tile's out-edges: with PREFETCH each tile
    # loads the next one's before its own work (their CSR positions, read
    # by t and the dropout mask, are loaded in it):
    i_ahead = first_tile_step(csc_dst, start, stop, BLOCK_E)
    for first in range(start, stop, BLOCK_E):
        kk = first + offs_e
        mask_e = kk < stop
        if PREFETCH:
            i, i_ahead = next_tile_step(i_ahead, csc_dst, kk, stop, BLOCK_E)
            e = tl.load(csc_edge + kk, mask=mask_e, other=0).to(tl.int64)
        else:
            e, i = out_edges_step(csc_edge, csc_dst, kk, mask_e)
        row, mask_eh = edge_rows_step(i, offs_h, H, mask_e, mask_h)
        logit, slope = link_step(_saved_t(t_saved, e, offs_h, H, mask_eh),
                                 eps, True)
        d_logit, acc_x, acc_s = source_gradient_step(
            logit + s_j[None, :], row_max, row_den, delta, grad_out, x_j,
            acc_x, acc_s, row, offs_c, C, mask_e, mask_hc, mask_eh, seed, e,
            offs_h, H, dropout, keep_scale, HAS_DROPOUT)
        acc_cos, acc_sin = _accumulate(
            acc_cos, acc_sin, d_logit * slope * scale, q, points, i, offs_h,
            offs_r, offs_chunk, mask_e, H, D, R, num_sets, BLOCK_E, BLOCK_H,
            BLOCK_R, CHUNKS)
    store_row_step(grad_values, j, offs_h, offs_c, H, C, acc_x, mask_hc)
    tl.store(grad_s + j * H + offs_h, acc_s, mask=mask_h)
    _store_gradient(grad_k, k, points, j, offs_h, offs_r, offs_chunk, acc_cos,
                    acc_sin, grad_angles, H, D, R, num_sets, STORE_ANGLES,
                    BLOCK_H, BLOCK_R, BLOCK_D, CHUNKS)


#: The row of the kernels with wide value rows (:math:`B_H \times B_R`,
#: half of :math:`\phi`; edge tiles of :data:`ROW_ELEMENTS`, 4 warps), and the
#: per-source kernel's chunk of points: three live tiles per edge (angles,
#: cosines, sines) besides the softmax's.  With rows of
#: :data:`ROW_ELEMENTS` the per-source backward, when it still made its
#: own node's features, spilled 56 bytes with dropout at 8 heads x R = 64,
#: and 24 bytes with half of it (``benchmarks.gpu_compile``, Triton 3.9,
#: sm_90); a quarter built without spill at 128 registers, in four-warp
#: programs of 4 edges.
FOURIER_ROW_ELEMENTS = ROW_ELEMENTS // 4
#: The smallest edge block of the wide-row tiles: at blocks of 2 edges
#: (graphs of mean in-degree 2 or less) the per-source backward with learned
#: points and dropout spilled 28 bytes at 8 heads x R = 64 (Triton 3.9,
#: sm_90, 128 registers), and at 4 it built without
#: (``benchmarks.gpu_compile``, degrees 2 and 4).
FOURIER_MIN_EDGES = 4
#: The head rows (:math:`B_H \times R`) and smallest edge block of the
#: three kernels.  The forward
#: stores each edge's t and both backward kernels read it, so that no
#: backward kernel makes its own node's features before the sum; each makes
#: the other end's :math:`\phi` once per edge, in ``CHUNKS`` chunks of
#: :data:`FOURIER_ROW_ELEMENTS` / :math:`B_H` points, tiles of
#: :data:`ROW_ELEMENTS` / 2 (all 8 heads at R = 64: chunks of 16 points, 2
#: edges).  With the per-target kernels' whole-R rows, 8 heads in one-edge
#: tiles spilled 24-48 bytes (Triton 3.6, sm_80); the per-source kernel at 4
#: edges spilled 56-84 bytes on sm_80 (``benchmarks.gpu_compile``).
CHUNKED_TILES = (ROW_ELEMENTS, 2)
#: The widest value rows (:math:`B_H \times B_C` floats) of the chunked
#: tiles: 8 heads x 8 channels (R = 64) build at 128 registers without
#: spill; in the forward kernel 4 heads x 64 channels (R = 128) spilled
#: 20-28 bytes (Triton 3.9, sm_90), so wider value rows take rows within
#: :data:`FOURIER_ROW_ELEMENTS`.
CHUNKED_VALUE_ROW = 64


def fourier_tiling(num_edges: int, num_nodes: int, heads: int,
                   num_points: int, channels: int) -> dict:
    r""":func:`tiling` of the three kernels of
    :mod:`ikgat.ops.transformer_fourier`: while the value rows (:math:`B_H
    \times B_C`) are at most :data:`CHUNKED_VALUE_ROW`, the head rows of
    :data:`CHUNKED_TILES`, :math:`R` in ``CHUNKS`` blocks of ``BLOCK_R``
    points; wider value rows take rows within :data:`FOURIER_ROW_ELEMENTS`
    in edge blocks of at least :data:`FOURIER_MIN_EDGES` (one chunk)."""
    row_elements, min_edges = CHUNKED_TILES
    block_h = head_block(heads, num_points, channels, row_elements)
    block_r, block_c = next_power_of_2(num_points), next_power_of_2(channels)
    if block_h * block_c > CHUNKED_VALUE_ROW:
        constants = tiling(num_edges, num_nodes, heads, num_points,
                           channels, FOURIER_ROW_ELEMENTS,
                           min_edges=FOURIER_MIN_EDGES)
        chunk = constants.pop('BLOCK_D')
    else:
        chunk = max(1, min(block_r, FOURIER_ROW_ELEMENTS // block_h))
        constants = dict(BLOCK_H=block_h, BLOCK_C=block_c, **edge_tiling(
            num_edges, num_nodes, block_h * max(chunk, block_c),
            ROW_ELEMENTS // 2, min_edges))
    return dict(constants, BLOCK_R=chunk, CHUNKS=block_r // chunk)


#: The widest gathered rows (:math:`B_H \times \max(B_C, B_D)` floats) at
#: which the per-source kernel loads the next tile's targets ahead: at 8
#: heads x 8 (R = 64) and 1 x 64 (R = 128) it builds without spill
#: (``benchmarks.gpu_compile``); wider rows load them in the tile.
PREFETCH_ROW = 64


def prefetches_targets(constants: dict) -> bool:
    r"""Whether the per-source kernel with random features loads the next
    tile's targets ahead (``PREFETCH``): its rows of :math:`B_H \times
    \max(B_C, B_D)` floats are at most :data:`PREFETCH_ROW`."""
    return constants['BLOCK_H'] * max(constants['BLOCK_C'],
                                      constants['BLOCK_D']) <= PREFETCH_ROW
