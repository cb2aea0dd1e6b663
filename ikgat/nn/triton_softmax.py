r"""The softmax steps that the fused attention kernels share
(:mod:`ikgat.nn.triton_attention` for the GAT layers,
:mod:`ikgat.nn.triton_transformer` for the graph transformer layers): the
online softmax over blocks of in-edges and the attention dropout, which
is drawn again wherever it is needed instead of stored.

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

* :func:`online_softmax_body` and :func:`keep_body`: the Triton bodies,
  jitted once by :func:`helpers` and called by the kernels (Triton inlines
  them);
* :func:`keep_scale`: the factor :math:`1/(1 - p)`;
* :func:`torch_keep`: :math:`\mu/(1 - p)` for the PyTorch
  implementations.

Triton is imported the first time :func:`helpers` is called, so that
importing this module never needs it.
"""
from typing import Any, Dict, Sequence

import torch
from torch import Tensor

# Filled by helpers() on first use; the bodies below read 'tl' as a module
# global when Triton compiles (or interprets) them.
triton = None
tl = None
_HELPERS = None


def online_softmax_body(running_max, running_sum, logit):
    r"""The Triton body of one step of the online softmax (see the module
    docstring): from the running maximum :obj:`running_max` :math:`m` and
    sum :obj:`running_sum` :math:`l`, each :math:`(B_H,)`, and the block's
    logits :obj:`logit` :math:`\ell` :math:`(B_E, B_H)` (masked entries
    :math:`-\infty`), returns ``(new_max, rescale, p, new_sum)``:
    :math:`m'`, :math:`c = e^{m - m'}` :math:`(B_H,)`, :math:`p_e =
    e^{\ell_e - m'}` :math:`(B_E, B_H)` and :math:`l' = c\,l + \sum_e
    p_e`.  The caller rescales its accumulator by :math:`c` and adds its
    :math:`p`-weighted rows (after dropping them, with dropout: the sum
    :math:`l` is of the undropped terms).  Jitted by :func:`helpers`."""
    # A head without a logit yet keeps max -inf and shifts by 0 (no
    # inf - inf):
    new_max = tl.maximum(running_max, tl.max(logit, axis=0))
    shift = tl.where(new_max == float('-inf'), 0., new_max)
    rescale = tl.exp(running_max - shift)
    p = tl.exp(logit - shift[None, :])
    new_sum = running_sum * rescale + tl.sum(p, axis=0)
    return new_max, rescale, p, new_sum


def keep_body(seed, e, offs_h, H, dropout, keep_scale):
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
    it.  Jitted by :func:`helpers`."""
    u = tl.rand(tl.load(seed), e[:, None] * H + offs_h[None, :])
    return tl.where(u >= dropout, keep_scale, 0.)


def helpers() -> Dict[str, Any]:
    r"""The jitted helpers by name, ``'online_softmax'``
    (:func:`online_softmax_body`) and ``'keep'`` (:func:`keep_body`), for
    the kernels of :mod:`ikgat.nn.triton_attention` and
    :mod:`ikgat.nn.triton_transformer` (Triton is imported and the helpers
    are jitted on the first call)."""
    global triton, tl, _HELPERS
    if _HELPERS is None:
        try:
            import triton as triton_module
            import triton.language as tl_module
        except ImportError as error:
            raise ImportError(
                "the fused attention needs Triton; install it with "
                "'pip install triton' (or ikgat[test])") from error
        triton, tl = triton_module, tl_module
        _HELPERS = dict(online_softmax=triton.jit(online_softmax_body),
                        keep=triton.jit(keep_body))
    return _HELPERS


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
