r"""A memory-lean aggregation of attention-weighted messages.

:func:`attention_aggregate` computes what GATConv's ``propagate`` computes
with ``message = alpha * x_j`` and ``aggr='sum'``,

.. math::
    \mathrm{out}_{i,h,:} = \sum_{e = (j \to i)} \alpha_{e,h}\,
    x_{j,h,:}, \qquad \alpha \in \mathbb{R}^{E \times H},\;
    x \in \mathbb{R}^{N_s \times H \times C},

but never forms the :math:`E \times H \times C` message tensor, neither in
the forward nor in the backward pass.  PyG's path gathers
:math:`x_j` for every edge, multiplies, scatters, and keeps the gathered
:math:`E \times H \times C` tensor alive for backward (on a graph of
ogbn-products size with :math:`H C = 64` that is 16 GB in float32, plus
about as much again transiently).  Here the edges are processed in chunks
(``index_select`` :math:`\to` multiply :math:`\to` ``index_add_`` into the
output), and only the inputs :math:`\alpha`, :math:`x` and the edge indices
are saved for backward.

**Backward, derived by hand.**  With :math:`G = \partial L / \partial
\mathrm{out}` of shape :math:`(N_t, H, C)`, the output is bilinear in
:math:`\alpha` and :math:`x`, and every edge :math:`e = (j \to i)` contributes
:math:`\alpha_{e,h} x_{j,h,:}` to row :math:`i` only, so

.. math::
    \frac{\partial L}{\partial x_{j,h,:}}
    = \sum_{e = (j \to i)} \alpha_{e,h}\, G_{i,h,:}, \qquad
    \frac{\partial L}{\partial \alpha_{e,h}}
    = \langle G_{i,h,:},\, x_{j,h,:} \rangle
    = \sum_c G_{i,h,c}\, x_{j,h,c}.

The first is the same chunked gather-multiply-``index_add_`` with the roles
of sources and targets swapped; the second is a chunked gather of both
endpoints and a reduction over :math:`C`.  Each chunk needs
:math:`O(\text{chunk} \cdot H \cdot C)` scratch memory, reused across
chunks.  The backward pass is not itself differentiable (no double
backward); the layers use PyG's path where that is needed.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ikgat.ops.chunking import chunks, resolve_chunk_size


class AttentionAggregate(torch.autograd.Function):
    r""":math:`\mathrm{out}_i = \sum_{e=(j \to i)} \alpha_e x_j`, chunked
    over the edges; see the module docstring for the formulas and the
    derivation of the backward pass."""
    @staticmethod
    def forward(ctx, alpha: Tensor, x_src: Tensor, src: Tensor, dst: Tensor,
                num_dst: int, chunk_size: int) -> Tensor:
        heads, channels = x_src.size(1), x_src.size(2)
        out = x_src.new_zeros(num_dst, heads, channels)
        buffer = x_src.new_empty(min(chunk_size, src.numel()), heads,
                                 channels)
        for start, stop in chunks(src.numel(), chunk_size):
            message = buffer[:stop - start]
            torch.index_select(x_src, 0, src[start:stop], out=message)
            message.mul_(alpha[start:stop].unsqueeze(-1))
            out.index_add_(0, dst[start:stop], message)
        ctx.save_for_backward(alpha, x_src, src, dst)
        ctx.chunk_size = chunk_size
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        alpha, x_src, src, dst = ctx.saved_tensors
        need_alpha, need_x = ctx.needs_input_grad[:2]
        grad_alpha = alpha.new_empty(alpha.shape) if need_alpha else None
        grad_x = torch.zeros_like(x_src,
                                  memory_format=torch.contiguous_format
                                  ) if need_x else None
        size = min(ctx.chunk_size, src.numel())
        grad_buffer = grad_out.new_empty(size, *grad_out.shape[1:])
        x_buffer = x_src.new_empty(size, *x_src.shape[1:]) if need_alpha \
            else None
        for start, stop in chunks(src.numel(), ctx.chunk_size):
            grad_i = grad_buffer[:stop - start]  # G_i of each edge
            torch.index_select(grad_out, 0, dst[start:stop], out=grad_i)
            if grad_alpha is not None:  # <G_i, x_j>
                x_j = x_buffer[:stop - start]
                torch.index_select(x_src, 0, src[start:stop], out=x_j)
                torch.sum(x_j.mul_(grad_i), dim=-1,
                          out=grad_alpha[start:stop])
            if grad_x is not None:  # sum over edges of alpha_e G_i
                grad_i.mul_(alpha[start:stop].unsqueeze(-1))
                grad_x.index_add_(0, src[start:stop], grad_i)
        return grad_alpha, grad_x, None, None, None, None


def attention_aggregate(alpha: Tensor, x_src: Tensor, edge_index: Tensor,
                        num_dst: int,
                        chunk_size: Optional[int] = None) -> Tensor:
    r"""Return :math:`\mathrm{out}_{i,h,:} = \sum_{e=(j \to i)}
    \alpha_{e,h} x_{j,h,:}` of shape :math:`(N_t, H, C)` without forming an
    :math:`E \times H \times C` tensor (see the module docstring).

    Equals ``scatter(alpha.unsqueeze(-1) * x_src[edge_index[0]],
    edge_index[1], dim=0, dim_size=num_dst, reduce='sum')`` up to the
    order of floating-point additions, gradients included.

    Args:
        alpha (torch.Tensor): Edge weights :math:`(E, H)`.
        x_src (torch.Tensor): Source node features :math:`(N_s, H, C)`.
        edge_index (torch.Tensor): Integer edge indices :math:`(2, E)`, row
            0 the sources :math:`j`, row 1 the targets :math:`i`.
        num_dst (int): The number of target nodes :math:`N_t`.
        chunk_size (int, optional): Edges per chunk; by default
            :obj:`~ikgat.ops.chunking.CHUNK_ELEMENTS` divided by
            :math:`H C`.
            (default: :obj:`None`)
    """
    if x_src.dim() != 3 or alpha.dim() != 2 or (
            alpha.size(1) != x_src.size(1)):
        raise ValueError(f"attention_aggregate: 'alpha' must be (E, H) and "
                         f"'x_src' (N_src, H, C) with the same H (got alpha "
                         f"{tuple(alpha.shape)}, x_src {tuple(x_src.shape)})")
    if edge_index.dim() != 2 or edge_index.size(0) != 2 or (
            edge_index.size(1) != alpha.size(0)):
        raise ValueError(f"attention_aggregate: 'edge_index' must be (2, E) "
                         f"with E = alpha.size(0) = {alpha.size(0)} (got "
                         f"{tuple(edge_index.shape)})")
    chunk_size = resolve_chunk_size('attention_aggregate', chunk_size,
                                    x_src.size(1) * x_src.size(2))
    # The multiplication promotes, as alpha.unsqueeze(-1) * x_j does:
    dtype = torch.promote_types(alpha.dtype, x_src.dtype)
    src, dst = _long_rows(edge_index)
    return AttentionAggregate.apply(alpha.to(dtype), x_src.to(dtype), src,
                                    dst, int(num_dst), chunk_size)


def _long_rows(edge_index: Tensor) -> Tuple[Tensor, Tensor]:
    if edge_index.dtype != torch.long:
        edge_index = edge_index.long()
    return edge_index[0], edge_index[1]
