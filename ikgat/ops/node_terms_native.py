r"""The node terms of :mod:`ikgat.ops.node_terms` on CPU in float32 through
the C kernels of ``node_terms_native.c`` (built by :mod:`ikgat.ops.native`),
and the random-feature tables of :mod:`ikgat.ops.edge_fourier`
(:func:`features`, :func:`features_backward`; IKTransformerConv's kernels)
through the same loops:
the same formulas as the chunk kernels of :mod:`ikgat.ops.node_terms_chunks`
in one loop over blocks of 16 nodes a head, which keeps the angles, their
cosines and sines (polynomials inlined in the loop) and every partial sum in
registers and the L1 cache and recomputes the cosines and sines in the
backward pass.

Measured on one thread of an AMD EPYC (8 heads x 8 channels, 2 sets of 16
points), a side's forward and backward pass take 1.7 ms at Cora's size
against 4.4 for the eager chunks and 2.8 compiled, 14.1 ms at PubMed's
against 28.3 and 30.0, one process (``benchmarks/results/node_floor.md``).
With more than one torch thread the heads are shared among that many
threads (the calls release the GIL; each thread writes its own heads'
outputs).
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
def _limits(library: ctypes.CDLL) -> Tuple[int, int, int]:
    r"""Declare the kernels' signatures; return the most channels, slopes
    and points a set they take."""
    library.ikgat_node_terms_forward.argtypes = [_POINTER] * 5 + [_LONG] * 7
    library.ikgat_node_terms_backward.argtypes = [_POINTER] * 9 + [_LONG] * 7
    library.ikgat_node_table_forward.argtypes = [_POINTER] * 3 + [_LONG] * 7
    library.ikgat_node_table_backward.argtypes = [_POINTER] * 5 + [_LONG] * 7
    for name in ('terms_forward', 'terms_backward', 'table_forward',
                 'table_backward'):
        getattr(library, f'ikgat_node_{name}').restype = ctypes.c_int
    channels, slopes, points = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    library.ikgat_node_terms_limits(ctypes.byref(channels),
                                    ctypes.byref(slopes),
                                    ctypes.byref(points))
    return channels.value, slopes.value, points.value


def _library() -> Optional[ctypes.CDLL]:
    library = native.load('node_terms_native')
    if library is not None:
        _limits(library)
    return library


@torch.compiler.assume_constant_result
def _max_channels() -> int:
    r"""The most channels :math:`C` the kernels take; 0 where there are no
    kernels.  Under :func:`torch.compile` called once while tracing, its
    result a constant of the graph (no file system access traced)."""
    library = _library()
    return 0 if library is None else _limits(library)[0]


@torch.compiler.assume_constant_result
def _max_slopes() -> int:
    r"""The most slopes :math:`T` the kernels take (as
    :func:`_max_channels`)."""
    library = _library()
    return 0 if library is None else _limits(library)[1]


@torch.compiler.assume_constant_result
def _max_points() -> int:
    r"""The most points a set :math:`R` the table kernels take (as
    :func:`_max_channels`)."""
    library = _library()
    return 0 if library is None else _limits(library)[2]


def applies(x: Tensor, num_slopes: int) -> bool:
    r"""Whether the C kernels take projections :obj:`x` :math:`(N, H, C)`
    with :obj:`num_slopes` slopes: float32 on CPU, not more channels and
    slopes than the kernels hold, and the library built."""
    return (x.device.type == 'cpu' and x.dtype == torch.float32
            and x.size(-1) <= _max_channels()
            and num_slopes <= _max_slopes())


def _pointer(tensor: Tensor) -> _POINTER:
    return _POINTER(tensor.data_ptr())


def estimate(x: Tensor, points: Tensor, cos_weight: Tensor,
             sin_weight: Tensor) -> Tensor:
    r""":math:`f` :math:`(N, H, T)` (before :math:`\kappa`) from :math:`x`
    :math:`(N, H, C)`, the node-side points :math:`(H, mR, C)` and
    :math:`A^c, A^s` tiled over the sets :math:`(H, T, mR)`."""
    x, points = x.contiguous(), points.contiguous()
    cos_weight, sin_weight = cos_weight.contiguous(), sin_weight.contiguous()
    num_nodes, heads, channels = x.shape
    num_slopes, num_angles = cos_weight.shape[1:]
    out = x.new_empty(num_nodes, heads, num_slopes)
    library = _library()
    native.split_heads(lambda h0, h1: library.ikgat_node_terms_forward(
        _pointer(x), _pointer(points), _pointer(cos_weight),
        _pointer(sin_weight), _pointer(out), num_nodes, heads, channels,
        num_angles, num_slopes, h0, h1), heads)
    return out


def estimate_backward(grad: Tensor, x: Tensor, points: Tensor,
                      cos_weight: Tensor, sin_weight: Tensor
                      ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""From :math:`G = \kappa\,\partial L/\partial f` :math:`(N, H, T)`:
    the gradients of :func:`estimate` with respect to :math:`x`, the points
    and :math:`A^c, A^s` (tiled, as given)."""
    grad, x, points = grad.contiguous(), x.contiguous(), points.contiguous()
    cos_weight, sin_weight = cos_weight.contiguous(), sin_weight.contiguous()
    num_nodes, heads, channels = x.shape
    num_slopes, num_angles = cos_weight.shape[1:]
    grad_x = torch.empty_like(x)
    grad_points = torch.zeros_like(points)
    grad_cos = torch.zeros_like(cos_weight)
    grad_sin = torch.zeros_like(sin_weight)
    library = _library()

    def call(h0: int, h1: int) -> None:
        if library.ikgat_node_terms_backward(
                _pointer(x), _pointer(points), _pointer(cos_weight),
                _pointer(sin_weight), _pointer(grad), _pointer(grad_x),
                _pointer(grad_points), _pointer(grad_cos),
                _pointer(grad_sin), num_nodes, heads, channels, num_angles,
                num_slopes, h0, h1):
            raise MemoryError(
                f'node terms backward: no memory for the {h1 - h0} x '
                f'{num_angles * (channels + 2 * num_slopes)} x 16 floats of '
                f'its sums')

    native.split_heads(call, heads)
    return grad_x, grad_points, grad_cos, grad_sin


def table_applies(x: Tensor, num_points: int) -> bool:
    r"""Whether the table kernels take rows :obj:`x` :math:`(n, H_g, C)`
    with :obj:`num_points` points a set: float32 on CPU, within the
    kernels' channels and points, the library built."""
    return (x.device.type == 'cpu' and x.dtype == torch.float32
            and x.size(-1) <= _max_channels()
            and num_points <= _max_points())


def features(x: Tensor, matrix: Tensor, num_points: int,
             out: Optional[Tensor] = None) -> Tensor:
    r"""The feature table :math:`\phi(x) = [\sum_s \cos a_s;\, \sum_s
    \sin a_s]`, :math:`(H_g, n, 2R)`, of rows :obj:`x` :math:`(n, H_g, C)`
    against the points :obj:`matrix` :math:`(H_g, C, mR)`, :math:`a = x W`
    (:func:`ikgat.ops.compiled_features.features` in one loop), written into
    :obj:`out` where it is a contiguous table of that shape."""
    x = x.contiguous()
    points = matrix.transpose(1, 2).contiguous()  # [Hg, mR, C]
    rows, heads, channels = x.shape
    num_angles = points.size(1)
    shape = (heads, rows, 2 * num_points)
    table = (out if out is not None and out.shape == shape
             and out.is_contiguous() else x.new_empty(shape))
    library = _library()
    native.split_heads(lambda h0, h1: library.ikgat_node_table_forward(
        _pointer(x), _pointer(points), _pointer(table), rows, heads,
        channels, num_angles, num_points, h0, h1), heads)
    return table


def features_backward(grad: Tensor, x: Tensor, matrix: Tensor,
                      num_points: int) -> Tuple[Tensor, Tensor]:
    r"""The gradients of :func:`features` with respect to :obj:`x` and
    :obj:`matrix`, from the table's gradient :obj:`grad` :math:`(H_g, n,
    2R)`."""
    grad, x = grad.contiguous(), x.contiguous()
    points = matrix.transpose(1, 2).contiguous()
    rows, heads, channels = x.shape
    num_angles = points.size(1)
    grad_x = torch.empty_like(x)
    grad_points = torch.zeros_like(points)
    library = _library()

    def call(h0: int, h1: int) -> None:
        if library.ikgat_node_table_backward(
                _pointer(x), _pointer(points), _pointer(grad),
                _pointer(grad_x), _pointer(grad_points), rows, heads,
                channels, num_angles, num_points, h0, h1):
            raise MemoryError(
                f'feature table backward: no memory for the {h1 - h0} x '
                f'{num_angles * channels} x 16 floats of its sums')

    native.split_heads(call, heads)
    return grad_x, grad_points.transpose(1, 2)
