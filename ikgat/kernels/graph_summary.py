r"""The graph summary :math:`h_s` that IKAN's implicit spectral density is
conditioned on (:class:`~ikgat.kernels.ImplicitSpectralKernel`): the mean
target and source projections of each graph, over the nodes whose
projection is finite, computed in sums that chunks of a graph add up.
"""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor


def graph_summary(x_src: Tensor, x_dst: Optional[Tensor],
                  batch_src: Optional[Tensor], batch_dst: Optional[Tensor],
                  num_graphs: int) -> Tensor:
    r"""The summary :math:`h_s = [\operatorname{mean}_i q_i \,\|\,
    \operatorname{mean}_j k_j]` of each graph, :math:`(G, H, 2C)`, from the
    target projections :math:`q` (:obj:`x_dst`; zeros without them) and the
    source projections :math:`k` (:obj:`x_src`)."""
    mean_k = finite_mean(*finite_sums(x_src, batch_src, num_graphs))
    if x_dst is x_src and batch_dst is batch_src:  # one projection
        return mean_k.repeat(1, 1, 2)
    mean_q = (torch.zeros_like(mean_k) if x_dst is None else finite_mean(
        *finite_sums(x_dst, batch_dst, num_graphs)))
    return torch.cat([mean_q, mean_k], dim=-1)


def finite_sums(x: Tensor, batch: Optional[Tensor] = None,
                num_graphs: int = 1) -> Tuple[Tensor, Tensor]:
    r"""Per graph and head, the sum of the rows of :math:`x` of shape
    :math:`(N, H, C)` and their count, :math:`(G, H, C)` and
    :math:`(G, H, 1)`, over the nodes whose projection is finite.

    A NaN or infinite input row is left out instead of turning every
    graph-level quantity into NaN; the mask is computed on the device, with
    no host synchronisation.  Sums of chunks add up to the sum of their
    concatenation, so a graph too large for one pass is summarised in
    chunks.

    On CPU (outside :func:`torch.compile`), where reading a value on the
    host costs nothing, the plain sums are returned when all of them are
    finite: a NaN or infinite entry makes its column's sum NaN or infinite,
    so then every row is finite and the masked sums equal the plain ones.
    That skips the :math:`(N, H, C)` mask and masked copy, fresh tensors
    whose page faults cost 17-36 ms each at a sampled products subgraph's
    size (163,000 nodes, 8 heads x 8, a 2-core VM) against about 2 ms for
    the sum itself."""
    if x.device.type == 'cpu' and not torch.compiler.is_compiling():
        total = (x.sum(0, keepdim=True) if batch is None else
                 x.new_zeros(num_graphs, *x.shape[1:]).index_add_(0, batch,
                                                                 x))
        if bool(torch.isfinite(total).all()):
            rows = (x.new_full((1, ), x.size(0)) if batch is None else
                    torch.bincount(batch, minlength=num_graphs).to(x.dtype))
            return total, rows.view(-1, 1, 1).expand(-1, x.size(1), 1)
    # |x| < inf is False for NaN and infinities (isfinite in fewer
    # operations); a mask, so outside autograd:
    with torch.no_grad():
        finite = x.abs().amax(-1, keepdim=True) < math.inf  # [N, H, 1]
    x = x.masked_fill(finite.logical_not(), 0.0)
    if batch is None:
        return (x.sum(0, keepdim=True),
                finite.sum(0, keepdim=True, dtype=x.dtype))
    total = x.new_zeros(num_graphs, *x.shape[1:]).index_add_(0, batch, x)
    count = x.new_zeros(num_graphs, x.size(1), 1).index_add_(
        0, batch, finite.to(x.dtype))
    return total, count


def finite_mean(total: Tensor, count: Tensor) -> Tensor:
    r"""The mean from :func:`finite_sums` (zeros for a graph without finite
    nodes)."""
    return total / count.clamp_min(1.0)
