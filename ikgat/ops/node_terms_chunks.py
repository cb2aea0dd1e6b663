r"""The node terms of :mod:`ikgat.ops.node_terms` in chunks of nodes, on
any device (its ``'eager'`` and ``'compile'`` node paths; the module
docstring there has the formulas): the forward pass walks the nodes in
chunks whose :math:`(H, mR, n)` angles hold :data:`CHUNK_ELEMENTS` floats,
keeps only :math:`f` (:math:`N H T` floats), and the backward pass
recomputes each chunk's cosines and sines.  The chunk kernels run eagerly
or through :func:`torch.compile`
(:class:`~ikgat.ops.compiled.CompiledOrEager`, falling back to eager
where compiling fails).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ikgat.ops.compiled import CompiledOrEager
from ikgat.ops.trigonometry import cos_sin

#: Elements of one :math:`(H, mR, n)` chunk of angles of the eager kernel on
#: CPU (float32: 512 KiB); the node chunk is this divided by :math:`H m R`.
#: The backward pass works on three such buffers (angles, cosines, sines)
#: and two of a :math:`m`-th of the size (:math:`U, V`), which then stay in
#: a core's L2 cache far more than at 2^18: the node terms' forward and
#: backward pass (both sides, Cora's first layer: 2,708 nodes, 8 heads, R =
#: 64, two sets; one thread) took 45.1 ms against 52.7 ms at 2^18 and 47.4
#: ms at 2^16 (smaller chunks pay more per-call overhead).
CHUNK_ELEMENTS = 1 << 17
#: The same for the compiled chunks, and for the eager kernel on other
#: devices: the compiled loops keep no chunk-sized buffers (PubMed's size,
#: 19,717 nodes: 314 ms at 2^18 against 348 ms at 2^17 and 301 ms at 2^19).
LARGE_CHUNK_ELEMENTS = 1 << 18


def chunk_size_for(heads: int, num_angles: int, chunk_size: Optional[int],
                   node_path: str, device: torch.device) -> int:
    r"""Nodes per chunk: :obj:`chunk_size` if given, otherwise
    :data:`CHUNK_ELEMENTS` angles for the eager kernel on CPU and
    :data:`LARGE_CHUNK_ELEMENTS` for the others."""
    if chunk_size is not None:
        return chunk_size
    elements = (CHUNK_ELEMENTS if node_path == 'eager' and device.type ==
                'cpu' else LARGE_CHUNK_ELEMENTS)
    return max(1, elements // max(1, heads * num_angles))


# --------------------------------------------------------------------------
# Chunk kernels.  Shapes: points u [H, mR, C]; x_chunk [H, C, n];
# cos_weight, sin_weight = A^c, A^s tiled over the sets [H, T, mR];
# grad_chunk G [H, T, n].
# --------------------------------------------------------------------------


def _angles(points: Tensor, x_chunk: Tensor) -> Tensor:
    r""":math:`\theta = u\, x^\top` :math:`(H, mR, n)` as :math:`C`
    broadcast multiply-adds (one per channel), not a matrix product:
    Inductor fuses them with the cosines, sines and reductions that read
    the angles into one loop, vectorised along the nodes.  Unrolled over the
    channels, so one compilation serves one :math:`C`; as a reduction over
    them (one compilation for all) the backward chunk took 1.3 times as
    long (2.37 against 1.82 ns an angle, PubMed's first layer, one
    thread)."""
    angle = points[:, :, 0, None] * x_chunk[:, None, 0, :]
    for channel in range(1, points.size(2)):
        angle = angle + points[:, :, channel, None] * x_chunk[:, None,
                                                              channel, :]
    return angle


def _forward_chunk(points: Tensor, x_chunk: Tensor, cos_weight: Tensor,
                   sin_weight: Tensor) -> Tensor:
    r""":math:`f` of the chunk, :math:`(H, T, n)`, written as reductions
    that Inductor fuses with the angles, cosines and sines."""
    angle = _angles(points, x_chunk)  # theta [H, mR, n]
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([
        (cos * cos_weight[:, t, :, None] +
         sin * sin_weight[:, t, :, None]).sum(1)
        for t in range(cos_weight.size(1))
    ], dim=1)


def _backward_chunk(points: Tensor, x_chunk: Tensor, grad_chunk: Tensor,
                    cos_weight: Tensor, sin_weight: Tensor
                    ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The chunk's :math:`\partial L/\partial x^\top` :math:`(H, C, n)`
    and its contributions to :math:`\partial L/\partial u` :math:`(H, mR,
    C)` and :math:`\partial L/\partial A^c, \partial L/\partial A^s`
    :math:`(H, T, mR)`, each sum written per channel and slope (as
    :func:`_angles`)."""
    angle = _angles(points, x_chunk)
    cos, sin = angle.cos(), angle.sin()
    num_slopes, channels = cos_weight.size(1), points.size(2)
    rows = [grad_chunk[:, t:t + 1] for t in range(num_slopes)]  # [H, 1, n]
    u = sum(cos_weight[:, t, :, None] * rows[t] for t in range(num_slopes))
    v = sum(sin_weight[:, t, :, None] * rows[t] for t in range(num_slopes))
    grad_angle = cos * v - sin * u  # D [H, mR, n]
    grad_x = torch.stack([(grad_angle * points[:, :, c, None]).sum(1)
                          for c in range(channels)], dim=1)
    grad_points = torch.stack([(grad_angle * x_chunk[:, None, c, :]).sum(-1)
                               for c in range(channels)], dim=-1)
    grad_cos = torch.stack([(cos * row).sum(-1) for row in rows], dim=1)
    grad_sin = torch.stack([(sin * row).sum(-1) for row in rows], dim=1)
    return grad_x, grad_points, grad_cos, grad_sin


_COMPILED_FORWARD = CompiledOrEager(
    _forward_chunk, 'fused_fourier_log_similarity: torch.compile of the '
    'forward chunk kernel', "using node_path='eager'")
_COMPILED_BACKWARD = CompiledOrEager(
    _backward_chunk, 'fused_fourier_log_similarity: torch.compile of the '
    'backward chunk kernel', "using node_path='eager'")


def _workspace(like: Tensor, count: int, size: int) -> List[Tensor]:
    r"""Flat buffers reused by every chunk of the eager kernel."""
    return [like.new_empty(size) for _ in range(count)]


def _view(buffer: Tensor, *shape: int) -> Tensor:
    numel = 1
    for dim in shape:
        numel *= dim
    return buffer[:numel].view(shape)


def chunked_estimate(x: Tensor, points: Tensor, cos_weight: Tensor,
                     sin_weight: Tensor, chunk_size: int,
                     backend: str) -> Tensor:
    r""":math:`f` :math:`(N, H, T)` in node chunks on the host (the CPU
    path), from :math:`A^c, A^s` tiled over the sets :math:`(H, T, mR)`."""
    if backend == 'compile':
        return _compiled_estimate(x, points, cos_weight, sin_weight,
                                  chunk_size)
    num_nodes, heads, _ = x.shape
    num_angles = points.size(1)
    out = x.new_empty(num_nodes, heads, cos_weight.size(1))
    angle_buf, cos_buf = _workspace(
        x, 2, heads * num_angles * min(chunk_size, num_nodes))
    for start in range(0, num_nodes, chunk_size):
        stop = min(start + chunk_size, num_nodes)
        # A contiguous [H, C, n] copy of the chunk (see the backward pass):
        x_chunk = x[start:stop].permute(1, 2, 0).contiguous()
        angle = _view(angle_buf, heads, num_angles, stop - start)
        cos = _view(cos_buf, heads, num_angles, stop - start)
        torch.bmm(points, x_chunk, out=angle)  # theta, [H, mR, n]
        cos, sin = cos_sin(angle, cos, angle)  # sin in place
        estimate = torch.bmm(cos_weight, cos)  # [H, T, n]
        estimate.baddbmm_(sin_weight, sin)
        out[start:stop] = estimate.permute(2, 0, 1)
    return out


def chunked_estimate_backward(grad_out: Tensor, x: Tensor, points: Tensor,
                              cos_weight: Tensor, sin_weight: Tensor,
                              num_sets: int, chunk_size: int, backend: str,
                              needs: List[bool]
                              ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The gradients of :func:`chunked_estimate` with respect to
    :math:`x`, :math:`u` and :math:`A^c, A^s` tiled over the
    :obj:`num_sets` sets, walking the same chunks and recomputing their
    cosines and sines (those not in :obj:`needs` are left zero), from the
    untiled :math:`A^c, A^s` :math:`(H, T, R)`."""
    # Nodes last and contiguous, so that the products below run on
    # unit-stride rows:
    grad_t = grad_out.permute(1, 2, 0).contiguous()  # [H, T, N]
    if backend == 'compile':
        return _compiled_estimate_backward(
            grad_t, x, points, cos_weight.repeat(1, 1, num_sets),
            sin_weight.repeat(1, 1, num_sets), chunk_size)
    num_nodes, heads, channels = x.shape
    num_slopes, num_points = cos_weight.shape[1:]
    num_angles = num_sets * num_points
    need_x, need_points, need_cos, need_sin = needs
    grad_x = torch.zeros_like(x)
    # The chunks sum dL/du as its transpose, x D^T (C, mR): a product with
    # the larger output, 2.5 times faster on CPU than D x^T (mR, C) (0.23
    # against 0.59 ns an angle, 8 heads, mR = 128, 256 nodes):
    grad_points_t = x.new_zeros(heads, channels, num_angles)
    grad_cos = x.new_zeros(heads, num_slopes, num_angles)
    grad_sin = x.new_zeros(heads, num_slopes, num_angles)
    # A^c, A^s as [H, R, T], the left factors of U and V:
    cos_weight_t = cos_weight.transpose(1, 2)
    sin_weight_t = sin_weight.transpose(1, 2)
    points_t = points.transpose(1, 2)  # [H, C, mR]
    # Angles and cosines [H, mR, n], U and V [H, R, n]:
    rows = min(chunk_size, num_nodes)
    angle_buf, cos_buf = _workspace(x, 2, heads * num_angles * rows)
    u_buf, v_buf = _workspace(x, 2, heads * num_points * rows)
    for start in range(0, num_nodes, chunk_size):
        stop = min(start + chunk_size, num_nodes)
        grad_chunk = grad_t[:, :, start:stop]  # [H, T, n]
        # A contiguous copy of the chunk (n H C floats): the products
        # with x^T ran slowly on the strided view (the node terms' fwd
        # and bwd at R = 16, 8 heads, PubMed's 19,717 nodes: 9-17%
        # faster with C = 8 and C = 3, one thread, 25 interleaved
        # rounds; unchanged at R = 64):
        x_chunk = x[start:stop].permute(1, 2, 0).contiguous()  # [H, C, n]
        size = stop - start
        angle = _view(angle_buf, heads, num_angles, size)
        cos = _view(cos_buf, heads, num_angles, size)
        torch.bmm(points, x_chunk, out=angle)  # theta
        cos, sin = cos_sin(angle, cos, angle)  # sin in place
        if need_cos:  # dL/dA^c = sum_n G cos(theta)
            grad_cos.baddbmm_(grad_chunk, cos.transpose(1, 2))
        if need_sin:
            grad_sin.baddbmm_(grad_chunk, sin.transpose(1, 2))
        if not (need_x or need_points):
            continue
        # U = sum_t A^c_t G_t, V = sum_t A^s_t G_t, the same for every set,
        # as products with an inner size of T: one pass over a set's share
        # of the chunk each (the broadcast multiply-adds took T passes, 1.45
        # times as long at T = 2):
        u = torch.bmm(cos_weight_t, grad_chunk,
                      out=_view(u_buf, heads, num_points, size))
        v = torch.bmm(sin_weight_t, grad_chunk,
                      out=_view(v_buf, heads, num_points, size))
        # D = cos(theta) V - sin(theta) U = dL/dtheta, in place, in two
        # passes, U and V broadcast over the sets:
        by_set = (heads, num_sets, num_points, size)
        cos.view(by_set).mul_(v.unsqueeze(1)).addcmul_(
            sin.view(by_set), u.unsqueeze(1), value=-1)
        grad_angle = cos
        if need_x:  # dL/dx = sum_{s,r} D u
            grad_x[start:stop] = torch.bmm(points_t,
                                           grad_angle).permute(2, 0, 1)
        if need_points:  # dL/du = sum_n D x, as its transpose
            grad_points_t.baddbmm_(x_chunk, grad_angle.transpose(1, 2))
    return (grad_x, grad_points_t.transpose(1, 2).contiguous(), grad_cos,
            grad_sin)


def _nodes_last(x: Tensor) -> Tensor:
    r""":math:`x^\top` :math:`(H, C, N)`, contiguous, from :math:`x`
    :math:`(N, H, C)`: one transposing copy of the whole tensor (a copy a
    chunk took about 4 times as long on CPU), whose node chunks are
    unit-stride rows."""
    num_nodes, heads, channels = x.shape
    return x.reshape(num_nodes, heads * channels).t().contiguous().view(
        heads, channels, num_nodes)


def _compiled_estimate(x: Tensor, points: Tensor, cos_weight: Tensor,
                       sin_weight: Tensor, chunk_size: int) -> Tensor:
    r""":func:`chunked_estimate` through the compiled chunk kernel, on
    node chunks of :math:`x^\top`."""
    x_t = _nodes_last(x)
    num_nodes = x.size(0)
    out = x.new_empty(x.size(1), cos_weight.size(1), num_nodes)  # [H, T, N]
    for start in range(0, num_nodes, chunk_size):
        stop = min(start + chunk_size, num_nodes)
        out[:, :, start:stop] = _COMPILED_FORWARD(
            points, x_t[:, :, start:stop], cos_weight, sin_weight)
    return out.permute(2, 0, 1).contiguous()


def _compiled_estimate_backward(grad_t: Tensor, x: Tensor, points: Tensor,
                                cos_weight: Tensor, sin_weight: Tensor,
                                chunk_size: int
                                ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r""":func:`chunked_estimate_backward` through the compiled chunk
    kernel, from :math:`G` as :math:`(H, T, N)` and :math:`A^c, A^s` tiled
    over the sets (every gradient is computed: the kernel is one loop)."""
    x_t = _nodes_last(x)
    num_nodes = x.size(0)
    grad_x_t = torch.empty_like(x_t)  # [H, C, N]
    grad_points = torch.zeros_like(points)
    grad_cos = torch.zeros_like(cos_weight)
    grad_sin = torch.zeros_like(sin_weight)
    for start in range(0, num_nodes, chunk_size):
        stop = min(start + chunk_size, num_nodes)
        chunk_x, chunk_points, chunk_cos, chunk_sin = _COMPILED_BACKWARD(
            points, x_t[:, :, start:stop], grad_t[:, :, start:stop],
            cos_weight, sin_weight)
        grad_x_t[:, :, start:stop] = chunk_x
        grad_points += chunk_points
        grad_cos += chunk_cos
        grad_sin += chunk_sin
    return (grad_x_t.permute(2, 0, 1).contiguous(), grad_points, grad_cos,
            grad_sin)
