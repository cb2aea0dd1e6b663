r"""One fused pass over each neighbourhood: logit, online softmax and
aggregation of kernel attention in Triton.

:func:`fused_attention` computes, from the packed node scores of
:class:`~ikgat.IKGATConv` (see :mod:`ikgat.ops.edge_softmax` for the packing),

.. math::
    \mathrm{out}_{i,h,:} = \sum_{e = (j \to i)} \alpha_{e,h}\, x_{j,h,:},
    \qquad \alpha_{e,h} = \frac{\exp(\ell_{e,h} - m_{i,h})}
    {\sum_{e' \to i} \exp(\ell_{e',h} - m_{i,h}) + 10^{-16}},

with the logit :math:`\ell_{e,h}` of
:func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` (the slope picked by the
sign of the gate), i.e. what ``kernel_edge_softmax`` followed by
:func:`~ikgat.ops.aggregation.attention_aggregate` compute, without an
:math:`E \times H` logit or weight tensor in the forward pass and without an
:math:`E \times H \times C` tensor anywhere.

**Layout.**  The edges are sorted by target once (:func:`prepare_csr`,
which also sorts them by source for the backward pass); nothing after that
preparation synchronises with the host.

**Forward** (one program per target :math:`i`, all heads at once, tiles of
:math:`B_E` edges :math:`\times` heads :math:`\times` channels): each tile's
logits come from the node terms; an online softmax keeps the running maximum
:math:`m` and sum :math:`l` per head and rescales the float32 accumulator of
:math:`\sum \exp(\ell - m) x_j` whenever the maximum grows (FlashAttention's
recurrence: with :math:`m' = \max(m, \max_{\text{tile}} \ell)`,
:math:`l \leftarrow l e^{m - m'} + \sum_{\text{tile}} e^{\ell - m'}`, the
accumulator likewise), so that at the end :math:`m` is the group maximum,
:math:`l` the sum of PyG's softmax, and :math:`\mathrm{out} =
\mathrm{acc}/(l + 10^{-16})` exactly the formula above.  The maximum and
:math:`Z = l + 10^{-16}` are saved, :math:`2 N_t H` floats.

**Backward.**  With :math:`G = \partial L/\partial\mathrm{out}` and an
optional :math:`g = \partial L/\partial\alpha` (when the weights were
returned), :math:`\partial L/\partial\alpha_{e,h} = \langle G_{i,h},
x_{j,h}\rangle + g_{e,h}` and, as derived in :mod:`ikgat.ops.edge_softmax`,

.. math::
    \frac{\partial L}{\partial \ell_{e,h}} = \alpha_{e,h}\Big(
    \frac{\partial L}{\partial \alpha_{e,h}} - D_{i,h}\Big), \qquad
    D_{i,h} = \sum_{e' \to i} \alpha_{e',h} \frac{\partial L}
    {\partial \alpha_{e',h}} = \langle G_{i,h}, \mathrm{out}_{i,h}\rangle
    + \sum_{e' \to i} \alpha_{e',h}\, g_{e',h},

because :math:`\sum_{e'} \alpha_{e'} x_{j'} = \mathrm{out}_i` (the
:math:`D` of FlashAttention's backward).  :math:`D` is one
:math:`N_t \times H` reduction in torch.  Then

1. one program per *source* :math:`j`, over its out-edges (the CSC order
   of :func:`prepare_csr`): recomputes :math:`\ell` and :math:`\alpha =
   \exp(\ell - m_i)/Z_i` from the node terms, accumulates
   :math:`\partial L/\partial x_j = \sum_e \alpha_e G_i` and the per-slope
   sums :math:`\partial L/\partial s^s_{j,t}` in registers and writes them
   once: no atomics, deterministic.  When the target scores or the edge gate
   need a gradient it also writes :math:`\partial L/\partial \ell` (an
   :math:`E \times H` buffer, 4 bytes per edge and head, cheaper than
   gathering :math:`x_j` a second time);
2. only then, one program per target, over its in-edges: the per-slope sums
   :math:`\partial L/\partial s^t_{i,t}` and :math:`\partial L/\partial
   \epsilon_e = c_t\, \partial L/\partial \ell_e`.

The gate slots get zero gradient (the slope choice is piecewise constant).
The backward pass is not itself differentiable.

**Precision.**  Scores, features and edge gates may be float16 or bfloat16:
they are loaded, upcast, and every logit, exponential and sum is float32;
the output takes the promoted dtype of the inputs, the gradients the dtype
of their input.

**Attention dropout** (``dropout`` :math:`= p > 0`), as
:func:`torch.nn.functional.dropout` on :math:`\alpha`: the aggregation uses
:math:`\tilde\alpha_e = m_e \alpha_e / (1 - p)` with
:math:`m_e \sim \mathrm{Bernoulli}(1 - p)` per edge and head, while the
softmax sums stay those of :math:`\alpha`.  The mask is never stored: a
counter-based generator (Philox, ``tl.rand``) keyed by a seed and the
position :math:`e H + h` (:math:`e` the CSR position) draws it again in
each kernel, as Triton's low-memory dropout does
(:mod:`ikgat.ops.attention_steps`, shared with
:mod:`ikgat.ops.transformer_attention`).  The seed is drawn from
torch's generator on the device for every call (no host read;
:func:`torch.manual_seed` repeats a run).  With :math:`G`, :math:`g` the
gradients of :math:`\mathrm{out}` and of the returned (dropped) weights,
:math:`\partial L/\partial\tilde\alpha_e = \langle G_i, x_j\rangle + g_e`,
:math:`\partial L/\partial\alpha_e = \frac{m_e}{1-p}\,\partial L/
\partial\tilde\alpha_e`, and :math:`D_i = \sum_e \alpha_e\,\partial L/
\partial\alpha_e = \langle G_i, \mathrm{out}_i\rangle + \sum_e
\tilde\alpha_e g_e` keeps its form, because :math:`\mathrm{out}_i =
\sum_e \tilde\alpha_e x_j`; the per-source kernel then accumulates
:math:`\partial L/\partial x_j = \sum_e \tilde\alpha_e G_i` and
:math:`\partial L/\partial\ell_e = \alpha_e(\frac{m_e}{1-p}\,\partial L/
\partial\tilde\alpha_e - D_i)`.

Returned attention weights are supported
(:obj:`return_attention_weights=True`, one more :math:`E \times H` pass after
the forward; the dropped weights, as GATConv returns them); edge features
enter as the edge gate :math:`\epsilon`.

**Registered operators** (:mod:`ikgat.ops.registration`):
``ikgat::fused_attention`` and ``ikgat::fused_attention_backward``.  Each
has two implementations: the Triton kernels
(:mod:`ikgat.ops.gat_attention_triton`, run by Triton's interpreter on CPU
tensors under ``TRITON_INTERPRET=1``: :mod:`ikgat.ops.runtime`), and a
PyTorch one on :math:`(E, H)` tensors (with :math:`E \times H \times C`
temporaries) for CPU tensors under :func:`torch.compile`, whose dropout
mask comes from a :class:`torch.Generator` seeded with the seed's value.
On the ``meta`` device the fake implementations run: a meta run shows the
allocations (and the absence of host reads) of a CUDA run.
"""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from ikgat.ops.attention_steps import (
    keep_scale,
    torch_keep,
    torch_softmax_aggregate,
)
from ikgat.ops.csr import (  # prepare_csr: also importable from here
    AttentionCSR,
    csr_for,
    prepare_csr,  # noqa: F401
)
from ikgat.ops.edge_softmax import check_scores
from ikgat.ops.gat_attention_triton import (
    alpha_kernel,
    backward_dst_kernel,
    backward_src_kernel,
    forward_kernel,
)
from ikgat.ops.registration import CSR_ARGS, input_gradients, register_operator
from ikgat.ops.runtime import (
    ATTENTION_SWITCH,
    dropout_seed,
    launch,
    next_power_of_2,
    resolve_use_triton,
)
from ikgat.ops.tiling import TILE_ELEMENTS, edge_tiling

# ---------------------------------------------------------------------------
# Launch and registration: 'use_triton' picks the Triton kernels, else the
# PyTorch implementation below.

_FORWARD_SCHEMA = (
    '(Tensor score_src, Tensor score_dst, Tensor x_src, Tensor? edge_gate, '
    f'{CSR_ARGS}, Tensor seed, float negative_slope, float dropout, '
    'bool broadcast, bool need_alpha, bool use_triton) '
    '-> (Tensor, Tensor, Tensor, Tensor)')
_BACKWARD_SCHEMA = (
    '(Tensor grad_out, Tensor? grad_alpha, Tensor score_src, '
    'Tensor score_dst, Tensor x_src, Tensor? edge_gate, '
    f'{CSR_ARGS}, Tensor seed, Tensor out, Tensor group_max, '
    'Tensor group_den, Tensor alpha, float negative_slope, float dropout, '
    'bool broadcast, bool need_alpha, bool use_triton, bool[] needs) '
    '-> (Tensor, Tensor, Tensor, Tensor)')


def _attention_forward(score_src, score_dst, x_src, edge_gate, rowptr, src,
                       dst, colptr, csc_edge, csc_dst, seed, negative_slope,
                       dropout, broadcast, need_alpha, use_triton):
    num_dst, heads, channels = rowptr.numel() - 1, x_src.size(1), x_src.size(2)
    num_edges = src.numel()
    dtype = torch.promote_types(x_src.dtype, score_src.dtype)
    if not use_triton:
        return _torch_forward(score_src, score_dst, x_src, edge_gate, src,
                              dst, seed, num_dst, negative_slope, dropout,
                              broadcast, need_alpha, dtype)
    out = x_src.new_empty(num_dst, heads, channels, dtype=dtype)
    group_max = x_src.new_empty(num_dst, heads, dtype=torch.float32)
    group_den = torch.empty_like(group_max)
    alpha = x_src.new_empty(num_edges if need_alpha else 0, heads,
                            dtype=torch.float32)
    if num_dst == 0:
        return out, alpha, group_max, group_den
    block_h, block_c = next_power_of_2(heads), next_power_of_2(channels)
    has_gate = edge_gate is not None
    gate_arg = edge_gate if has_gate else score_src  # unused pointer
    common = dict(BROADCAST=int(broadcast), HAS_GATE=has_gate,
                  HAS_DROPOUT=dropout > 0.0, BLOCK_H=block_h,
                  switch=ATTENTION_SWITCH)
    launch(forward_kernel, (num_dst, ),
           score_src, score_dst, x_src, gate_arg, rowptr, src, out, group_max,
           group_den, seed, negative_slope, dropout, keep_scale(dropout),
           heads, channels,
           BLOCK_C=block_c, **edge_tiling(num_edges, num_dst, block_h * block_c),
           **common)
    if need_alpha:
        launch(alpha_kernel, (num_dst, ),
               score_src, score_dst, gate_arg, rowptr, src, group_max,
               group_den, alpha, seed, negative_slope, dropout,
               keep_scale(dropout), heads,
               **edge_tiling(num_edges, num_dst, block_h, 2 * TILE_ELEMENTS),
               **common)
    return out, alpha, group_max, group_den


def _attention_forward_fake(score_src, score_dst, x_src, edge_gate, rowptr,
                            src, dst, colptr, csc_edge, csc_dst, seed,
                            negative_slope, dropout, broadcast, need_alpha,
                            use_triton):
    num_dst, heads = rowptr.size(0) - 1, x_src.size(1)
    dtype = torch.promote_types(x_src.dtype, score_src.dtype)
    group_max = x_src.new_empty(num_dst, heads, dtype=torch.float32)
    return (x_src.new_empty(num_dst, heads, x_src.size(2), dtype=dtype),
            x_src.new_empty(src.size(0) if need_alpha else 0, heads,
                            dtype=torch.float32),
            group_max, torch.empty_like(group_max))


def _attention_backward(grad_out, grad_alpha, score_src, score_dst, x_src,
                        edge_gate, rowptr, src, dst, colptr, csc_edge,
                        csc_dst, seed, out, group_max, group_den, alpha,
                        negative_slope, dropout, broadcast, need_alpha,
                        use_triton, needs):
    need_src, need_dst, need_x, need_gate = needs
    num_dst, heads, channels = rowptr.numel() - 1, x_src.size(1), x_src.size(2)
    num_src, num_edges = x_src.size(0), src.numel()
    # D_i = <G_i, out_i> (+ sum over the in-edges of a~ g); grad_out is read
    # through its strides (the expanded gradient of out.sum() is not
    # copied):
    delta = (grad_out.float() * out.float()).sum(-1)
    has_grad_alpha = need_alpha and grad_alpha is not None
    if has_grad_alpha:
        grad_alpha = grad_alpha.contiguous()
        delta.index_add_(0, dst.long(), alpha * grad_alpha.float())
    if not use_triton:
        return _torch_backward(grad_out, grad_alpha if has_grad_alpha
                               else None, score_src, score_dst, x_src,
                               edge_gate, src, dst, seed, group_max,
                               group_den, delta, negative_slope, dropout,
                               broadcast)
    has_gate = edge_gate is not None
    need_logit = need_dst or (need_gate and has_gate)
    grad_x = torch.empty_like(x_src)
    grad_src = torch.empty_like(score_src)
    grad_logit = x_src.new_empty(num_edges if need_logit else 0, heads,
                                 dtype=torch.float32)
    block_h, block_c = next_power_of_2(heads), next_power_of_2(channels)
    gate_arg = edge_gate if has_gate else score_src
    dummy = grad_logit if num_edges else group_max
    common = dict(BROADCAST=int(broadcast), HAS_GATE=has_gate,
                  BLOCK_H=block_h, switch=ATTENTION_SWITCH)
    if num_src > 0:
        launch(backward_src_kernel, (num_src, ),
               score_src, score_dst, x_src, gate_arg, colptr, csc_edge, csc_dst,
               group_max, group_den, delta, grad_out,
               grad_alpha if has_grad_alpha else dummy, grad_x, grad_src,
               grad_logit if need_logit else dummy, seed, negative_slope,
               dropout, keep_scale(dropout), heads, channels,
               *grad_out.stride(), HAS_DROPOUT=dropout > 0.0,
               HAS_GRAD_ALPHA=has_grad_alpha, STORE_GRAD_LOGIT=need_logit,
               BLOCK_C=block_c, **edge_tiling(num_edges, num_src, block_h * block_c),
               **common)
    # Per target and slope t in {0, 1}; the gate slot gets zero:
    partial = x_src.new_zeros(num_dst, heads, 2, dtype=torch.float32)
    grad_gate = (torch.empty_like(edge_gate) if has_gate
                 else x_src.new_empty(0))
    if need_logit and num_dst > 0:
        launch(backward_dst_kernel, (num_dst, ),
               score_src, score_dst, gate_arg, rowptr, src, grad_logit, partial,
               grad_gate if has_gate else dummy, negative_slope, heads,
               NEED_GATE_GRAD=need_gate and has_gate,
               **edge_tiling(num_edges, num_dst, block_h, 2 * TILE_ELEMENTS),
               **common)
    if broadcast:
        partial = partial.sum(0, keepdim=True)
    grad_dst = torch.cat([partial, partial.new_zeros(partial.size(0), heads,
                                                     1)], dim=-1)
    return grad_src, grad_dst.to(score_dst.dtype), grad_x, grad_gate


def _attention_backward_fake(grad_out, grad_alpha, score_src, score_dst,
                             x_src, edge_gate, rowptr, src, dst, colptr,
                             csc_edge, csc_dst, seed, out, group_max,
                             group_den, alpha, negative_slope, dropout,
                             broadcast, need_alpha, use_triton, needs):
    return (torch.empty_like(score_src), torch.empty_like(score_dst),
            torch.empty_like(x_src), torch.empty_like(edge_gate)
            if edge_gate is not None else x_src.new_empty(0))


def _setup_context(ctx, inputs, output):
    (score_src, score_dst, x_src, edge_gate, *index, seed, negative_slope,
     dropout, broadcast, need_alpha, use_triton) = inputs
    out, alpha, group_max, group_den = output
    ctx.save_for_backward(score_src, score_dst, x_src, edge_gate, *index,
                          seed, out, group_max, group_den, alpha)
    ctx.options = (negative_slope, dropout, broadcast, need_alpha,
                   use_triton)
    ctx.mark_non_differentiable(group_max, group_den)
    if not need_alpha:
        ctx.mark_non_differentiable(alpha)


def _autograd_backward(ctx, grad_out, grad_alpha, _grad_max, _grad_den):
    (score_src, score_dst, x_src, edge_gate, *index, seed, out, group_max,
     group_den, alpha) = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[:4])
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    grads = _backward_op(grad_out, grad_alpha, score_src, score_dst, x_src,
                         edge_gate, *index, seed, out, group_max, group_den,
                         alpha, *ctx.options, needs)
    return input_gradients(grads, ctx.needs_input_grad)


_forward_op, _backward_op = register_operator(
    'fused_attention', _attention_forward, _attention_forward_fake,
    _FORWARD_SCHEMA, _attention_backward, _attention_backward_fake,
    _BACKWARD_SCHEMA, _setup_context, _autograd_backward)


# ---------------------------------------------------------------------------
# The PyTorch implementation of both operators (use_triton=False: CPU
# tensors under torch.compile): the same formulas on (E, H) tensors in CSR
# order.  Attention dropout draws its mask from a torch.Generator seeded
# with the seed tensor's value, in the forward and again in the backward
# pass (reading the value waits for the device off the CPU).


def _torch_edges(src: Tensor, dst: Tensor, num_src: int, num_dst: int
                 ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The CSR's sources and targets as int64 indices, and which entries
    are edges: a CSR with self-loops added in the sort keeps the given
    self-loops behind every node's range, keyed past the last node, where
    the Triton kernels never read them."""
    src, dst = src.long(), dst.long()
    valid = (src < num_src) & (dst < num_dst)
    return (src.clamp(max=max(num_src - 1, 0)),
            dst.clamp(max=max(num_dst - 1, 0)), valid.unsqueeze(-1))


def _torch_logits(score_src, score_dst, edge_gate, src, dst, valid,
                  broadcast, negative_slope):
    from ikgat.ops.edge_softmax import edge_logit
    rows = torch.zeros_like(dst) if broadcast else dst
    gate = None if edge_gate is None else edge_gate.float()
    logit, positive = edge_logit(score_src.float()[src],
                                 score_dst.float()[rows], gate,
                                 negative_slope)
    return logit.masked_fill(~valid, float('-inf')), positive


def _torch_forward(score_src, score_dst, x_src, edge_gate, src, dst, seed,
                   num_dst, negative_slope, dropout, broadcast, need_alpha,
                   dtype):
    src, dst, valid = _torch_edges(src, dst, x_src.size(0), num_dst)
    heads = x_src.size(1)
    logit, _ = _torch_logits(score_src, score_dst, edge_gate, src, dst,
                             valid, broadcast, negative_slope)
    out, weight, group_max, group_den = torch_softmax_aggregate(
        logit, x_src, src, dst, num_dst, seed, dropout, valid)
    alpha = weight if need_alpha else logit.new_empty(0, heads)
    return out.to(dtype), alpha, group_max, group_den


def _torch_backward(grad_out, grad_alpha, score_src, score_dst, x_src,
                    edge_gate, src, dst, seed, group_max, group_den, delta,
                    negative_slope, dropout, broadcast):
    src, dst, valid = _torch_edges(src, dst, x_src.size(0),
                                   group_max.size(0))
    logit, positive = _torch_logits(score_src, score_dst, edge_gate, src,
                                    dst, valid, broadcast, negative_slope)
    alpha = ((logit - group_max[dst]).exp() / group_den[dst]).masked_fill(
        ~valid, 0.0)
    keep = torch_keep(seed, logit.shape, dropout, logit)
    g_out = grad_out.float()[dst]  # [E, H, C]
    d_alpha = (g_out * x_src.float()[src]).sum(-1)
    if grad_alpha is not None:
        d_alpha = d_alpha + grad_alpha.float()
    d_logit = alpha * (keep * d_alpha - delta[dst])
    grad_x = torch.zeros_like(x_src, dtype=torch.float32).index_add_(
        0, src, (keep * alpha).unsqueeze(-1) * g_out)
    zero = torch.zeros_like(d_logit)
    per_slope = torch.stack([torch.where(positive, d_logit, zero),
                             torch.where(positive, zero, d_logit), zero], -1)
    grad_src = torch.zeros_like(score_src, dtype=torch.float32).index_add_(
        0, src, per_slope)
    grad_dst = torch.zeros(score_dst.shape, dtype=torch.float32,
                           device=score_dst.device).index_add_(
        0, torch.zeros_like(dst) if broadcast else dst, per_slope)
    grad_gate = (x_src.new_empty(0) if edge_gate is None else torch.where(
        positive, d_logit, negative_slope * d_logit).to(edge_gate.dtype))
    return (grad_src.to(score_src.dtype), grad_dst.to(score_dst.dtype),
            grad_x.to(x_src.dtype), grad_gate)


def fused_attention(
    score_src: Tensor,
    score_dst: Tensor,
    x_src: Tensor,
    edge_index_or_csr: Union[Tensor, AttentionCSR],
    num_dst: int,
    edge_gate: Optional[Tensor] = None,
    negative_slope: float = 0.2,
    return_attention_weights: bool = False,
    dropout: float = 0.0,
    use_triton: Optional[bool] = None,
) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""Kernel attention in one fused pass per neighbourhood: returns
    :math:`\mathrm{out}` of shape :math:`(N_t, H, C)`, and with
    :obj:`return_attention_weights=True` also :math:`\alpha` of shape
    :math:`(E, H)` in the order of the edges given (see the module
    docstring).

    Equals ``attention_aggregate(F.dropout(kernel_edge_softmax(score_src,
    score_dst, edge_index, num_dst, edge_gate, negative_slope), dropout),
    x_src, edge_index, num_dst)`` up to the order of floating-point
    additions and the random stream of the dropout mask, gradients
    included.

    Args:
        score_src (torch.Tensor): Source scores :math:`(N_s, H, 3)`, as
            :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` takes them.
        score_dst (torch.Tensor): Target scores :math:`(N_t, H, 3)` or
            :math:`(1, H, 3)`, likewise.
        x_src (torch.Tensor): Source features :math:`(N_s, H, C)`.
        edge_index_or_csr (torch.Tensor or AttentionCSR): Edge indices
            :math:`(2, E)` (sorted here on every call), or their
            :func:`prepare_csr` (sorted once, reused across calls and
            layers).
        num_dst (int): The number of target nodes :math:`N_t`.
        edge_gate (torch.Tensor, optional): The edge term :math:`\epsilon`
            of shape :math:`(E, H)`, in the order of the edges given.
            (default: :obj:`None`)
        negative_slope (float, optional): The slope :math:`c_1`.
            (default: :obj:`0.2`)
        return_attention_weights (bool, optional): Also return
            :math:`\alpha` (float32, after dropout, as GATConv returns
            it), differentiable. (default: :obj:`False`)
        dropout (float, optional): Attention dropout probability :math:`p`
            (pass :obj:`0` in evaluation): each weight is kept with
            probability :math:`1 - p` and scaled by :math:`1/(1 - p)`, as
            :func:`torch.nn.functional.dropout` does. (default: :obj:`0`)
        use_triton (bool, optional): Run the Triton kernels (:obj:`True`)
            or the registered operator's PyTorch implementation
            (:obj:`False`, :math:`E \times H \times C` temporaries: for CPU
            tensors under :func:`torch.compile`); by default the kernels on
            CUDA (and ``meta``) tensors, and on CPU tensors when
            ``TRITON_INTERPRET=1``. (default: :obj:`None`)
    """
    check_scores('fused_attention', score_src, score_dst)
    if x_src.dim() != 3 or x_src.shape[:2] != score_src.shape[:2]:
        raise ValueError(f"fused_attention: 'x_src' must be (N_src, H, C) "
                         f"with N_src, H of 'score_src' "
                         f"{tuple(score_src.shape[:2])} (got "
                         f"{tuple(x_src.shape)})")
    num_dst = int(num_dst)
    if score_dst.size(0) not in (1, num_dst):
        raise ValueError(f"fused_attention: 'score_dst' has "
                         f"{score_dst.size(0)} rows; expected num_dst = "
                         f"{num_dst} or 1")
    csr = csr_for('fused_attention', edge_index_or_csr, x_src.size(0),
                  num_dst)
    if csr.self_loops is not None and (edge_gate is not None
                                       or return_attention_weights):
        raise ValueError("fused_attention: a CSR prepared with self_loops "
                         "takes no 'edge_gate' and returns no attention "
                         "weights (its positions are not the edges "
                         "given); prepare it from the self-looped edges")
    num_edges, heads = csr.src.numel(), score_src.size(1)
    if edge_gate is not None and edge_gate.shape != (num_edges, heads):
        raise ValueError(f"fused_attention: 'edge_gate' must be (E, H) = "
                         f"({num_edges}, {heads}) (got "
                         f"{tuple(edge_gate.shape)})")
    device = x_src.device
    use_triton = resolve_use_triton('fused_attention', use_triton, device)
    if edge_gate is not None:
        # CSR order; autograd scatters its gradient back to the edge order.
        edge_gate = edge_gate.index_select(0, csr.perm).contiguous()
    broadcast = score_dst.size(0) == 1 and num_dst != 1
    seed = dropout_seed('fused_attention', dropout, device, csr.rowptr)
    out, alpha, _, _ = _forward_op(
        score_src.contiguous(), score_dst.contiguous(), x_src.contiguous(),
        edge_gate, csr.rowptr, csr.src, csr.dst, csr.colptr, csr.csc_edge,
        csr.csc_dst, seed, float(negative_slope), float(dropout), broadcast,
        bool(return_attention_weights), bool(use_triton))
    if return_attention_weights:
        return out, alpha.index_select(0, csr.inverse_perm)
    return out
