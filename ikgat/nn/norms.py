r"""Numerically safe :math:`L^p` (quasi-)norms for the magnitude term.

The magnitude term of kernel attention uses :math:`\|x\|_p^2 =
(\sum_d |x_d|^p)^{2/p}` for any :math:`p > 0` (a quasi-norm for
:math:`p < 1`).  Three things need care:

* For :math:`p < 1` the map :math:`t \mapsto t^p` has an infinite slope at
  :math:`t = 0`.  Below :math:`\tau` (``SMALL``) we replace it by the chord
  :math:`\tau^{p-1} t`, which is continuous, zero at zero, and has a bounded
  slope; values differ from :math:`t^p` only below :math:`\tau^p`.
* For small :math:`p` the exponent :math:`2/p` makes the norm astronomically
  large (:math:`8^{20}` for eight unit coordinates at :math:`p = 0.1`).  We
  work in log space and clamp :math:`\|x\|_p^2` at ``MAX`` :math:`=
  e^{40} \approx 2.4 \cdot 10^{17}` (``LOG_MAX`` in log space), which keeps
  every forward value and gradient finite.  The clamp changes an attention
  weight only in a softmax group where two or more nodes exceed it: they tie
  instead of the largest taking all the weight (a logit gap of
  :math:`e^{40}` is one-hot either way).  The exact RBF path of
  :class:`~ikgat.IKGATConv` (``kernel='rbf', p=2``) does not use this
  function for sources: there the squared norms cancel algebraically.
* The result is accumulated in at least float32: float16 overflows at
  65504 (:math:`\|x\|_2 > 256`) and bfloat16 keeps 8 significant bits, so
  half-precision inputs give a float32 norm.
"""
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ikgat.ops.dtypes import accumulation_dtype

#: :math:`\tau`: below it :math:`|t|^p` is replaced by its chord.
SMALL = 1e-4
#: The clamp of :math:`\|x\|_p^2` in log space.
LOG_MAX = 40.0
#: The clamp of :math:`\|x\|_p^2`, :math:`e^{40}`.
MAX = math.exp(LOG_MAX)


def lp_norm_squared(x: Tensor, p: float, dim: int = -1) -> Tensor:
    r"""Return :math:`\|x\|_p^2 = (\sum_d |x_d|^p)^{2/p}` along ``dim``, in
    float32 for float16 and bfloat16 inputs (else in the dtype of ``x``).

    Exact for :math:`p = 2` (a plain sum of squares) and, for other
    :math:`p`, up to the safeguards described in the module docstring.
    """
    x = x.to(accumulation_dtype(x.dtype))
    if p == 2.0:
        # The clamp at MAX as hardtanh: the same values, a one-operation
        # backward (a sum of squares is never below 0).
        return F.hardtanh((x * x).sum(dim), 0.0, MAX)
    magnitude = x.abs()
    if p < 1.0:
        # |t|^p above SMALL, the chord SMALL^(p-1) * |t| below it:
        is_large = magnitude > SMALL
        safe = torch.where(is_large, magnitude, torch.ones_like(magnitude))
        powered = torch.where(is_large, safe.pow(p),
                              magnitude * SMALL**(p - 1.0))
    else:
        powered = magnitude.pow(p)
    total = powered.sum(dim)
    positive = total > 0
    safe_total = torch.where(positive, total, torch.ones_like(total))
    log_norm_sq = (safe_total.log() * (2.0 / p)).clamp(max=LOG_MAX)
    return torch.where(positive, log_norm_sq.exp(), torch.zeros_like(total))
