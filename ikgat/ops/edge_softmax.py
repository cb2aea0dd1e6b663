r"""A memory-lean edge logit and softmax over the targets for kernel attention.

:func:`kernel_edge_softmax` computes the attention weights of
:class:`~ikgat.IKGATConv` (before attention dropout) from its node-wise packed
scores.  Each node carries, per head :math:`h`, the logit parts for the two
LeakyReLU slopes :math:`c_0 = 1`, :math:`c_1 = \text{negative\_slope}` and
the gate (slot :math:`2`):

.. math::
    S^s_{j,h,:} = [\,s^s_{j,h,0},\; s^s_{j,h,1},\; g^s_{j,h}\,], \qquad
    S^t_{i,h,:} = [\,s^t_{i,h,0},\; s^t_{i,h,1},\; g^t_{i,h}\,].

For an edge :math:`e = (j \to i)` with optional edge gate :math:`\epsilon_{e,h}`

.. math::
    \gamma_{e,h} = (g^s_{j,h} + g^t_{i,h}) + \epsilon_{e,h}, \qquad
    t_{e,h} = [\gamma_{e,h} \le 0],

.. math::
    \ell_{e,h} = (s^s_{j,h,t} + s^t_{i,h,t}) + c_t\, \epsilon_{e,h},
    \qquad
    \alpha_{e,h} = \frac{\exp(\ell_{e,h} - m_{i,h})}
    {\sum_{e' \to i} \exp(\ell_{e',h} - m_{i,h}) + 10^{-16}},
    \quad m_{i,h} = \max_{e' \to i} \ell_{e',h},

**GAT's own logit.**  Where the kernel form is GAT's function (the RBF
kernel of length-scale 1 with the :math:`L^2` magnitude), the slope parts
are :math:`s_t = c_t\,g` up to constants that cancel over an edge, and the
layer passes the gates alone, :math:`(N, H, 1)`: then :math:`\ell_{e,h} =
\mathrm{LeakyReLU}(\gamma_{e,h})`, GATConv's logit, one gather a side
instead of three.

The three-slot form is what ``IKGATConv.edge_update`` does with PyG's
:func:`~torch_geometric.utils.softmax`: both compute the logit with
:func:`edge_logit` (so the same slope choice :math:`t` and the same
logits).  PyG's path
lifts :math:`S^s` and :math:`S^t` to every edge (two :math:`E \times H \times
3` gathers and their sum, 288 bytes per edge in float32 with :math:`H = 8`)
and autograd keeps several :math:`E \times H` tensors for backward.  Here
the edges are processed in chunks: each chunk's logits are written into the
output buffer and reduced into the group maxima (``scatter_reduce_``
``'amax'``), then exponentiated in place and summed per group
(``index_add_``), then normalised.  Only :math:`\alpha`, the edge indices,
the node-wise scores and the edge gate are saved for backward; the slope
choice is recomputed per chunk there.

**Backward, derived by hand.**  With :math:`g = \partial L/\partial\alpha`
and :math:`Z_{i,h}` the denominator, :math:`\partial\alpha_{e,h}/\partial
\ell_{e',h} = \alpha_{e,h}([e = e'] - \alpha_{e',h})` within the group of
target :math:`i` (the :math:`10^{-16}` changes nothing: :math:`\alpha =
\exp(\cdot)/Z` exactly, and the maximum cancels), so

.. math::
    \frac{\partial L}{\partial \ell_{e,h}} = \alpha_{e,h}\Big(g_{e,h}
    - \sum_{e' \to i} \alpha_{e',h}\, g_{e',h}\Big).

The slope choice :math:`t` is piecewise constant, so no gradient reaches the
gates through it; the logit is linear in the picked scores and the edge gate:

.. math::
    \frac{\partial L}{\partial s^s_{j,h,t}} =
    \sum_{e = (j \to \cdot),\, t_{e,h} = t} \frac{\partial L}
    {\partial \ell_{e,h}}, \quad
    \frac{\partial L}{\partial s^t_{i,h,t}} =
    \sum_{e = (\cdot \to i),\, t_{e,h} = t} \frac{\partial L}
    {\partial \ell_{e,h}}, \quad
    \frac{\partial L}{\partial \epsilon_{e,h}} = c_{t_{e,h}}
    \frac{\partial L}{\partial \ell_{e,h}},

and zero for the gate slots; in the one-slot form the gate's gradient is
:math:`c_{t_{e,h}}\,\partial L/\partial \ell_{e,h}` summed over the edges
of each endpoint.  The group sums are one chunked
``index_add_`` over the targets, the score gradients one chunked
``index_add_`` per endpoint.  Each chunk needs :math:`O(\text{chunk} \cdot
H)` scratch memory.  The backward pass is not itself differentiable (no
double backward).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable
from torch_geometric.typing import OptTensor

from ikgat.ops.chunking import chunks, resolve_chunk_size


def edge_logit(score_j: Tensor, score_i: Tensor, edge_gate: OptTensor,
               negative_slope: float) -> Tuple[Tensor, Tensor]:
    r"""The per-edge logit of kernel attention from the packed node scores
    of its endpoints: the one formula that ``IKGATConv.edge_update``,
    :class:`KernelEdgeSoftmax` (per chunk) and
    ``IKGATConv.attention_decomposition`` evaluate.

    With :math:`S = S^s_j + S^t_i` (slots :math:`[s_0, s_1, g]`),
    :math:`\gamma = g + \epsilon`, :math:`t = [\gamma \le 0]`:
    :math:`\ell = s_t + c_t \epsilon`, where :math:`c_0 = 1` and
    :math:`c_1 =` :obj:`negative_slope`.

    Args:
        score_j (torch.Tensor): Source scores gathered per edge,
            :math:`(E, H, 3)`.
        score_i (torch.Tensor): Target scores gathered per edge,
            :math:`(E, H, 3)` (or broadcastable to it).
        edge_gate (torch.Tensor, optional): The edge term :math:`\epsilon`,
            :math:`(E, H)`.
        negative_slope (float): The slope :math:`c_1`.

    Returns:
        The logits :math:`\ell` and the mask :math:`[\gamma > 0]` (the
        slope choice :math:`t = 0`), both :math:`(E, H)`.
    """
    score = score_j + score_i
    gate = score[..., 2]
    if edge_gate is not None:
        gate = gate + edge_gate
    positive = gate > 0
    logit = torch.where(positive, score[..., 0], score[..., 1])
    if edge_gate is not None:
        logit = logit + torch.where(positive, edge_gate,
                                    negative_slope * edge_gate)
    return logit, positive


def _target_rows(score_dst: Tensor, dst: Tensor, broadcast: bool) -> Tensor:
    # A missing target projection is one row shared by every target:
    return score_dst if broadcast else score_dst.index_select(0, dst)


class KernelEdgeSoftmax(torch.autograd.Function):
    r"""The attention weights :math:`\alpha` of the packed node scores,
    chunked over the edges; see the module docstring for the formulas and
    the derivation of the backward pass."""
    @staticmethod
    def forward(ctx, score_src: Tensor, score_dst: Tensor,
                edge_gate: OptTensor, src: Tensor, dst: Tensor,
                num_dst: int, negative_slope: float, broadcast_dst: bool,
                chunk_size: int) -> Tensor:
        num_edges, heads = src.numel(), score_src.size(1)
        alpha = score_src.new_empty(num_edges, heads)
        group_max = score_src.new_full((num_dst, heads), float('-inf'))
        gat_form = score_src.size(-1) == 1
        gate_src, gate_dst = score_src[..., 0], score_dst[..., 0]
        for start, stop in chunks(num_edges, chunk_size):
            src_c, dst_c = src[start:stop], dst[start:stop]
            logit = alpha[start:stop]
            if gat_form:  # GATConv's LeakyReLU of the gate, in place
                torch.add(gate_src.index_select(0, src_c),
                          _target_rows(gate_dst, dst_c, broadcast_dst),
                          out=logit)
                if edge_gate is not None:
                    logit.add_(edge_gate[start:stop])
                F.leaky_relu_(logit, negative_slope)
            else:
                logit.copy_(edge_logit(
                    score_src.index_select(0, src_c),
                    _target_rows(score_dst, dst_c, broadcast_dst),
                    None if edge_gate is None else edge_gate[start:stop],
                    negative_slope)[0])
            group_max.scatter_reduce_(0, dst_c.view(-1, 1).expand_as(logit),
                                      logit, reduce='amax')
        # exp(logit - max), summed per target, as PyG's softmax:
        group_sum = score_src.new_zeros(num_dst, heads)
        for start, stop in chunks(num_edges, chunk_size):
            dst_c, part = dst[start:stop], alpha[start:stop]
            part.sub_(group_max.index_select(0, dst_c)).exp_()
            group_sum.index_add_(0, dst_c, part)
        del group_max
        group_sum.add_(1e-16)
        for start, stop in chunks(num_edges, chunk_size):
            dst_c = dst[start:stop]
            alpha[start:stop].div_(group_sum.index_select(0, dst_c))
        ctx.save_for_backward(alpha, score_src, score_dst, edge_gate, src,
                              dst)
        ctx.num_dst, ctx.negative_slope = num_dst, negative_slope
        ctx.broadcast_dst, ctx.chunk_size = broadcast_dst, chunk_size
        return alpha

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_alpha: Tensor):
        alpha, score_src, score_dst, edge_gate, src, dst = ctx.saved_tensors
        need_src, need_dst, need_edge = ctx.needs_input_grad[:3]
        num_edges, heads = alpha.shape
        chunk_size, broadcast = ctx.chunk_size, ctx.broadcast_dst
        # sum over the group of target i of alpha * g:
        group_dot = alpha.new_zeros(ctx.num_dst, heads)
        for start, stop in chunks(num_edges, chunk_size):
            group_dot.index_add_(
                0, dst[start:stop],
                alpha[start:stop] * grad_alpha[start:stop])
        grad_src = torch.zeros_like(
            score_src, memory_format=torch.contiguous_format) \
            if need_src else None
        grad_dst = torch.zeros_like(
            score_dst, memory_format=torch.contiguous_format) \
            if need_dst else None
        grad_edge = alpha.new_empty(num_edges, heads) if (
            need_edge and edge_gate is not None) else None
        gat_form = score_src.size(-1) == 1
        gat_logit_src = score_src[..., -1].contiguous()
        gat_logit_dst = score_dst[..., -1].contiguous()
        for start, stop in chunks(num_edges, chunk_size):
            src_c, dst_c = src[start:stop], dst[start:stop]
            # dL/dlogit = alpha * (g - sum_group alpha g):
            grad_logit = grad_alpha[start:stop] - group_dot.index_select(
                0, dst_c)
            grad_logit.mul_(alpha[start:stop])
            # The slope choice of the forward pass, recomputed bit for bit:
            gate = gat_logit_src.index_select(0, src_c) + _target_rows(
                gat_logit_dst, dst_c, broadcast)
            if edge_gate is not None:
                gate = gate + edge_gate[start:stop]
            if gat_form:
                # c_t dL/dlogit, the gradient of every input of the gate:
                grad_gate = torch.ops.aten.leaky_relu_backward(
                    grad_logit, gate, ctx.negative_slope, False)
                if grad_edge is not None:
                    grad_edge[start:stop] = grad_gate
                grad_score = grad_gate.unsqueeze(-1)
            else:
                positive = gate > 0
                if grad_edge is not None:
                    torch.where(positive, grad_logit,
                                ctx.negative_slope * grad_logit,
                                out=grad_edge[start:stop])
                if grad_src is None and grad_dst is None:
                    continue
                zero = grad_logit.new_zeros(())
                grad_score = torch.stack([
                    torch.where(positive, grad_logit, zero),
                    torch.where(positive, zero, grad_logit),
                    zero.expand_as(grad_logit)
                ], dim=-1)
            if grad_src is not None:
                grad_src.index_add_(0, src_c, grad_score)
            if grad_dst is not None:
                if broadcast:
                    grad_dst += grad_score.sum(0, keepdim=True)
                else:
                    grad_dst.index_add_(0, dst_c, grad_score)
        return (grad_src, grad_dst, grad_edge, None, None, None, None, None,
                None)


def check_scores(owner: str, score_src: Tensor, score_dst: Tensor,
                 slots: Tuple[int, ...] = (3, )) -> None:
    r"""Raises a :class:`ValueError` naming :obj:`owner` unless
    :obj:`score_src` is :math:`(N_s, H, S)` and :obj:`score_dst`
    :math:`(N_t, H, S)` or :math:`(1, H, S)` for :math:`S` one of
    :obj:`slots`: the packed scores of the module docstring (3 slots), or
    the gates alone (1)."""
    if score_src.dim() != 3 or score_src.size(-1) not in slots or (
            score_dst.dim() != 3 or score_dst.shape[1:] != score_src.shape[1:]):
        shape = ' or '.join(str(slot) for slot in slots)
        raise ValueError(f"{owner}: 'score_src' must be (N_src, H, {shape}) "
                         f"and 'score_dst' (N_dst, H, S) or (1, H, S) of the "
                         f"same S (got {tuple(score_src.shape)} and "
                         f"{tuple(score_dst.shape)})")


def kernel_edge_softmax(score_src: Tensor, score_dst: Tensor,
                        edge_index: Tensor, num_dst: int,
                        edge_gate: OptTensor = None,
                        negative_slope: float = 0.2,
                        chunk_size: Optional[int] = None) -> Tensor:
    r"""Return the attention weights :math:`\alpha` of shape :math:`(E, H)`
    from the packed node scores, without forming an :math:`E \times H
    \times 3` tensor (see the module docstring for the formula).

    Equals ``IKGATConv.edge_update`` without dropout, i.e. PyG's
    ``softmax(logit, edge_index[1], num_nodes=num_dst)`` of the per-edge
    logit, up to the order of floating-point additions, gradients included.

    Args:
        score_src (torch.Tensor): Source scores :math:`(N_s, H, 3)`: the
            logit parts for :math:`c = 1` and :math:`c =`
            :obj:`negative_slope`, and the gate; or the gate alone,
            :math:`(N_s, H, 1)`, for GATConv's logit
            :math:`\mathrm{LeakyReLU}(\gamma)`.
        score_dst (torch.Tensor): Target scores :math:`(N_t, H, S)`, or
            :math:`(1, H, S)` shared by every target, with the slots
            :math:`S` of :obj:`score_src`.
        edge_index (torch.Tensor): Integer edge indices :math:`(2, E)`, row
            0 the sources :math:`j`, row 1 the targets :math:`i`.
        num_dst (int): The number of target nodes :math:`N_t`.
        edge_gate (torch.Tensor, optional): The edge term
            :math:`\epsilon` of shape :math:`(E, H)`. (default: :obj:`None`)
        negative_slope (float, optional): The slope :math:`c_1`.
            (default: :obj:`0.2`)
        chunk_size (int, optional): Edges per chunk; by default
            :obj:`~ikgat.ops.chunking.CHUNK_ELEMENTS` divided by :math:`H`.
            (default: :obj:`None`)
    """
    check_scores('kernel_edge_softmax', score_src, score_dst, slots=(1, 3))
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"kernel_edge_softmax: 'edge_index' must be (2, E) "
                         f"(got {tuple(edge_index.shape)})")
    num_edges, heads = edge_index.size(1), score_src.size(1)
    if edge_gate is not None and edge_gate.shape != (num_edges, heads):
        raise ValueError(f"kernel_edge_softmax: 'edge_gate' must be (E, H) "
                         f"= ({num_edges}, {heads}) (got "
                         f"{tuple(edge_gate.shape)})")
    # A chunk's (chunk, H) buffers; its gathered (chunk, H, 3) scores are
    # three times that (float32: 12 MiB).
    chunk_size = resolve_chunk_size('kernel_edge_softmax', chunk_size, heads)
    dtype = torch.promote_types(score_src.dtype, score_dst.dtype)
    if edge_gate is not None:
        dtype = torch.promote_types(dtype, edge_gate.dtype)
        edge_gate = edge_gate.to(dtype)
    index = edge_index if edge_index.dtype == torch.long else \
        edge_index.long()
    broadcast_dst = score_dst.size(0) == 1 and num_dst != 1
    return KernelEdgeSoftmax.apply(score_src.to(dtype), score_dst.to(dtype),
                                   edge_gate, index[0], index[1],
                                   int(num_dst), float(negative_slope),
                                   broadcast_dst, chunk_size)
