r"""Numerically safe :math:`L^p` (quasi-)norms for the magnitude term.

The magnitude term of kernel attention uses :math:`\|x\|_p^2 =
(\sum_d |x_d|^p)^{2/p}` for any :math:`p > 0` (a quasi-norm for
:math:`p < 1`).  Two things need care:

* For :math:`p < 1` the map :math:`t \mapsto t^p` has an infinite slope at
  :math:`t = 0`.  Below :math:`\tau` (``SMALL``) we replace it by the chord
  :math:`\tau^{p-1} t`, which is continuous, zero at zero, and has a bounded
  slope; values differ from :math:`t^p` only below :math:`\tau^p`.
* For small :math:`p` the exponent :math:`2/p` makes the norm astronomically
  large (:math:`8^{20}` for eight unit coordinates at :math:`p = 0.1`).  We
  work in log space and clamp :math:`\log\|x\|_p^2` at ``LOG_MAX``
  (:math:`e^{40} \approx 2.4 \cdot 10^{17}`); logit gaps that large already
  make the softmax one-hot, so the clamp changes no attention weight, and it
  keeps every forward value and gradient finite.
"""
import math

import torch
from torch import Tensor

SMALL = 1e-4
LOG_MAX = 40.0
MAX = math.exp(LOG_MAX)


def lp_norm_squared(x: Tensor, p: float, dim: int = -1) -> Tensor:
    r"""Return :math:`\|x\|_p^2 = (\sum_d |x_d|^p)^{2/p}` along ``dim``.

    Exact for :math:`p = 2` (a plain sum of squares) and, for other
    :math:`p`, up to the safeguards described in the module docstring.
    """
    if p == 2.0:
        return (x * x).sum(dim).clamp(max=MAX)
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

