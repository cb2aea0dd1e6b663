r"""Dot-product kernel attention in one fused pass per neighbourhood, for
:class:`~ikgat.IKTransformerConv`.

:func:`fused_transformer_attention` computes, from node tables
:math:`U` :math:`(N_t, H, D)` (targets), :math:`V` :math:`(N_s, H, D)`
(sources), source terms :math:`s` :math:`(N_s, H)` and values :math:`X`
:math:`(N_s, H, C)`,

.. math::
    t_{e,h} = c\, U_{i,h}^\top V_{j,h}, \qquad
    \ell_{e,h} = \lambda(t_{e,h}) + s_{j,h}, \qquad
    \mathrm{out}_{i,h} = \sum_{e = (j \to i)} \tilde\alpha_{e,h} X_{j,h},
    \qquad \alpha_{e,h} = \frac{\exp(\ell_{e,h} - m_{i,h})}
    {\sum_{e' \to i} \exp(\ell_{e',h} - m_{i,h}) + 10^{-16}},

for every edge :math:`e = (j \to i)` and head :math:`h`, with the *link*
:math:`\lambda` one of

* ``'identity'``: :math:`\lambda(t) = t`, the dot-product logit itself
  (the RBF kernel's :math:`\tilde q^\top\tilde k / l^2` with :math:`U =
  \tilde q`, :math:`V = \tilde k`, :math:`c = 1/l^2`; the exponential
  kernel's :math:`c\,\tilde q^\top\tilde k`);
* ``'log_square'``: :math:`\lambda(t) = \log(t^2 + \epsilon)`, the
  random-feature kernels' log-similarity with :math:`U = \phi(\tilde q)`,
  :math:`V = \phi(\tilde k)` (:math:`D = 2R`) and :math:`c = 1/(m^2 R)`,
  so that :math:`t = f(\tilde q_i, \tilde k_j)`.

The kernels give the tables, link and :math:`c`
(:meth:`ikgat.kernels.Kernel.pair_feature_map`), so that
:math:`\lambda(t) = ` :meth:`~ikgat.kernels.Kernel.reduced_pair_log_similarity`.
The tables are :math:`O(N H D)`; autograd carries their gradients back to
the queries, keys and spectral points.  The random-feature kernels give
the queries, keys and stacked spectral points instead
(:attr:`~ikgat.kernels.base.PairFeatureMap.points`): the kernels of
:mod:`ikgat.ops.transformer_fourier` then compute :math:`\phi` in
registers, and the operator returns the points' gradient too.  On CUDA the
layers make the tables themselves (:mod:`ikgat.ops.node_tables`), which is
faster there.  Attention dropout,
:math:`\tilde\alpha_e = \mu_e \alpha_e / (1 - p)`, is the one of
:mod:`ikgat.ops.gat_attention` (both from :mod:`ikgat.ops.attention_steps`):
a Philox draw keyed by a seed and the CSR position :math:`e H + h`, drawn
again in each backward kernel and never stored; the softmax sums are those
of :math:`\alpha`.

**Programs.**  Each kernel runs one program per node and block of
:math:`B_H` heads (all heads while :math:`B_H \max(D, C)` fits
:data:`TABLE_ROW_ELEMENTS`: one program per node in the common case, see
:func:`table_tiling`); per edge of a tile it loads the edge's indices once and
gathers one contiguous row of :math:`B_H` heads of each table, so that the
tiles are :math:`B_E \times B_H \times B_D` (and :math:`\times B_C`).
One program per node and head, as first written, made :math:`N H` programs
of a few edges each, bound by the latency of their dependent loads.

**Forward** (per target :math:`i`): tiles of :math:`B_E` in-edges gather
:math:`V_j` and :math:`X_j`; an online softmax
(FlashAttention's recurrence, shared with :mod:`ikgat.ops.gat_attention`
in :mod:`ikgat.ops.attention_steps`)
accumulates :math:`\sum \exp(\ell - m) \mu X_j`; the row maximum :math:`m`
and :math:`Z = l + 10^{-16}` are saved, :math:`2 N_t H` floats (with
spectral points also each edge's :math:`t`, :math:`E H` floats, which both
backward kernels read: :mod:`ikgat.ops.transformer_fourier`).

**Backward.**  With :math:`G = \partial L/\partial\mathrm{out}`,
:math:`\partial L/\partial\tilde\alpha_e = G_i^\top X_j` and, as in
FlashAttention, :math:`D_{i,h} = G_{i,h}^\top\mathrm{out}_{i,h}` (one
:math:`N_t \times H` reduction in torch):

.. math::
    \frac{\partial L}{\partial \ell_e} = \alpha_e\Big(\frac{\mu_e}{1-p}
    G_i^\top X_j - D_i\Big), \qquad
    \frac{\partial L}{\partial t_e} = \lambda'(t_e)
    \frac{\partial L}{\partial \ell_e}, \quad \lambda'(t) = 1 \text{ or }
    \frac{2t}{t^2 + \epsilon},

1. per target and block of heads, over its in-edges (CSR):
   :math:`\partial L/\partial U_i = c \sum_e \partial L/\partial t_e\,
   V_j`;
2. per source and block of heads, over its out-edges (the CSC order of
   :func:`~ikgat.ops.csr.prepare_csr`):
   :math:`\partial L/\partial V_j = c \sum_e \partial L/\partial t_e\,
   U_i`, :math:`\partial L/\partial s_j = \sum_e \partial L/\partial
   \ell_e` and :math:`\partial L/\partial X_j = \sum_e \tilde\alpha_e G_i`.

Each pass recomputes :math:`t` (with spectral points reads it) and
:math:`\alpha` from the tables and the saved row statistics; every gradient
is written once, without atomics (deterministic).  The backward pass is not
itself differentiable.

**Registered operators** (:mod:`ikgat.ops.registration`), as in
:mod:`ikgat.ops.gat_attention`: ``ikgat::fused_transformer_attention`` and
its ``_backward``, each with the Triton kernels
(:mod:`ikgat.ops.transformer_attention_triton`,
:mod:`ikgat.ops.transformer_fourier`; compiled for sm_80 and sm_90 without
spill by ``benchmarks.gpu_compile``) and a PyTorch implementation on
:math:`(E, H)` tensors (:math:`E \times H \times D` temporaries; its
dropout mask comes from a :class:`torch.Generator` seeded with the seed's
value).
"""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

import ikgat.ops.transformer_fourier as transformer_fourier
from ikgat.deprecation import moved_names
from ikgat.ops.attention_steps import (
    keep_scale,
    torch_keep,
    torch_softmax_aggregate,
)
from ikgat.ops.csr import AttentionCSR, csr_for
from ikgat.ops.dtypes import accumulation_dtype
from ikgat.ops.fourier_features import angle_product, fourier_features
from ikgat.ops.registration import CSR_ARGS, input_gradients, register_operator
from ikgat.ops.runtime import (
    ATTENTION_SWITCH,
    dropout_seed,
    launch,
    next_power_of_2,
    resolve_use_triton,
)
from ikgat.ops.tiling import grid
from ikgat.ops.transformer_attention_triton import (
    backward_dst_kernel,
    backward_src_kernel,
    forward_kernel,
    table_tiling,
)
from ikgat.ops.transformer_fourier import fourier_tiling, prefetches_targets

IDENTITY, LOG_SQUARE = 'identity', 'log_square'
#: The links :math:`\lambda` of the logit (see the module docstring):
#: ``'identity'`` and ``'log_square'``.
LINKS = (IDENTITY, LOG_SQUARE)

# ---------------------------------------------------------------------------
# The registered operators (see the module docstring); 'use_triton' picks
# the Triton kernels, else the PyTorch implementation below.

_OPTIONS = 'float scale, float eps, float dropout, bool log_square'
_FORWARD_SCHEMA = (
    f'(Tensor u, Tensor v, Tensor? points, Tensor s, Tensor values, '
    f'{CSR_ARGS}, '
    f'Tensor seed, {_OPTIONS}, bool use_triton) '
    f'-> (Tensor, Tensor, Tensor, Tensor)')
_BACKWARD_SCHEMA = (
    f'(Tensor grad_out, Tensor u, Tensor v, Tensor? points, Tensor s, '
    f'Tensor values, {CSR_ARGS}, Tensor seed, Tensor out, '
    f'Tensor row_max, Tensor row_den, Tensor t, {_OPTIONS}, '
    f'bool use_triton, bool[] needs) '
    f'-> (Tensor, Tensor, Tensor, Tensor, Tensor)')


def _tiling(num_edges: int, num_nodes: int, heads: int, width: int,
            channels: int, points: Optional[Tensor],
            forward: bool = False) -> dict:
    r""":func:`table_tiling` of the tables' kernels (the forward one's with
    :obj:`forward`), or with spectral points :func:`fourier_tiling`."""
    if points is None:
        return table_tiling(num_edges, num_nodes, heads, width, channels,
                            forward)
    return fourier_tiling(num_edges, num_nodes, heads, points.size(2),
                          channels)


def _forward(u, v, points, s, values, rowptr, src, dst, colptr, csc_edge,
             csc_dst, seed, scale, eps, dropout, log_square, use_triton):
    num_dst, heads, channels = rowptr.numel() - 1, values.size(1), \
        values.size(2)
    if not use_triton:
        if points is not None:
            u, v = fourier_features(u, points), fourier_features(v, points)
        out, row_max, row_den, t = _torch_forward(
            u, v, s, values, src, dst, seed, num_dst, scale, eps, dropout,
            log_square)
        return out, row_max, row_den, t if points is not None else \
            t.new_empty(0, heads)
    out = values.new_empty(num_dst, heads, channels)
    row_max = values.new_empty(num_dst, heads,
                               dtype=accumulation_dtype(values.dtype))
    row_den = torch.empty_like(row_max)
    # The edges' t (CSR order), which both backward kernels read:
    t = row_max.new_empty(src.numel() if points is not None else 0, heads)
    if num_dst == 0 or heads == 0:
        return out, row_max, row_den, t
    constants = _tiling(src.numel(), num_dst, heads, u.size(2), channels,
                        points, forward=True)
    common = dict(HAS_DROPOUT=dropout > 0.0, switch=ATTENTION_SWITCH,
                  **constants)
    options = (seed, scale, eps, dropout, keep_scale(dropout), heads)
    if points is None:
        launch(forward_kernel, grid(num_dst, heads, constants),
               u, v, s, values, rowptr, src, out, row_max, row_den,
               *options, u.size(2), channels, LOG_SQUARE=log_square,
               **common)
    else:
        launch(transformer_fourier.forward_kernel,
               grid(num_dst, heads, constants), u, v, points, s, values,
               rowptr, src, out, row_max, row_den, t, *options, u.size(2),
               points.size(2), channels, points.size(0), **common)
    return out, row_max, row_den, t


def _forward_fake(u, v, points, s, values, rowptr, src, dst, colptr,
                  csc_edge, csc_dst, seed, scale, eps, dropout, log_square,
                  use_triton):
    num_dst, heads = rowptr.size(0) - 1, values.size(1)
    row_max = values.new_empty(num_dst, heads,
                               dtype=accumulation_dtype(values.dtype))
    return (values.new_empty(num_dst, heads, values.size(2)), row_max,
            torch.empty_like(row_max),
            row_max.new_empty(src.size(0) if points is not None else 0,
                              heads))


def _backward(grad_out, u, v, points, s, values, rowptr, src, dst, colptr,
              csc_edge, csc_dst, seed, out, row_max, row_den, t, scale, eps,
              dropout, log_square, use_triton, needs):
    need_u, need_v, need_points, need_s, need_values = needs
    # D_i = <G_i, out_i> (FlashAttention's D):
    dtype = accumulation_dtype(values.dtype)
    delta = (grad_out.to(dtype) * out.to(dtype)).sum(-1)
    if not use_triton:
        return _torch_backward(grad_out, u, v, points, s, values, src, dst,
                               seed, row_max, row_den, delta, scale, eps,
                               dropout, log_square, need_points)
    grad_out = grad_out.contiguous()
    num_dst, heads, channels = rowptr.numel() - 1, values.size(1), \
        values.size(2)
    num_src, num_edges, width = values.size(0), src.numel(), u.size(2)
    grad_u, grad_v = torch.empty_like(u), torch.empty_like(v)
    grad_s, grad_values = torch.empty_like(s), torch.empty_like(values)
    common = dict(HAS_DROPOUT=dropout > 0.0, switch=ATTENTION_SWITCH)
    options = (seed, scale, eps, dropout, keep_scale(dropout), heads, width)
    if points is None:
        kernels = (backward_dst_kernel, backward_src_kernel)
        common.update(LOG_SQUARE=log_square)
        options += (channels, )
    else:
        kernels = (transformer_fourier.backward_dst_kernel,
                   transformer_fourier.backward_src_kernel)
        store = need_points
        common.update(STORE_ANGLES=store, BLOCK_D=next_power_of_2(width))
        options += (points.size(2), channels, points.size(0))
        # dL/da of both sides' angles, (N, H, m, R), for the points':
        angle_shape = (heads, points.size(0), points.size(2)) if store \
            else (0, 0, 0)
        angle_dtype = accumulation_dtype(u.dtype)
        grad_angles_u = u.new_empty(num_dst if store else 0, *angle_shape,
                                    dtype=angle_dtype)
        grad_angles_v = v.new_empty(num_src if store else 0, *angle_shape,
                                    dtype=angle_dtype)
    if (need_u or need_points) and num_dst > 0 and heads > 0:
        constants = _tiling(num_edges, num_dst, heads, width, channels,
                            points)
        extra = () if points is None else (grad_angles_u, t)
        launch(kernels[0], grid(num_dst, heads, constants),
               u, v, *([] if points is None else [points]), s, values,
               rowptr, src, row_max, row_den, delta, grad_out, grad_u,
               *extra, *options, **constants, **common)
    if (need_v or need_points or need_s or need_values) and num_src > 0 \
            and heads > 0:
        constants = _tiling(num_edges, num_src, heads, width, channels,
                            points)
        extra = ()
        if points is not None:
            extra = (grad_angles_v, t)
            constants['PREFETCH'] = prefetches_targets(
                dict(constants, BLOCK_D=common['BLOCK_D']))
        launch(kernels[1], grid(num_src, heads, constants),
               u, v, *([] if points is None else [points]), s, values,
               colptr, csc_edge, csc_dst, row_max, row_den, delta, grad_out,
               grad_v, grad_s, grad_values, *extra, *options, **constants,
               **common)
    grad_points = _points_gradient(points, u, v, grad_angles_u,
                                   grad_angles_v) if (
        points is not None and need_points) else u.new_empty(0)
    return grad_u, grad_v, grad_points, grad_s, grad_values


def _points_gradient(points: Tensor, u: Tensor, v: Tensor,
                     grad_angles_u: Tensor, grad_angles_v: Tensor) -> Tensor:
    r""":math:`\partial L/\partial W_s = \sum_n (\partial L/\partial
    a_{n,s})\, x_n^\top` over the queries and the keys, from the angles'
    gradients :math:`(N, H, m, R)`: one product per side
    (:func:`angle_product`, as one matrix product off the CPU: CUDA, and
    ``meta`` standing for it)."""
    dtype = accumulation_dtype(points.dtype)
    one_product = points.device.type != 'cpu'
    grad = angle_product(grad_angles_u.to(dtype), u.to(dtype), one_product)
    grad = grad + angle_product(grad_angles_v.to(dtype), v.to(dtype),
                                one_product)
    # Contiguous, as the fake implementation declares:
    return grad.to(points.dtype).contiguous()


def _backward_fake(grad_out, u, v, points, s, values, rowptr, src, dst,
                   colptr, csc_edge, csc_dst, seed, out, row_max, row_den, t,
                   scale, eps, dropout, log_square, use_triton, needs):
    return (torch.empty_like(u), torch.empty_like(v),
            u.new_empty(0) if points is None or not needs[2] else
            torch.empty_like(points), torch.empty_like(s),
            torch.empty_like(values))


def _setup_context(ctx, inputs, output):
    (u, v, points, s, values, *index, seed, scale, eps, dropout, log_square,
     use_triton) = inputs
    out, row_max, row_den, t = output
    ctx.save_for_backward(u, v, points, s, values, *index, seed, out,
                          row_max, row_den, t)
    ctx.options = (scale, eps, dropout, log_square, use_triton)
    ctx.mark_non_differentiable(row_max, row_den, t)


def _autograd_backward(ctx, grad_out, _grad_max, _grad_den, _grad_t):
    (u, v, points, s, values, *index, seed, out, row_max, row_den,
     t) = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[:5])
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    grads = _backward_op(grad_out, u, v, points, s, values, *index, seed,
                         out, row_max, row_den, t, *ctx.options, needs)
    return input_gradients(grads, ctx.needs_input_grad)


_forward_op, _backward_op = register_operator(
    'fused_transformer_attention', _forward, _forward_fake, _FORWARD_SCHEMA,
    _backward, _backward_fake, _BACKWARD_SCHEMA, _setup_context,
    _autograd_backward)


# ---------------------------------------------------------------------------
# The PyTorch implementation of both operators: the same formulas on (E, H)
# tensors in CSR order (with points, on the tables phi(u), phi(v)).


def _torch_logits(u, v, s, src, dst, scale, eps, log_square, dtype):
    # The logits, their slopes in t and t itself, [E, H] each.
    t = scale * (u.to(dtype)[dst] * v.to(dtype)[src]).sum(-1)
    if log_square:
        square = t * t + eps
        return square.log() + s.to(dtype)[src], 2 * t / square, t
    return t + s.to(dtype)[src], torch.ones_like(t), t


def _torch_forward(u, v, s, values, src, dst, seed, num_dst, scale, eps,
                   dropout, log_square):
    src, dst = src.long(), dst.long()
    dtype = accumulation_dtype(values.dtype)
    logit, _, t = _torch_logits(u, v, s, src, dst, scale, eps, log_square,
                                dtype)
    out, _, row_max, row_den = torch_softmax_aggregate(
        logit, values, src, dst, num_dst, seed, dropout)
    return out.to(values.dtype), row_max, row_den, t


def _torch_angle_gradients(x: Tensor, points: Tensor,
                           grad_table: Tensor) -> Tuple[Tensor, Tensor]:
    r"""From :math:`\partial L/\partial\phi(x)` :math:`(N, H, 2R)`: the
    angles' :math:`\partial L/\partial a_s = \cos a_s \odot g_{\sin} -
    \sin a_s \odot g_{\cos}` :math:`(N, H, m, R)` and :math:`\partial
    L/\partial x = \sum_s W_s^\top \partial L/\partial a_s` (the
    formulas of :mod:`ikgat.ops.transformer_fourier`)."""
    angle = torch.einsum('nhd,shrd->nhsr', x, points)
    grad_cos, grad_sin = grad_table.unsqueeze(2).chunk(2, dim=-1)
    grad_angle = angle.cos() * grad_sin - angle.sin() * grad_cos
    # Contiguous, as the fake implementation declares:
    return (torch.einsum('nhsr,shrd->nhd', grad_angle, points).contiguous(),
            grad_angle)


def _torch_backward(grad_out, u, v, points, s, values, src, dst, seed,
                    row_max, row_den, delta, scale, eps, dropout,
                    log_square, need_points):
    src, dst = src.long(), dst.long()
    dtype = accumulation_dtype(values.dtype)
    tables = (u, v) if points is None else (fourier_features(u, points),
                                            fourier_features(v, points))
    logit, slope, _ = _torch_logits(*tables, s, src, dst, scale, eps,
                                    log_square, dtype)
    alpha = (logit - row_max.to(dtype)[dst]).exp() / row_den.to(dtype)[dst]
    keep = torch_keep(seed, logit.shape, dropout, logit).to(dtype)
    g = grad_out.to(dtype)[dst]  # [E, H, C]
    d_logit = alpha * (keep * (g * values.to(dtype)[src]).sum(-1)
                       - delta.to(dtype)[dst])
    d_t = (d_logit * slope * scale).unsqueeze(-1)

    def scatter(index, rows, like):
        return torch.zeros(like.shape, dtype=dtype, device=like.device
                           ).index_add_(0, index, rows).to(like.dtype)

    grad_u = scatter(dst, d_t * tables[1].to(dtype)[src], tables[0])
    grad_v = scatter(src, d_t * tables[0].to(dtype)[dst], tables[1])
    grad_points = u.new_empty(0)
    if points is not None:
        grad_u, grad_angles_u = _torch_angle_gradients(u, points, grad_u)
        grad_v, grad_angles_v = _torch_angle_gradients(v, points, grad_v)
        if need_points:
            grad_points = _points_gradient(points, u, v, grad_angles_u,
                                           grad_angles_v)
    return (grad_u, grad_v, grad_points, scatter(src, d_logit, s),
            scatter(src, (keep * alpha).unsqueeze(-1) * g, values))


def fused_transformer_attention(
    u: Tensor,
    v: Tensor,
    s: Tensor,
    values: Tensor,
    edge_index_or_csr: Union[Tensor, AttentionCSR],
    num_dst: int,
    link: str = IDENTITY,
    scale: float = 1.0,
    eps: float = 0.0,
    dropout: float = 0.0,
    use_triton: Optional[bool] = None,
    points: Optional[Tensor] = None,
) -> Tensor:
    r"""Dot-product kernel attention in one fused pass per neighbourhood:
    returns :math:`\mathrm{out}` of shape :math:`(N_t, H, C)` (see the
    module docstring for the formula).

    Args:
        u (torch.Tensor): Target table :math:`U`, :math:`(N_t, H, D)`.
        v (torch.Tensor): Source table :math:`V`, :math:`(N_s, H, D)`.
        s (torch.Tensor): Source terms :math:`s`, :math:`(N_s, H)`.
        values (torch.Tensor): Values :math:`X`, :math:`(N_s, H, C)`.
        edge_index_or_csr (torch.Tensor or AttentionCSR): Edge indices
            :math:`(2, E)`, or their
            :func:`~ikgat.ops.csr.prepare_csr`.
        num_dst (int): The number of targets :math:`N_t`.
        link (str, optional): :math:`\lambda`, one of :data:`LINKS`.
            (default: :obj:`'identity'`)
        scale (float, optional): :math:`c`. (default: :obj:`1.0`)
        eps (float, optional): :math:`\epsilon` of ``'log_square'``,
            positive there (unread by ``'identity'``).
            (default: :obj:`0.0`)
        dropout (float, optional): Attention dropout probability :math:`p`
            (pass :obj:`0` in evaluation). (default: :obj:`0`)
        use_triton (bool, optional): The Triton kernels (:obj:`True`) or the
            PyTorch implementation (:obj:`False`); by default the kernels on
            CUDA and ``meta`` tensors, and on CPU when
            ``TRITON_INTERPRET=1``. (default: :obj:`None`)
        points (torch.Tensor, optional): Stacked sets of spectral points
            :math:`(m, H, R, D)`: :obj:`u` and :obj:`v` are then the
            queries and keys themselves and the tables their random
            features :math:`\phi(u)`, :math:`\phi(v)`, computed inside
            the kernels (:mod:`ikgat.ops.transformer_fourier`); the link
            must be ``'log_square'``. (default: :obj:`None`)
    """
    if link not in LINKS:
        raise ValueError(f"fused_transformer_attention: unknown 'link' "
                         f"{link!r}; choose one of {list(LINKS)}")
    num_dst = int(num_dst)
    heads = values.size(1) if values.dim() == 3 else -1
    if (u.dim() != 3 or v.dim() != 3 or values.dim() != 3
            or u.shape[1:] != v.shape[1:] or u.size(0) != num_dst
            or v.shape[:2] != values.shape[:2] or s.shape != v.shape[:2]):
        raise ValueError(f"fused_transformer_attention: expected u (N_dst="
                         f"{num_dst}, H, D), v (N_src, H, D), s (N_src, H) "
                         f"and values (N_src, H, C) (got u "
                         f"{tuple(u.shape)}, v {tuple(v.shape)}, s "
                         f"{tuple(s.shape)}, values {tuple(values.shape)}, "
                         f"H = {heads})")
    if points is not None and (
            points.dim() != 4 or points.size(1) != u.size(1)
            or points.size(3) != u.size(2) or link != LOG_SQUARE):
        raise ValueError(f"fused_transformer_attention: 'points' must be "
                         f"(m, H, R, D) for u {tuple(u.shape)}, with link "
                         f"{LOG_SQUARE!r} (got {tuple(points.shape)}, link "
                         f"{link!r})")
    if points is not None and (points.dtype != u.dtype
                               or points.device != u.device):
        raise ValueError(f"fused_transformer_attention: 'points' must have "
                         f"u's dtype and device ({u.dtype}, {u.device}; got "
                         f"{points.dtype}, {points.device})")
    if link == LOG_SQUARE and not eps > 0:
        raise ValueError(f"fused_transformer_attention: 'eps' must be "
                         f"positive with link {LOG_SQUARE!r} (log(t^2 + "
                         f"eps) at t = 0; got {eps!r})")
    csr = csr_for('fused_transformer_attention', edge_index_or_csr,
                  v.size(0), num_dst, self_loops_allowed=False)
    device = values.device
    owner = 'fused_transformer_attention'
    use_triton = resolve_use_triton(owner, use_triton, device)
    seed = dropout_seed(owner, dropout, device, csr.rowptr)
    if points is not None:
        points = points.contiguous()
    out, _, _, _ = _forward_op(
        u.contiguous(), v.contiguous(), points, s.contiguous(),
        values.contiguous(),
        csr.rowptr, csr.src, csr.dst, csr.colptr, csr.csc_edge, csr.csc_dst,
        seed, float(scale), float(eps), float(dropout), link == LOG_SQUARE,
        bool(use_triton))
    return out


# The tiling constants and functions that ikgat.nn.triton_transformer (now
# this module) held, for one release:
__getattr__ = moved_names(__name__, {
    'ROW_ELEMENTS': ('ikgat.ops.tiling', 'ROW_ELEMENTS'),
    'head_block': ('ikgat.ops.tiling', 'head_block'),
    'tiling': ('ikgat.ops.tiling', 'tiling'),
    'TABLE_ROW_ELEMENTS': ('ikgat.ops.transformer_attention_triton',
                           'TABLE_ROW_ELEMENTS'),
    'CHUNKED_TILES': ('ikgat.ops.transformer_fourier', 'CHUNKED_TILES')})
