r"""KEPGATConv's SVGP sample (:mod:`ikgat.nn.svgp_sample`) on CPU in float32
through the C kernels of ``svgp_sample_native.c`` (built by
:mod:`ikgat.ops.native`): one branch's draw

.. math::
    F_{n,h,d} = y_{n,h,d} + \big\|u_{n,h,d}\big\|\, \varepsilon_{n,h,d},
    \qquad y_{n,h} = b(x_n)_h^\top W_h,

and its backward pass, in one loop over blocks of 16 nodes a head that keeps
the means and spreads :math:`y` (:math:`C + Cs` numbers a node and head) in
registers: the spreads' norms, which as ATen reductions over :math:`s = 8`
numbers took about 6 ns an element, cost a few multiply-adds.  Measured at
PubMed's size: see :mod:`ikgat.nn.svgp_sample`.
"""
import ctypes
import functools
from typing import Optional, Tuple

import torch
from torch import Tensor

import ikgat.ops.native as native

_POINTER = ctypes.c_void_p
_LONG = ctypes.c_long


@functools.cache
def _limits(library: ctypes.CDLL) -> Tuple[int, int]:
    r"""Declare the kernels' signatures; return the largest rank and
    channel count they take."""
    library.ikgat_svgp_forward.argtypes = (
        [_POINTER, _LONG, _POINTER, _POINTER, _LONG, _POINTER] + [_LONG] * 6)
    library.ikgat_svgp_forward.restype = ctypes.c_int
    library.ikgat_svgp_backward.argtypes = (
        [_POINTER, _LONG, _POINTER, _POINTER, _LONG, _POINTER, _LONG,
         _POINTER, _POINTER] + [_LONG] * 6)
    library.ikgat_svgp_backward.restype = ctypes.c_int
    rank, channels = ctypes.c_int(), ctypes.c_int()
    library.ikgat_svgp_limits(ctypes.byref(rank), ctypes.byref(channels))
    return rank.value, channels.value


def _library() -> Optional[ctypes.CDLL]:
    library = native.load('svgp_sample_native')
    if library is not None:
        _limits(library)
    return library


def applies(scores: Tensor, channels: int) -> bool:
    r"""Whether the C kernels take scores :obj:`scores` :math:`(N, H, s)`
    with :obj:`channels` output channels: float32 on CPU, rank and channels
    within the kernels' limits, the library built, and not while
    :func:`torch.compile` traces (the sample is then its PyTorch
    operations, which the compiler sees)."""
    if (scores.device.type != 'cpu' or scores.dtype != torch.float32
            or torch.compiler.is_compiling()):
        return False
    library = _library()
    if library is None:
        return False
    max_rank, max_channels = _limits(library)
    return scores.size(-1) <= max_rank and channels <= max_channels


def _rows(tensor: Tensor) -> Tuple[Tensor, int]:
    r""":obj:`tensor` :math:`(N, H, k)` with each row one contiguous block,
    and the distance between its rows (a copy only where a row is not one
    block, as in no layout of the layer's own)."""
    heads, width = tensor.shape[1:]
    if ((width > 1 and tensor.stride(2) != 1)
            or (heads > 1 and tensor.stride(1) != width)):
        tensor = tensor.contiguous()
    return tensor, tensor.stride(0)


def _pointer(tensor: Tensor) -> _POINTER:
    return _POINTER(tensor.data_ptr())


def sample(scores: Tensor, weights: Tensor, noise: Tensor) -> Tensor:
    r""":math:`F` :math:`(N, H, C)` of one branch from the scores
    :math:`b(x)` :math:`(N, H, s)`, the weights :math:`W = \Lambda^{-1}[M |
    \tilde L]` :math:`(H, s, C + Cs)` and the noise :math:`\sigma
    \varepsilon` :math:`(N, H, C)`."""
    (scores, ldv), (noise, lde) = _rows(scores), _rows(noise)
    weights = weights.contiguous()
    num_nodes, heads, rank = scores.shape
    channels = noise.size(-1)
    out = scores.new_empty(num_nodes, heads, channels)
    library = _library()
    native.split_heads(lambda h0, h1: library.ikgat_svgp_forward(
        _pointer(scores), ldv, _pointer(weights), _pointer(noise), lde,
        _pointer(out), num_nodes, heads, rank, channels, h0, h1), heads)
    return out


def sample_backward(grad: Tensor, scores: Tensor, weights: Tensor,
                    noise: Tensor) -> Tuple[Tensor, Tensor]:
    r"""From :math:`G = \partial\mathcal{L}/\partial F` :math:`(N, H, C)`:
    the gradients of :func:`sample` with respect to the scores
    :math:`(N, H, s)` and the weights :math:`(H, s, C + Cs)`."""
    (scores, ldv), (noise, lde), (grad, ldg) = (_rows(scores), _rows(noise),
                                                _rows(grad))
    weights = weights.contiguous()
    num_nodes, heads, rank = scores.shape
    channels = noise.size(-1)
    grad_scores = scores.new_empty(scores.shape)
    grad_weights = torch.zeros_like(weights)
    library = _library()

    def call(h0: int, h1: int) -> None:
        if library.ikgat_svgp_backward(
                _pointer(scores), ldv, _pointer(weights), _pointer(noise),
                lde, _pointer(grad), ldg, _pointer(grad_scores),
                _pointer(grad_weights), num_nodes, heads, rank, channels, h0,
                h1):
            raise MemoryError(
                f'SVGP sample backward: no memory for the {h1 - h0} x '
                f'{weights[0].numel()} x 16 floats of its sums')

    native.split_heads(call, heads)
    return grad_scores, grad_weights
