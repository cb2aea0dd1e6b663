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


#: Elements of a chunk's :math:`(n, H)` buffers (float32: 1 MiB; its
#: gathered scores three times that), so that a chunk's buffers stay in a
#: core's cache: the three-slot softmax's forward and backward pass at
#: PubMed's size (8 heads, one thread) took 20.8 ms in chunks of 2^18,
#: 20.6 ms at 2^17, 21.0 ms at 2^19 and 28.7 ms in one chunk (2^20).
CHUNK_ELEMENTS = 1 << 18

#: Integer dtypes of each float width, for the branch-free selection.
_SAME_WIDTH_INT = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(tensor: Tensor) -> Tensor:
    return tensor.view(_SAME_WIDTH_INT[tensor.element_size()])


def select_mask(gate: Tensor, out: Tensor) -> Tensor:
    r"""The mask :math:`[\gamma > 0]` as all-ones (``-1``) or zero integers
    of :obj:`gate`'s width, written into :obj:`out`: the mask of
    :func:`select`."""
    return torch.gt(gate, 0, out=out).neg_()


def select(mask: Tensor, first: Tensor, second: Tensor, out: Tensor
           ) -> Tensor:
    r"""``torch.where(mask, first, second)`` bit for bit, written into
    :obj:`out` (which may alias :obj:`first`, not :obj:`second`), as
    :math:`b \oplus ((a \oplus b) \wedge m)` on the floats' bits with the
    integer mask :math:`m` of :func:`select_mask`.  ``torch.where``'s CPU
    loop branches on every element: on random masks it took 3.1 ns an
    element (65,536 floats, one thread), these three passes 0.65 ns."""
    bits, second_bits = _bits(out), _bits(second)
    torch.bitwise_xor(_bits(first), second_bits, out=bits)
    return bits.bitwise_and_(mask).bitwise_xor_(second_bits).view(out.dtype)


class _Workspace:
    r"""Buffers for one edge chunk, reused by every chunk of a pass, so
    that they stay in cache and a pass pays no first-touch page faults for
    fresh tensors: two of :math:`(n, S, H)` (gathered scores, slot-major),
    three of :math:`(n, H)` and an integer mask."""

    def __init__(self, like: Tensor, rows: int, heads: int, slots: int):
        self._pairs = [like.new_empty(rows, slots, heads) for _ in range(2)]
        self._edges = [like.new_empty(rows, heads) for _ in range(3)]
        self._mask = torch.empty(rows, heads, device=like.device,
                                 dtype=_SAME_WIDTH_INT[like.element_size()])

    def pair(self, index: int, size: int) -> Tensor:
        return self._pairs[index][:size]

    def edges(self, index: int, size: int) -> Tensor:
        return self._edges[index][:size]

    def mask(self, size: int) -> Tensor:
        return self._mask[:size]


def _slot_major(score: Tensor) -> Tensor:
    r"""Node scores :math:`(N, H, S)` as :math:`(N, S, H)`, contiguous, so
    that a gathered slot is :math:`H` consecutive floats per edge."""
    return score.transpose(1, 2).contiguous()


def _chunk_logit(workspace: _Workspace, slots_src: Tensor, slots_dst: Tensor,
                 src_c: Tensor, dst_c: Tensor, edge_gate: OptTensor,
                 negative_slope: float, out: Tensor) -> Tensor:
    r""":func:`edge_logit` of a chunk's edges from the slot-major node
    scores (:func:`_slot_major`; :obj:`slots_dst` may be one row), written
    into :obj:`out`, in the workspace's buffers; returns the mask of
    :func:`select`.  The same sums, slope choice and selection, so the
    same logits bit for bit."""
    size = src_c.numel()
    pair = torch.index_select(slots_src, 0, src_c,
                              out=workspace.pair(0, size))
    pair.add_(slots_dst if slots_dst.size(0) == 1 else torch.index_select(
        slots_dst, 0, dst_c, out=workspace.pair(1, size)))
    gate = pair[:, 2]
    if edge_gate is not None:
        gate.add_(edge_gate)
    mask = select_mask(gate, workspace.mask(size))
    select(mask, pair[:, 0], pair[:, 1], out)
    if edge_gate is not None:
        out.add_(select(mask, edge_gate, negative_slope * edge_gate,
                        workspace.edges(0, size)))
    return mask


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
        if not gat_form:
            slots_src, slots_dst = _slot_major(score_src), _slot_major(
                score_dst)
        workspace = _Workspace(score_src, min(chunk_size, num_edges), heads,
                               score_src.size(-1))
        for start, stop in chunks(num_edges, chunk_size):
            src_c, dst_c = src[start:stop], dst[start:stop]
            logit = alpha[start:stop]
            if gat_form:  # GATConv's LeakyReLU of the gate, in place
                torch.index_select(gate_src, 0, src_c, out=logit)
                logit.add_(gate_dst if broadcast_dst else torch.index_select(
                    gate_dst, 0, dst_c, out=workspace.edges(0, stop - start)))
                if edge_gate is not None:
                    logit.add_(edge_gate[start:stop])
                F.leaky_relu_(logit, negative_slope)
            else:
                _chunk_logit(workspace, slots_src, slots_dst, src_c, dst_c,
                             None if edge_gate is None else
                             edge_gate[start:stop], negative_slope, logit)
            group_max.scatter_reduce_(0, dst_c.view(-1, 1).expand_as(logit),
                                      logit, reduce='amax')
        # exp(logit - max), summed per target, as PyG's softmax:
        group_sum = score_src.new_zeros(num_dst, heads)
        for start, stop in chunks(num_edges, chunk_size):
            dst_c, part = dst[start:stop], alpha[start:stop]
            rows = workspace.edges(0, stop - start)
            part.sub_(torch.index_select(group_max, 0, dst_c, out=rows)
                      ).exp_()
            group_sum.index_add_(0, dst_c, part)
        del group_max
        group_sum.add_(1e-16)
        for start, stop in chunks(num_edges, chunk_size):
            dst_c, part = dst[start:stop], alpha[start:stop]
            rows = workspace.edges(0, stop - start)
            part.div_(torch.index_select(group_sum, 0, dst_c, out=rows))
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
        gat_form = score_src.size(-1) == 1
        # The slopes' gradients, slot-major (the gate slot's is zero):
        num_slots = 1 if gat_form else 2
        workspace = _Workspace(alpha, min(chunk_size, num_edges), heads,
                               num_slots)
        # sum over the group of target i of alpha * g:
        group_dot = alpha.new_zeros(ctx.num_dst, heads)
        for start, stop in chunks(num_edges, chunk_size):
            group_dot.index_add_(0, dst[start:stop], torch.mul(
                alpha[start:stop], grad_alpha[start:stop],
                out=workspace.edges(0, stop - start)))
        grad_src = alpha.new_zeros(score_src.size(0), num_slots, heads) \
            if need_src else None
        grad_dst = alpha.new_zeros(score_dst.size(0), num_slots, heads) \
            if need_dst else None
        grad_edge = alpha.new_empty(num_edges, heads) if (
            need_edge and edge_gate is not None) else None
        gate_src = score_src[..., -1].contiguous()
        gate_dst = score_dst[..., -1].contiguous()
        for start, stop in chunks(num_edges, chunk_size):
            src_c, dst_c, size = src[start:stop], dst[start:stop], stop - start
            # dL/dlogit = alpha * (g - sum_group alpha g):
            grad_logit = workspace.edges(0, size)
            torch.sub(grad_alpha[start:stop], torch.index_select(
                group_dot, 0, dst_c, out=grad_logit), out=grad_logit)
            grad_logit.mul_(alpha[start:stop])
            # The slope choice of the forward pass, recomputed bit for bit:
            gate = torch.index_select(gate_src, 0, src_c,
                                      out=workspace.edges(1, size))
            gate.add_(gate_dst if broadcast else torch.index_select(
                gate_dst, 0, dst_c, out=workspace.edges(2, size)))
            if edge_gate is not None:
                gate.add_(edge_gate[start:stop])
            grad_score = workspace.pair(0, size)  # [n, slots, H]
            if gat_form:
                # c_t dL/dlogit, the gradient of every input of the gate:
                torch.ops.aten.leaky_relu_backward.grad_input(
                    grad_logit, gate, ctx.negative_slope, False,
                    grad_input=grad_score[:, 0])
                if grad_edge is not None:
                    grad_edge[start:stop] = grad_score[:, 0]
            else:
                mask = select_mask(gate, workspace.mask(size))
                if grad_edge is not None:
                    select(mask, grad_logit, ctx.negative_slope * grad_logit,
                           grad_edge[start:stop])
                if grad_src is None and grad_dst is None:
                    continue
                # [dL/dlogit, 0] where t = 0, [0, dL/dlogit] where t = 1:
                logit_bits = _bits(grad_logit)
                torch.bitwise_and(logit_bits, mask,
                                  out=_bits(grad_score[:, 0]))
                torch.bitwise_xor(logit_bits, _bits(grad_score[:, 0]),
                                  out=_bits(grad_score[:, 1]))
            if grad_src is not None:
                grad_src.index_add_(0, src_c, grad_score)
            if grad_dst is not None:
                if broadcast:
                    grad_dst += grad_score.sum(0, keepdim=True)
                else:
                    grad_dst.index_add_(0, dst_c, grad_score)
        return (_node_gradient(grad_src, gat_form),
                _node_gradient(grad_dst, gat_form), grad_edge, None, None,
                None, None, None, None)


def _node_gradient(grad: OptTensor, gat_form: bool) -> OptTensor:
    r"""The packed scores' gradient :math:`(N, H, S)` from the slopes'
    slot-major gradient: the gate slot's is zero in the three-slot form."""
    if grad is None:
        return None
    if not gat_form:
        grad = torch.cat([grad, grad.new_zeros(grad.size(0), 1,
                                               grad.size(2))], dim=1)
    return grad.transpose(1, 2).contiguous()


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
            :obj:`CHUNK_ELEMENTS` divided by :math:`H`.
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
    chunk_size = resolve_chunk_size('kernel_edge_softmax', chunk_size, heads,
                                    CHUNK_ELEMENTS)
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
