r"""The softmax steps that the fused attention kernels share
(:mod:`ikgat.ops.gat_attention` for the GAT layers,
:mod:`ikgat.ops.transformer_attention` and :mod:`ikgat.ops.transformer_fourier`
for the graph transformer layers): the online softmax over blocks of
in-edges, the attention dropout, which is drawn again wherever it is
needed instead of stored, and the steps around them.

**Online softmax** (FlashAttention's recurrence).  A program walks the
in-edges of a target in blocks; per head it keeps the running maximum
:math:`m` and sum :math:`l` of the logits seen so far, and for the next
block of logits :math:`\ell_e` (masked entries :math:`-\infty`)

.. math::
    m' = \max\big(m, \max_e \ell_e\big), \qquad
    c = e^{m - m'}, \qquad
    p_e = e^{\ell_e - m'}, \qquad
    l' = c\, l + \sum_e p_e,

so that an accumulator :math:`a' = c\, a + \sum_e p_e x_e` ends as
:math:`\sum_e e^{\ell_e - m} x_e` with :math:`l = \sum_e e^{\ell_e - m}`
for the final :math:`m`, in one pass.  A head without a finite logit yet
keeps :math:`m' = -\infty` and shifts by :math:`0` instead (no
:math:`\infty - \infty`): :math:`c = 0` and :math:`p_e = 0` there.

**Attention dropout**, as :func:`torch.nn.functional.dropout` on the
attention weights: the aggregation uses

.. math::
    \tilde\alpha_{e,h} = \frac{\mu_{e,h}}{1 - p}\, \alpha_{e,h}, \qquad
    \mu_{e,h} = [u_{e,h} \ge p], \qquad
    u_{e,h} = \mathrm{Philox}(\text{seed},\, e H + h) \in [0, 1),

for the CSR position :math:`e` of an edge and its head :math:`h` of
:math:`H` (:math:`\mu_{e,h} \sim \mathrm{Bernoulli}(1 - p)`), while the
softmax sums stay those of :math:`\alpha`.  The uniform :math:`u` comes
from Triton's counter-based generator (``tl.rand``: Philox keyed by the
seed, at the offset :math:`e H + h`), so that the forward kernel and each
backward kernel draw the same mask from the seed alone, as Triton's
low-memory dropout does; nothing of size :math:`E \times H` is stored.
The kernels' PyTorch implementations take :math:`u` from a
:class:`torch.Generator` seeded with the seed's value instead
(:func:`torch_keep`): another stream than Philox, so that the two
implementations drop different edges, each the same edges in its forward
and backward pass.

**The steps around them**, written once for every kernel that walks the
edges of a node with a softmax:

* :func:`aggregate_step`: one block of the forward pass, the online softmax
  step, the dropout draw and the accumulation of the gathered rows;
* :func:`finish_step`: the forward pass's end, :math:`\mathrm{out} = a / Z`
  with :math:`Z = l + 10^{-16}` (PyG's softmax denominator), and the saved
  row statistics :math:`m` and :math:`Z`;
* :func:`softmax_weight_step`: :math:`\alpha_e = e^{\ell_e - m} / Z` from
  the saved statistics, in the backward passes;
* :func:`logit_gradient_step`: :math:`\partial L/\partial\ell_e =
  \alpha_e (\mu_e/(1-p)\, \partial L/\partial\tilde\alpha_e - D_i)`
  and the dropped weight :math:`\tilde\alpha_e`;
* :func:`target_gradient_step` and :func:`source_gradient_step`: the
  steps of the per-target and per-source backward kernels over a block of
  edges, :math:`\partial L/\partial\ell_e` and the per-source sums;
* :func:`softmax_start_step`: the online softmax's start;
* :func:`gather_rows_step`, :func:`node_row_step` and
  :func:`store_row_step`: the rows of a node table at a block of edges, and
  a program's own row, loaded and stored;
* :func:`statistics_step`: the saved :math:`m`, :math:`Z` and
  :math:`D_i` at given rows;
* :func:`node_edges_step` and :func:`node_program_step`: a program's node,
  its edge range in the compressed order and its block of heads (a
  kernel's prologue);
* :func:`in_edges_step`, :func:`out_edges_step` and
  :func:`edge_rows_step`: a tile of in-edges (their sources) or out-edges
  (their CSR positions and targets), and the rows of their other ends;
  :func:`first_tile_step` and :func:`next_tile_step`, the other ends
  loaded a tile ahead;
* :func:`link_step` and :func:`source_logit_step`: the dot-product
  kernels' link :math:`\lambda(t)` and :math:`\lambda'(t)`, and their
  logit :math:`\lambda(t) + s_j` (:mod:`ikgat.ops.transformer_attention`).

The module's functions:

* :func:`online_softmax_step`, :func:`keep_step` and the steps above:
  Triton device functions (:func:`~ikgat.ops.runtime.lazy_jit`), imported
  by the kernel modules under these names and inlined by Triton into
  their kernels;
* :func:`keep_scale`: the factor :math:`1/(1 - p)`;
* :func:`torch_keep`: :math:`\mu/(1 - p)` for the PyTorch
  implementations.

Triton is imported the first time a kernel that calls them is launched
(:mod:`ikgat.ops.runtime`), so that importing this module never needs it.

The tiles the kernels walk are :mod:`ikgat.ops.tiling`'s.
"""
from __future__ import annotations  # keeps 'tl.constexpr' a string

from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from ikgat.deprecation import moved_names
from ikgat.ops.runtime import lazy_jit

triton = None
tl = None


@lazy_jit
def online_softmax_step(running_max, running_sum, logit):
    r"""The Triton body of one step of the online softmax (see the module
    docstring): from the running maximum :obj:`running_max` :math:`m` and
    sum :obj:`running_sum` :math:`l`, each :math:`(B_H,)`, and the block's
    logits :obj:`logit` :math:`\ell` :math:`(B_E, B_H)` (masked entries
    :math:`-\infty`), returns ``(new_max, rescale, p, new_sum)``:
    :math:`m'`, :math:`c = e^{m - m'}` :math:`(B_H,)`, :math:`p_e =
    e^{\ell_e - m'}` :math:`(B_E, B_H)` and :math:`l' = c\,l + \sum_e
    p_e`.  The caller rescales its accumulator by :math:`c` and adds its
    :math:`p`-weighted rows (after dropping them, with dropout: the sum
    :math:`l` is of the undropped terms)."""
    # A head without a logit yet keeps max -inf and shifts by 0 (no
    # inf - inf):
    new_max = tl.maximum(running_max, tl.max(logit, axis=0))
    shift = tl.where(new_max == float('-inf'), 0., new_max)
    rescale = tl.exp(running_max - shift)
    p = tl.exp(logit - shift[None, :])
    new_sum = running_sum * rescale + tl.sum(p, axis=0)
    return new_max, rescale, p, new_sum


@lazy_jit
def keep_step(seed, e, offs_h, H, dropout, keep_scale):
    r"""The Triton body of :math:`\mu_{e,h}/(1 - p)` of shape
    :math:`(B_E, B_H)`, for the CSR edge positions :obj:`e`
    :math:`(B_E,)` and the heads :obj:`offs_h` :math:`(B_H,)` of
    :obj:`H`: :math:`u = \mathrm{Philox}(\text{seed}, e H + h)`
    (``tl.rand`` keyed by the value at the pointer :obj:`seed`), then
    :obj:`keep_scale` (:func:`keep_scale` of :obj:`dropout`) where
    :math:`u \ge p` (:math:`p` = :obj:`dropout`) and :obj:`0` elsewhere.
    The same in the forward kernel and in every backward kernel that needs
    the mask.

    The kernels call it only under ``if HAS_DROPOUT:`` (a constexpr): a
    helper that returned a tile in one constexpr branch and a scalar in the
    other is rejected by Triton's compiler, though its interpreter accepts
    it."""
    u = tl.rand(tl.load(seed), e[:, None] * H + offs_h[None, :])
    return tl.where(u >= dropout, keep_scale, 0.)


@lazy_jit
def node_edges_step(pointers, H, BLOCK_H: tl.constexpr):
    r"""The Triton body of a kernel's prologue, for one program per node
    (grid axis 0) and block of :math:`B_H` heads (axis 1, absent in a 1-D
    grid): returns ``(node, offs_h, start, stop, mask_h)``, the node
    (int64), its heads, the range of its edges in the order compressed by
    :obj:`pointers`, and the mask of the heads of :obj:`H`."""
    node = tl.program_id(0).to(tl.int64)
    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    start = tl.load(pointers + node).to(tl.int64)
    stop = tl.load(pointers + node + 1).to(tl.int64)
    return node, offs_h, start, stop, offs_h < H


@lazy_jit
def node_program_step(pointers, H, C, BLOCK_H: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    r""":func:`node_edges_step` with the :math:`B_C` channel offsets and
    the mask of the heads by channels of :obj:`C`: returns ``(node, offs_h,
    start, stop, offs_c, mask_h, mask_hc)``."""
    node, offs_h, start, stop, mask_h = node_edges_step(pointers, H, BLOCK_H)
    offs_c = tl.arange(0, BLOCK_C)
    mask_hc = mask_h[:, None] & (offs_c < C)[None, :]
    return node, offs_h, start, stop, offs_c, mask_h, mask_hc


@lazy_jit
def edge_rows_step(nodes, offs_h, H, mask_e, mask_h):
    r"""The Triton body of the rows :math:`n_e H + h` :math:`(B_E, B_H)` of
    the other ends :obj:`nodes` :math:`(B_E,)` of a block of edges, at the
    heads :obj:`offs_h`, and their mask (edges :obj:`mask_e` by heads
    :obj:`mask_h`): returns ``(row, mask_eh)``."""
    return (nodes[:, None] * H + offs_h[None, :],
            mask_e[:, None] & mask_h[None, :])


@lazy_jit
def in_edges_step(src, first, stop, offs_h, H, mask_h, BLOCK_E: tl.constexpr):
    r"""The Triton body of a per-target kernel's tile of in-edges, the CSR
    positions :math:`e` from :obj:`first` (below :obj:`stop`): returns
    ``(e, mask_e, j, row, mask_eh)``, the positions and their mask
    :math:`(B_E,)`, the sources :obj:`src` at them (int64) and
    :func:`edge_rows_step` of the sources."""
    e = first + tl.arange(0, BLOCK_E)
    mask_e = e < stop
    j = tl.load(src + e, mask=mask_e, other=0).to(tl.int64)
    row, mask_eh = edge_rows_step(j, offs_h, H, mask_e, mask_h)
    return e, mask_e, j, row, mask_eh


@lazy_jit
def first_tile_step(indices, start, stop, BLOCK_E: tl.constexpr):
    r"""The Triton body that loads the node indices of a program's first
    tile, from :obj:`indices` at :math:`[\text{start}, \text{start} +
    B_E)` below :obj:`stop`, for :func:`next_tile_step`."""
    offs = start + tl.arange(0, BLOCK_E)
    return tl.load(indices + offs, mask=offs < stop, other=0)


@lazy_jit
def next_tile_step(ahead, indices, e, stop, BLOCK_E: tl.constexpr):
    r"""The Triton body of a tile's node indices loaded one tile ahead:
    from :obj:`ahead` (this tile's, loaded by the previous one) returns
    ``(current, ahead)``, them as int64 and the next tile's, loaded now
    from :obj:`indices` at :math:`e + B_E` (below :obj:`stop`) so that
    their latency overlaps this tile's work."""
    return ahead.to(tl.int64), tl.load(indices + e + BLOCK_E,
                                       mask=e + BLOCK_E < stop, other=0)


@lazy_jit
def out_edges_step(csc_edge, csc_dst, k, mask_e):
    r"""The Triton body that loads, for out-edges at the positions
    :obj:`k` of the order compressed by source, their CSR positions and
    their targets (int64): returns ``(e, i)``."""
    return (tl.load(csc_edge + k, mask=mask_e, other=0).to(tl.int64),
            tl.load(csc_dst + k, mask=mask_e, other=0).to(tl.int64))


@lazy_jit
def link_step(t, eps, LOG_SQUARE: tl.constexpr):
    r"""The Triton body of the dot-product kernels' link and its slope,
    :math:`\lambda(t) = \log(t^2 + \epsilon)` and :math:`\lambda'(t) = 2t /
    (t^2 + \epsilon)` with ``LOG_SQUARE``, else :math:`t` and :math:`1`
    (:mod:`ikgat.ops.transformer_attention`)."""
    if LOG_SQUARE:
        square = t * t + eps
        return tl.log(square), tl.fdiv(2. * t, square)
    return t, tl.full(t.shape, 1., t.dtype)


@lazy_jit
def source_logit_step(t, s, row, mask_eh, eps, LOG_SQUARE: tl.constexpr):
    r"""The Triton body of the dot-product kernels' logit of a block of
    in-edges, :math:`\ell = \lambda(t) + s_j` (:func:`link_step`, the
    source terms :obj:`s` :math:`(N_s, H)` at :obj:`row`), and
    :math:`\lambda'(t)`: returns ``(logit, slope)``."""
    logit, slope = link_step(t, eps, LOG_SQUARE)
    return (logit + tl.load(s + row, mask=mask_eh, other=0.).to(tl.float32),
            slope)


@lazy_jit
def gather_rows_step(table, row, offs, width, mask_e, mask_hw):
    r"""The Triton body that gathers the rows :obj:`row` :math:`(B_E, B_H)`
    (node times :math:`H` plus head) of a table of :obj:`width` columns,
    as a float32 tile :math:`(B_E, B_H, B_W)` (:obj:`offs` the columns),
    zero outside the edges :obj:`mask_e` :math:`(B_E,)` and the heads and
    columns :obj:`mask_hw` :math:`(B_H, B_W)`."""
    return tl.load(table + row[:, :, None] * width + offs[None, None, :],
                   mask=mask_e[:, None, None] & mask_hw[None, :, :],
                   other=0.).to(tl.float32)


@lazy_jit
def node_row_step(table, node, offs_h, offs, H, width, mask_hw):
    r"""The Triton body that loads the row of :obj:`node` of a table
    :math:`(N, H, W)` (:math:`W` = :obj:`width`) at the heads
    :obj:`offs_h` and columns :obj:`offs`, as a float32 tile
    :math:`(B_H, B_W)`, zero outside :obj:`mask_hw`."""
    return tl.load(table + (node * H + offs_h[:, None]) * width
                   + offs[None, :], mask=mask_hw, other=0.).to(tl.float32)


@lazy_jit
def store_row_step(table, node, offs_h, offs, H, width, value, mask_hw):
    r"""The Triton body that stores :obj:`value` :math:`(B_H, B_W)` into
    the row of :obj:`node` of a table :math:`(N, H, W)` at the heads
    :obj:`offs_h` and columns :obj:`offs`, inside :obj:`mask_hw` (the
    converse of :func:`node_row_step`)."""
    tl.store(table + (node * H + offs_h[:, None]) * width + offs[None, :],
             value, mask=mask_hw)


@lazy_jit
def statistics_step(row_max, row_den, delta, index, mask):
    r"""The Triton body that loads the saved softmax statistics :math:`m`
    and :math:`Z` and :math:`D_i` (each :math:`(N, H)`) at the flat
    positions :obj:`index` (node times :math:`H` plus head), as float32
    (they are float64 with float64 inputs, and every loop-carried tile is
    float32), with :math:`m = 0`, :math:`Z = 1`, :math:`D = 0` outside
    :obj:`mask`."""
    return (tl.load(row_max + index, mask=mask, other=0.).to(tl.float32),
            tl.load(row_den + index, mask=mask, other=1.).to(tl.float32),
            tl.load(delta + index, mask=mask, other=0.).to(tl.float32))


@lazy_jit
def softmax_start_step(BLOCK_H: tl.constexpr, BLOCK_C: tl.constexpr):
    r"""The Triton body of the online softmax's start: returns the running
    maximum :math:`m = -\infty` and sum :math:`l = 0`, each
    :math:`(B_H,)`, and the accumulator :math:`a = 0` :math:`(B_H,
    B_C)`."""
    return (tl.full([BLOCK_H], float('-inf'), tl.float32),
            tl.zeros([BLOCK_H], dtype=tl.float32),
            tl.zeros([BLOCK_H, BLOCK_C], dtype=tl.float32))


@lazy_jit
def aggregate_step(running_max, running_sum, acc, logit, values, row, offs_c,
                   C, mask_e, mask_hc, seed, e, offs_h, H, dropout,
                   keep_scale, HAS_DROPOUT: tl.constexpr):
    r"""The Triton body of one block of edges of the forward pass: the
    online softmax step (:func:`online_softmax_step`) on the block's
    logits :obj:`logit` :math:`(B_E, B_H)` (made :math:`-\infty` here
    outside the block's edges :obj:`mask_e` and the heads of :obj:`H`),
    then the accumulator :math:`a' = c\,a + \sum_e \mu_e p_e X_e / (1 -
    p)` over the rows :math:`X_e` of :obj:`values` :math:`(N, H, C)` at
    :obj:`row` (the dropout of :func:`keep_step` with ``HAS_DROPOUT``; the
    sum :math:`l` stays that of the undropped terms).  Returns
    ``(new_max, new_sum, new_acc)``."""
    new_max, rescale, p, new_sum = online_softmax_step(
        running_max, running_sum,
        tl.where(mask_e[:, None] & (offs_h < H)[None, :], logit,
                 float('-inf')))
    x = gather_rows_step(values, row, offs_c, C, mask_e, mask_hc)
    if HAS_DROPOUT:  # the output sums the dropped terms
        p = p * keep_step(seed, e, offs_h, H, dropout, keep_scale)
    return (new_max, new_sum,
            acc * rescale[:, None] + tl.sum(p[:, :, None] * x, axis=0))


@lazy_jit
def finish_step(out, row_max, row_den, acc, running_max, running_sum, node,
                offs_h, offs_c, H, C, mask_h, mask_hc):
    r"""The Triton body of the forward pass's end for the target
    :obj:`node`: stores :math:`a / Z` into :obj:`out` :math:`(N, H, C)`,
    :math:`m` into :obj:`row_max` and :math:`Z = l + 10^{-16}` (PyG's
    softmax denominator) into :obj:`row_den`, both :math:`(N, H)`."""
    den = running_sum + 1e-16
    store_row_step(out, node, offs_h, offs_c, H, C, tl.fdiv(acc, den[:, None]),
                   mask_hc)
    tl.store(row_max + node * H + offs_h, running_max, mask=mask_h)
    tl.store(row_den + node * H + offs_h, den, mask=mask_h)


@lazy_jit
def softmax_weight_step(logit, row_max, row_den, mask):
    r"""The Triton body of :math:`\alpha = e^{\ell - m} / Z` from the
    saved row statistics (broadcast to :obj:`logit`), zero outside
    :obj:`mask`."""
    return tl.where(mask, tl.fdiv(tl.exp(logit - row_max), row_den), 0.)


@lazy_jit
def logit_gradient_step(alpha, d_alpha, delta, seed, e, offs_h, H, dropout,
                        keep_scale, HAS_DROPOUT: tl.constexpr):
    r"""The Triton body of the logits' gradient: from :math:`\alpha`,
    :obj:`d_alpha` :math:`= \partial L/\partial\tilde\alpha` and
    :obj:`delta` :math:`D_i` (broadcast to :math:`(B_E, B_H)`), returns
    ``(d_logit, kept)``: :math:`\alpha (\mu/(1-p)\,\partial
    L/\partial\tilde\alpha - D_i)` and :math:`\tilde\alpha = \mu
    \alpha / (1 - p)` (:math:`\alpha` itself without ``HAS_DROPOUT``)."""
    kept = alpha
    if HAS_DROPOUT:
        keep = keep_step(seed, e, offs_h, H, dropout, keep_scale)
        d_alpha = keep * d_alpha  # dL/dalpha
        kept = keep * alpha
    return alpha * (d_alpha - delta), kept


@lazy_jit
def target_gradient_step(logit, m, den, d, grad_row, values, row, offs_c, C,
                         mask_e, mask_hc, mask_eh, seed, e, offs_h, H,
                         dropout, keep_scale, HAS_DROPOUT: tl.constexpr):
    r"""The Triton body of a per-target backward kernel's
    :math:`\partial L/\partial\ell_e` for a block of in-edges, from their
    logits :obj:`logit` :math:`(B_E, B_H)`, the target's saved :math:`m`,
    :math:`Z`, :math:`D_i` (:obj:`m`, :obj:`den`, :obj:`d`, each
    :math:`(B_H,)`) and its output gradient :math:`G_i` (:obj:`grad_row`
    :math:`(B_H, B_C)`): :func:`logit_gradient_step` with
    :math:`\partial L/\partial\tilde\alpha_e = \langle G_i, x_j\rangle`,
    the sources' rows of :obj:`values` at :obj:`row`."""
    alpha = softmax_weight_step(logit, m[None, :], den[None, :], mask_eh)
    x = gather_rows_step(values, row, offs_c, C, mask_e, mask_hc)
    d_logit, _ = logit_gradient_step(
        alpha, tl.sum(x * grad_row[None, :, :], axis=2), d[None, :], seed, e,
        offs_h, H, dropout, keep_scale, HAS_DROPOUT)
    return d_logit


@lazy_jit
def source_gradient_step(logit, row_max, row_den, delta, grad_out, own_row,
                         acc_x, acc_s, row, offs_c, C, mask_e, mask_hc,
                         mask_eh, seed, e, offs_h, H, dropout, keep_scale,
                         HAS_DROPOUT: tl.constexpr):
    r"""The Triton body of a per-source backward kernel's step over a block
    of out-edges :math:`e = (j, i)`, from their logits :obj:`logit`
    :math:`(B_E, B_H)` and the source's value row :math:`x_j`
    (:obj:`own_row` :math:`(B_H, B_C)`): the targets' saved statistics and
    output gradients :math:`G_i` at :obj:`row`, :math:`\partial
    L/\partial\ell_e` (:func:`logit_gradient_step` with :math:`\partial
    L/\partial\tilde\alpha_e = \langle G_i, x_j\rangle`), and the sums
    :math:`\partial L/\partial x_j \mathrel{+}= \sum_e \tilde\alpha_e
    G_i` (:obj:`acc_x`) and :math:`\partial L/\partial s_j
    \mathrel{+}= \sum_e \partial L/\partial\ell_e` (:obj:`acc_s`):
    returns ``(d_logit, acc_x, acc_s)``."""
    m, den, d = statistics_step(row_max, row_den, delta, row, mask_eh)
    alpha = softmax_weight_step(logit, m, den, mask_eh)
    g = gather_rows_step(grad_out, row, offs_c, C, mask_e, mask_hc)
    d_logit, kept = logit_gradient_step(
        alpha, tl.sum(g * own_row[None, :, :], axis=2), d, seed, e, offs_h,
        H, dropout, keep_scale, HAS_DROPOUT)
    return (d_logit, acc_x + tl.sum(kept[:, :, None] * g, axis=0),
            acc_s + tl.sum(d_logit, axis=0))


def keep_scale(dropout: float) -> float:
    r"""The factor :math:`1/(1 - p)` of the kept weights, for :math:`p` =
    :obj:`dropout`; :obj:`0` for :math:`p \ge 1` (every weight is
    dropped)."""
    return 0.0 if dropout >= 1.0 else 1.0 / (1.0 - dropout)


def torch_keep(seed: Tensor, shape: Sequence[int], dropout: float,
               like: Tensor) -> Tensor:
    r""":math:`\mu/(1 - p)` of shape :obj:`shape` (float32, on the device
    of :obj:`like`) for the kernels' PyTorch implementations: :math:`\mu =
    [u \ge p]` with :math:`u` uniform from a :class:`torch.Generator`
    seeded with the value of :obj:`seed` (reading it waits for the device
    off the CPU).  Without dropout (:math:`p \le 0`), a scalar one of the
    dtype of :obj:`like`."""
    if dropout <= 0.0:
        return like.new_ones(())
    generator = torch.Generator(device=like.device)
    generator.manual_seed(int(seed))
    keep = torch.rand(shape, generator=generator, device=like.device,
                      dtype=torch.float32) >= dropout
    return keep.float() * keep_scale(dropout)


def torch_softmax_aggregate(logit: Tensor, values: Tensor, src: Tensor,
                            dst: Tensor, num_dst: int, seed: Tensor,
                            dropout: float,
                            valid: Optional[Tensor] = None
                            ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""What :func:`aggregate_step` and :func:`finish_step` compute, for the
    fused operators' PyTorch implementations: from the logits
    :math:`\ell` :math:`(E, H)` of the edges :obj:`src` :math:`\to`
    :obj:`dst` (int64; entries where :obj:`valid` is false count for
    nothing), :math:`m_i = \max_{e \to i} \ell_e`, :math:`Z_i = \sum_{e
    \to i} e^{\ell_e - m_i} + 10^{-16}`, the dropped weights
    :math:`\tilde\alpha_e = \mu_e e^{\ell_e - m_i} / (Z_i (1 - p))`
    (:func:`torch_keep`) and :math:`\mathrm{out}_i = \sum_{e \to i}
    \tilde\alpha_e\, x_{src(e)}` from the :obj:`values` :math:`(N_s, H,
    C)`.  Returns ``(out, weights, m, Z)`` in the dtype of the logits."""
    heads = logit.size(1)
    row_max = logit.new_full((num_dst, heads), float('-inf')).index_reduce_(
        0, dst, logit, 'amax')
    p = (logit - row_max[dst]).exp()
    if valid is not None:
        p = p.masked_fill(~valid, 0.0)
    row_den = logit.new_zeros(num_dst, heads).index_add_(0, dst, p) + 1e-16
    weight = p / row_den[dst] * torch_keep(seed, logit.shape, dropout,
                                           logit).to(logit.dtype)
    out = logit.new_zeros(num_dst, heads, values.size(2))
    out.index_add_(0, dst, weight.unsqueeze(-1) * values.to(logit.dtype)[src])
    return out, weight, row_max, row_den


# The tiling, importable from here before it had its module
# (ikgat.ops.tiling), for one release:
__getattr__ = moved_names(__name__, {
    name: ('ikgat.ops.tiling', name) for name in (
        'TILE_ELEMENTS', 'ROW_ELEMENTS', 'edge_tiling', 'head_block',
        'tiling', 'grid')})
