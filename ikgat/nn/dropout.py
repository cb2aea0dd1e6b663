r"""Dropout of sparse input features that draws random numbers only for the
non-zero entries."""
import torch
import torch.nn.functional as F
from torch import Tensor

#: Below this share of non-zero entries only the non-zeros get random draws.
MAX_DENSITY = 0.25


def nonzero_dropout(x: Tensor, p: float = 0.5, training: bool = True
                    ) -> Tensor:
    r"""Dropout with the distribution of :func:`torch.nn.functional.dropout`,

    .. math::
        y_i = \frac{m_i\, x_i}{1 - p}, \qquad m_i \sim \mathrm{Bernoulli}(1-p),

    but with a Bernoulli draw only where :math:`x_i \neq 0` (a dropped zero
    is zero).  Bag-of-words features are about 1% non-zero (Planetoid's
    CiteSeer input is 3327 x 3703), and drawing 12M Bernoulli numbers per
    step took most of a GAT training step on CPU; inputs denser than
    :obj:`MAX_DENSITY` use :func:`~torch.nn.functional.dropout` itself.
    The random stream differs from :func:`~torch.nn.functional.dropout`'s,
    so results for a seed differ, not their distribution.  An input that
    requires grad (e.g. under a feature-mask explainer) also goes to
    :func:`~torch.nn.functional.dropout`, whose gradient is
    :math:`m_i/(1-p)` at zero entries too.

    Off the CPU (CUDA) this is :func:`~torch.nn.functional.dropout` itself:
    counting the non-zeros and gathering them would wait for the GPU twice
    per call (a host synchronisation for the count and for
    :meth:`~torch.Tensor.nonzero`), and a GPU draws dense Bernoulli numbers
    at memory speed anyway.  Under :func:`torch.compile` too (the count
    is a value the graph would break on; Inductor fuses the dense
    dropout).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"Dropout probability has to be between 0 and 1 "
                         f"(got {p})")
    if (not training or p == 0.0 or x.numel() == 0 or x.is_sparse
            or x.requires_grad or x.device.type != 'cpu'
            or torch.compiler.is_compiling()):
        return F.dropout(x, p, training)
    if p == 1.0 or int(torch.count_nonzero(x)) > MAX_DENSITY * x.numel():
        return F.dropout(x, p, training)
    flat = x.reshape(-1)
    index = flat.nonzero().squeeze(1)
    keep = torch.empty(index.numel(), dtype=x.dtype,
                       device=x.device).bernoulli_(1.0 - p)
    values = flat[index] * keep / (1.0 - p)
    return flat.new_zeros(flat.shape).index_put((index, ),
                                                values).view_as(x)
