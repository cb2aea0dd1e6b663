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

#: Elements of one :math:`(H, mR, n)` chunk of angles (float32: 1 MiB);
#: the node chunk is this divided by :math:`H m R`.
CHUNK_ELEMENTS = 1 << 18


def chunk_size_for(heads: int, num_angles: int,
                   chunk_size: Optional[int]) -> int:
    if chunk_size is not None:
        return chunk_size
    return max(1, CHUNK_ELEMENTS // max(1, heads * num_angles))


# --------------------------------------------------------------------------
# Chunk kernels.  Shapes: points u [H, mR, C]; x_chunk [H, C, n];
# cos_weight, sin_weight = A^c, A^s tiled over the sets [H, T, mR];
# grad_chunk G [H, T, n].
# --------------------------------------------------------------------------


def _forward_chunk(points: Tensor, x_chunk: Tensor, cos_weight: Tensor,
                   sin_weight: Tensor) -> Tensor:
    r""":math:`f` of the chunk, :math:`(H, T, n)`, written as reductions
    that Inductor fuses with the cosines and sines."""
    angle = torch.bmm(points, x_chunk)  # theta [H, mR, n]
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
    :math:`(H, T, mR)`."""
    angle = torch.bmm(points, x_chunk)
    cos, sin = angle.cos(), angle.sin()
    num_slopes = cos_weight.size(1)
    rows = [grad_chunk[:, t:t + 1] for t in range(num_slopes)]  # [H, 1, n]
    u = sum(cos_weight[:, t, :, None] * rows[t] for t in range(num_slopes))
    v = sum(sin_weight[:, t, :, None] * rows[t] for t in range(num_slopes))
    grad_angle = cos * v - sin * u  # D
    grad_x = torch.bmm(points.transpose(1, 2), grad_angle)
    grad_points = torch.bmm(grad_angle, x_chunk.transpose(1, 2))
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
    num_nodes, heads, _ = x.shape
    num_angles = points.size(1)
    out = x.new_empty(num_nodes, heads, cos_weight.size(1))
    if backend == 'eager':
        angle_buf, cos_buf = _workspace(
            x, 2, heads * num_angles * min(chunk_size, num_nodes))
    for start in range(0, num_nodes, chunk_size):
        stop = min(start + chunk_size, num_nodes)
        x_chunk = x[start:stop].permute(1, 2, 0)  # [H, C, n], a view
        if backend == 'compile':
            estimate = _COMPILED_FORWARD(points, x_chunk, cos_weight,
                                         sin_weight)
        else:
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
                              chunk_size: int, backend: str,
                              needs: List[bool]
                               ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The gradients of :func:`_chunked_estimate` with respect to
    :math:`x`, :math:`u` and the tiled :math:`A^c, A^s`, walking the same
    chunks and recomputing their cosines and sines (those not in
    :obj:`needs` are left zero)."""
    num_nodes, heads, channels = x.shape
    num_slopes, num_angles = cos_weight.shape[1:]
    need_x, need_points, need_cos, need_sin = needs
    # Nodes last and contiguous, so that the broadcast products below
    # run on unit-stride rows:
    grad_t = grad_out.permute(1, 2, 0).contiguous()  # [H, T, N]

    grad_x = torch.zeros_like(x)
    grad_points = x.new_zeros(heads, num_angles, channels)
    # The eager chunks sum dL/du as its transpose, x D^T (C, mR): a
    # product with the larger output, 2.5 times faster on CPU than D x^T
    # (mR, C) (0.23 against 0.59 ns an angle, 8 heads, mR = 128, 256 nodes):
    grad_points_t = x.new_zeros(heads, channels, num_angles)
    grad_cos = x.new_zeros(heads, num_slopes, num_angles)
    grad_sin = x.new_zeros(heads, num_slopes, num_angles)
    if backend == 'eager':
        # A^c, A^s as [H, mR, T], the left factors of U and V:
        cos_weight_t = cos_weight.transpose(1, 2)
        sin_weight_t = sin_weight.transpose(1, 2)
        points_t = points.transpose(1, 2)  # [H, C, mR]
        buffers = _workspace(
            x, 4, heads * num_angles * min(chunk_size, num_nodes))
    for start in range(0, num_nodes, chunk_size):
        stop = min(start + chunk_size, num_nodes)
        x_chunk = x[start:stop].permute(1, 2, 0)  # [H, C, n]
        grad_chunk = grad_t[:, :, start:stop]  # [H, T, n]
        if backend == 'compile':
            chunk_x, chunk_points, chunk_cos, chunk_sin = _COMPILED_BACKWARD(
                points, x_chunk, grad_chunk, cos_weight, sin_weight)
            grad_x[start:stop] = chunk_x.permute(2, 0, 1)
            grad_points += chunk_points
            grad_cos += chunk_cos
            grad_sin += chunk_sin
            continue
        shape = (heads, num_angles, stop - start)
        angle, cos, u, v = [_view(buffer, *shape) for buffer in buffers]
        torch.bmm(points, x_chunk, out=angle)  # theta
        cos, sin = cos_sin(angle, cos, angle)  # sin in place
        if need_cos:  # dL/dA^c = sum_n G cos(theta)
            grad_cos.baddbmm_(grad_chunk, cos.transpose(1, 2))
        if need_sin:
            grad_sin.baddbmm_(grad_chunk, sin.transpose(1, 2))
        if not (need_x or need_points):
            continue
        # U = sum_t A^c_t G_t, V = sum_t A^s_t G_t as products with an
        # inner size of T: one pass over the chunk each (the broadcast
        # multiply-adds took T passes, 1.45 times as long at T = 2):
        torch.bmm(cos_weight_t, grad_chunk, out=u)
        torch.bmm(sin_weight_t, grad_chunk, out=v)
        # D = cos(theta) V - sin(theta) U = dL/dtheta, in place, in two
        # passes:
        grad_angle = cos.mul_(v).addcmul_(sin, u, value=-1)
        if need_x:  # dL/dx = sum_{s,r} D u
            grad_x[start:stop] = torch.bmm(points_t,
                                           grad_angle).permute(2, 0, 1)
        if need_points:  # dL/du = sum_n D x, as its transpose
            grad_points_t.baddbmm_(x_chunk, grad_angle.transpose(1, 2))
    if backend != 'compile':
        grad_points.copy_(grad_points_t.transpose(1, 2))
    return grad_x, grad_points, grad_cos, grad_sin
