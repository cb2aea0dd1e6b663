r"""A fused, memory-lean evaluation of the node-wise random-feature term.

:func:`fused_fourier_log_similarity` returns exactly what
:func:`ikgat.kernels.random_features.fourier_log_similarity` returns,

.. math::
    \ell_{n,h,t} = \log\left(f_{n,h,t}^2 + \epsilon\right), \qquad
    f_{n,h,t} = \frac{\phi(v_n)^\top \phi(c_t a_h)}{m^2 R},

but never keeps an :math:`N \times H \times R` tensor alive: the nodes are
processed in chunks (projection :math:`\to` cos/sin :math:`\to` reduction
against the anchor features), and the backward pass recomputes the cosines
and sines of each chunk instead of storing them.  Only :math:`x`, the
spectral points, the :math:`(H, T, R)` anchor features and the
:math:`(N, H, T)` estimate are saved for backward.

Notation (one head :math:`h`; heads are a batch dimension throughout).  With
:math:`m` spectral point sets :math:`w_{s,r} \in \mathbb{R}^{2C}`, let
:math:`u_{s,r}` be the half of :math:`w_{s,r}` that meets the node
coordinates (the first :math:`C` entries for targets, ``is_source=False``,
the last :math:`C` for sources, ``is_source=True``), so :math:`w_{s,r}^\top v_n =
u_{s,r}^\top x_n =: \theta_{n,s,r}`, and :math:`b_{s,r} = w_{s,r}^\top a`.
The anchor features are

.. math::
    A^{c}_{t,r} = \sum_{s'} \cos(c_t b_{s',r}), \qquad
    A^{s}_{t,r} = \sum_{s'} \sin(c_t b_{s',r}),

and since :math:`\phi_r(v_n) = \sum_s [\cos\theta_{n,s,r};
\sin\theta_{n,s,r}]` the estimate is a sum over *all* pairs
:math:`(s, r)`, scaled by :math:`\kappa = 1 / (m^2 R)` (inside the
kernels, which saves the operations that would scale :math:`A`):

.. math::
    f_{n,t} = \kappa \sum_{s, r} \cos\theta_{n,s,r}\, A^{c}_{t,r}
    + \sin\theta_{n,s,r}\, A^{s}_{t,r}.

**Backward, derived by hand.**  Let :math:`G_{n,t} = \kappa\, \partial L /
\partial f_{n,t}`; the operator returns :math:`\ell` itself (and :math:`f`,
saved for the backward pass), so its backward pass starts from
:math:`\partial L / \partial \ell` and first forms :math:`G = \kappa\,
\partial L / \partial \ell \cdot 2f / (f^2 + \epsilon)`, the logarithm's
derivative, inside the same kernels.  With

.. math::
    U_{n,r} = \sum_t G_{n,t} A^{c}_{t,r}, \qquad
    V_{n,r} = \sum_t G_{n,t} A^{s}_{t,r},

the chain rule gives, for every set :math:`s`,

.. math::
    \frac{\partial L}{\partial \theta_{n,s,r}}
    = \cos\theta_{n,s,r}\, V_{n,r} - \sin\theta_{n,s,r}\, U_{n,r}
    =: D_{n,s,r},

and, because :math:`\theta = u^\top x` is bilinear,

.. math::
    \frac{\partial L}{\partial x_n} = \sum_{s,r} D_{n,s,r}\, u_{s,r},
    \qquad
    \frac{\partial L}{\partial u_{s,r}} = \sum_n D_{n,s,r}\, x_n,

    \frac{\partial L}{\partial A^{c}_{t,r}}
    = \sum_{n,s} G_{n,t} \cos\theta_{n,s,r}, \qquad
    \frac{\partial L}{\partial A^{s}_{t,r}}
    = \sum_{n,s} G_{n,t} \sin\theta_{n,s,r}.

Each of these is a sum over nodes of per-chunk products, so the backward
pass walks the same chunks as the forward pass, recomputing
:math:`\cos\theta` and :math:`\sin\theta` of the chunk.  The remaining
steps are tiny (:math:`H \times R` sized) and left to autograd: the anchor
features from :math:`b_{s,r} = w_{s,r}^\top a` (which sends
:math:`\partial L / \partial A` on to :math:`w` and :math:`a`), the
scattering of :math:`\partial L / \partial u` into the matching half of
:math:`w`.

Layout: inside the function the nodes are the *last* dimension of every
chunk (:math:`x^\top` chunks are :math:`(H, C, n)` views, angles
:math:`(H, mR, n)`), so that every product is a batched matrix product whose
large dimension is an outer one.  Measured per chunk on CPU, the reduction
against the anchor features as :math:`(T \times mR)(mR \times n)` is about
8 times faster than :math:`(n \times mR)(mR \times T)` with :math:`T = 2`,
the gradient of the anchor features about 14 times, that of :math:`x` about
2 times; one big :math:`(N, H, \cdot)` einsum instead of chunks was 4 to 6
times slower (page faults on the multi-gigabyte outputs).

Four interchangeable kernels compute the same formulas:

* ``node_path='eager'``, the default: on float32 CUDA tensors the Triton
  kernels of :mod:`ikgat.ops.node_terms_triton` (one launch for the
  forward pass, two for the backward pass, however many nodes: a loop of
  chunks is launch-bound on a GPU); on float32 CPU tensors the C kernels of
  :mod:`ikgat.ops.node_terms_native` where the machine builds them (Linux
  on x86-64 with a C compiler: one loop over blocks of 16 nodes a head,
  1.4-1.7 times faster than the eager chunks, their first build about
  3 s, then cached; whether they apply is a constant
  to :func:`torch.compile`, which traces no build); elsewhere on CPU, from
  :data:`COMPILE_FROM_ANGLES` angles a side (:math:`N H m R`: PubMed's 5 M
  with ``direct``'s defaults, not CiteSeer's 0.85 M) the compiled chunks of
  ``'compile'``, where a first compilation repays itself within a training
  run; elsewhere plain tensor operations on reused chunk buffers (fresh
  multi-megabyte tensors per chunk cost page faults that doubled the
  time);

* ``node_path='triton'``: the Triton kernels on any device (on CPU through
  Triton's interpreter, ``TRITON_INTERPRET=1``, for tests);
* ``node_path='compile'``: the same per-chunk formulas through
  :func:`torch.compile`, with the angles written as :math:`C`
  multiply-adds instead of a matrix product, so that Inductor makes one
  C++ loop of the angles, their vectorised sines and cosines and the
  reductions, keeping no chunk-sized buffer in the forward pass; the
  chunks are views of one nodes-last copy of :math:`x`.  One side's
  forward and backward at PubMed's size (one thread, 8 heads, R = 16,
  two sets, an AMD EPYC; ``benchmarks/results/node_floor.md``): 24.9 ms
  against 43.0 ms for the eager chunks with ATen's sines and cosines and
  24.4 ms with NumPy's (:mod:`ikgat.ops.trigonometry`).  A whole PubMed
  epoch of the GAT recipe, interleaved in one process with NumPy's in
  the eager chunks: ``direct`` 1.36-1.40 times GATConv's eager, 1.29-1.35
  compiled; MIKANConv 1.70-1.79 and 1.47-1.59 (the forward pass gains
  most: the evaluation pass and the second layer's heads).  The first
  call compiles (10-17 s without Inductor's disk cache, about 3 s with
  it, once per process, dtype and :math:`C`;
  ``benchmarks/results/compile_pays.md``); if compiling fails the eager
  kernel is used, with a warning.

The estimate is a registered operator (``ikgat::fourier_estimate`` and
its backward, ``torch.library.custom_op``): :func:`torch.compile` keeps it as
one opaque node, and its fake implementation gives the shapes on the
``meta`` device without launching anything.
"""
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor

import ikgat.ops.node_terms_native as node_terms_native
import ikgat.ops.node_terms_triton as node_terms_triton
from ikgat.deprecation import renamed_argument
from ikgat.ops.compiled_features import use_compiled
from ikgat.ops.node_terms_chunks import (
    CHUNK_ELEMENTS,  # noqa: F401 (documented here)
    chunk_size_for,
    chunked_estimate,
    chunked_estimate_backward,
)
from ikgat.ops.runtime import triton_usable

#: The node paths of :func:`fused_fourier_log_similarity` (those of
#: :data:`~ikgat.kernels.random_features.NODE_PATHS` without ``'plain'``).
BACKENDS = ('eager', 'compile', 'triton')
#: The fewest angles a side (:math:`N H m R`) from which ``'eager'`` runs
#: the compiled chunks on CPU: 2 M, between CiteSeer's and PubMed's sizes.
#: At PubMed's size a whole epoch of the GAT recipe saved about 40 ms with
#: ``direct`` and 80 ms with MIKANConv (the module docstring), repaying a
#: first compilation within a few hundred epochs (tens with Inductor's
#: disk cache); at Cora's and CiteSeer's sizes the compiled chunks were
#: no faster than the eager ones (``benchmarks/results/node_floor.md``).
COMPILE_FROM_ANGLES = 1 << 21


# The estimate as a pair of registered operators (forward, backward): one
# opaque node under torch.compile, a fake (shape-only) implementation that
# also serves the 'meta' device, and autograd through the backward operator,
# which recomputes the cosines and sines (so the operator is differentiable
# once).  'node_path' is resolved before the call: 'triton' runs the Triton
# kernels of ikgat.ops.node_terms_triton, 'eager' and 'compile' the chunks.
@torch.library.custom_op('ikgat::fourier_estimate', mutates_args=())
def fourier_estimate(x: Tensor, points: Tensor, cos_weight: Tensor,
                     sin_weight: Tensor, is_source: bool, chunk_size: int,
                     node_path: str, eps: float, scale: float
                     ) -> Tuple[Tensor, Tensor]:
    r"""The log-similarity :math:`\ell = \log(f^2 + \epsilon)` and the
    estimate :math:`f`, both of shape :math:`(N, H, T)`, from node
    projections :math:`x` :math:`(N, H, C)`, the stacked spectral point
    sets :math:`(m, H, R, 2C)` (of which the node half meets :math:`x`) and
    the anchor features :math:`A^c, A^s` :math:`(H, T, R)`, and
    :math:`\kappa` = :obj:`scale`; see the module docstring for the
    formulas.  Only
    :math:`\ell` is differentiable; :math:`f` is what its backward pass
    needs."""
    if node_path == 'triton':
        return node_terms_triton.estimate(x, points, cos_weight, sin_weight,
                                          is_source, eps, scale)
    num_sets = points.size(0)
    arguments = (x, node_side_points(points, is_source),
                 cos_weight.repeat(1, 1, num_sets),
                 sin_weight.repeat(1, 1, num_sets))
    estimate = (node_terms_native.estimate(*arguments)
                if node_path == 'native' else
                chunked_estimate(*arguments, chunk_size, node_path)
                ).mul_(scale)
    return (estimate * estimate + eps).log(), estimate


@fourier_estimate.register_fake
def _(x, points, cos_weight, sin_weight, is_source, chunk_size, node_path,
      eps, scale):
    shape = (x.size(0), x.size(1), cos_weight.size(1))
    return x.new_empty(shape), x.new_empty(shape)


@torch.library.custom_op('ikgat::fourier_estimate_backward', mutates_args=())
def fourier_estimate_backward(grad_log: Tensor, x: Tensor, points: Tensor,
                              cos_weight: Tensor, sin_weight: Tensor,
                              estimate: Tensor, is_source: bool,
                              chunk_size: int, node_path: str,
                              needs: List[bool], eps: float, scale: float
                              ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The gradients of :func:`fourier_estimate`'s :math:`\ell` with
    respect to :math:`x`, the sets (their node half; the other half gets its
    gradient through :math:`A^c, A^s`), :math:`A^c` and :math:`A^s`, from
    :math:`\partial L / \partial \ell` and the saved estimate :math:`f`
    (see the module docstring for their derivation)."""
    if node_path == 'triton':
        return node_terms_triton.estimate_backward(grad_log.contiguous(), x,
                                                   points, cos_weight,
                                                   sin_weight, estimate, eps,
                                                   scale, is_source)
    num_sets, heads, num_points, width = points.shape
    channels = width // 2
    # G = kappa dL/dl * dl/df, dl/df = 2f / (f^2 + eps):
    grad_out = grad_log * (2.0 * scale) * estimate / (estimate * estimate +
                                                      eps)
    side_points = node_side_points(points, is_source)
    if node_path == 'native':  # A^c, A^s tiled over the sets, as forward
        grad_x, grad_u, grad_cos, grad_sin = (
            node_terms_native.estimate_backward(
                grad_out, x, side_points, cos_weight.repeat(1, 1, num_sets),
                sin_weight.repeat(1, 1, num_sets)))
    else:
        grad_x, grad_u, grad_cos, grad_sin = chunked_estimate_backward(
            grad_out, x, side_points, cos_weight, sin_weight, num_sets,
            chunk_size, node_path, needs)
    grad_points = torch.zeros_like(points)
    half = slice(channels, width) if is_source else slice(0, channels)
    grad_points[..., half] = grad_u.view(heads, num_sets, num_points,
                                         channels).transpose(0, 1)

    def untile(grad: Tensor) -> Tensor:  # [H, T, mR] -> [H, T, R]
        return grad.view(heads, -1, num_sets, num_points).sum(2)

    return grad_x, grad_points, untile(grad_cos), untile(grad_sin)


@fourier_estimate_backward.register_fake
def _(grad_log, x, points, cos_weight, sin_weight, estimate, is_source,
      chunk_size, node_path, needs, eps, scale):
    return (torch.empty_like(x), torch.empty_like(points),
            torch.empty_like(cos_weight), torch.empty_like(sin_weight))


def _setup_context(ctx, inputs, output):
    (x, points, cos_weight, sin_weight, is_source, chunk_size, node_path,
     eps, scale) = inputs
    _, estimate = output
    ctx.mark_non_differentiable(estimate)
    ctx.set_materialize_grads(False)  # no zeros for the estimate's gradient
    ctx.save_for_backward(x, points, cos_weight, sin_weight, estimate)
    ctx.is_source, ctx.chunk_size, ctx.node_path = (is_source, chunk_size,
                                                    node_path)
    ctx.eps, ctx.scale = eps, scale


def _backward(ctx, grad_log, grad_estimate):
    if grad_log is None:  # l unused (grads are not materialised as zeros)
        return (None, ) * 9
    needs = list(ctx.needs_input_grad[:4])
    grads = fourier_estimate_backward(grad_log, *ctx.saved_tensors,
                                      ctx.is_source, ctx.chunk_size,
                                      ctx.node_path, needs, ctx.eps,
                                      ctx.scale)
    return tuple(grad if need else None
                 for grad, need in zip(grads, needs)) + (None, ) * 5


fourier_estimate.register_autograd(_backward, setup_context=_setup_context)


def node_side_points(points: Tensor, is_source: bool) -> Tensor:
    r"""The halves :math:`u_{s,r}` of the stacked sets :math:`(m, H, R,
    2C)` that meet the node coordinates, as :math:`(H, mR, C)`, set after
    set."""
    num_sets, heads, num_points, width = points.shape
    half = points[..., width // 2:] if is_source else points[..., :width // 2]
    return half.transpose(0, 1).reshape(heads, num_sets * num_points,
                                        width // 2)


def anchor_features(anchor: Tensor, slopes: Tensor,
                    points: Tensor) -> Tuple[Tensor, Tensor]:
    r"""Return :math:`A^c, A^s` of shape :math:`(H, T, R)`:
    :math:`\sum_s \cos(c_t\, w_{s,r}^\top a_h)` and the sines, for the
    stacked sets :math:`(m, H, R, 2C)` (the normaliser :math:`m^2 R` is
    applied in :func:`fourier_estimate`)."""
    anchor_angle = (points * anchor.unsqueeze(1)).sum(-1)  # [m, H, R]
    scaled = anchor_angle.unsqueeze(-2) * slopes.view(-1, 1)  # [m, H, T, R]
    return scaled.cos().sum(0), scaled.sin().sum(0)


def fused_fourier_log_similarity(x: Tensor, anchor: Tensor, is_source: bool,
                                 slopes: Tensor,
                                 spectral_points: Sequence[Tensor],
                                 eps: float, batch: Optional[Tensor] = None,
                                 chunk_size: Optional[int] = None,
                                 node_path: str = 'eager', *,
                                 backend: Optional[str] = None) -> Tensor:
    r"""Return :math:`\log(f(v_n, c_t a_h)^2 + \epsilon)` of shape
    :math:`(N, H, T)`, the same result as
    :func:`~ikgat.kernels.random_features.fourier_log_similarity`, computed
    in node chunks with a hand-written backward pass that recomputes the
    cosines and sines (see the module docstring).  Differentiable once
    (no double backward).

    Args:
        x (torch.Tensor): Node projections :math:`(N, H, C)`.
        anchor (torch.Tensor): Attention vectors :math:`(H, 2C)`.
        is_source (bool): :obj:`False` for targets, :obj:`True` for
            sources.
        slopes (torch.Tensor): :math:`c_t`, shape :math:`(T,)` (it gets a
            gradient through autograd, like the anchor).
        spectral_points (list of torch.Tensor): Sets of shape
            :math:`(H, R, 2C)` (or :math:`(1, H, R, 2C)`: one sample shared
            by all graphs).
        eps (float): :math:`\epsilon` inside the logarithm.
        batch (torch.Tensor, optional): Unused; accepted for the signature
            of :func:`fourier_log_similarity`. (default: :obj:`None`)
        chunk_size (int, optional): Nodes per chunk; by default about
            :obj:`CHUNK_ELEMENTS` angles per chunk. (default: :obj:`None`)
        node_path (str, optional): The kernel, :obj:`"eager"` (Triton on
            float32 CUDA tensors, chunks elsewhere), :obj:`"compile"`
            (chunks through :func:`torch.compile`, falls back to eager if
            compiling fails) or :obj:`"triton"` (the Triton kernels on any
            device; on CPU through the interpreter), as the kernels'
            ``node_path`` (formerly ``backend``, still accepted with a
            :class:`DeprecationWarning`). (default: :obj:`"eager"`)
    """
    backend = renamed_argument('fused_fourier_log_similarity', 'backend',
                               'node_path', backend, node_path, 'eager')
    points = _stacked_points(spectral_points, x)
    _check_path(chunk_size, backend)
    features = anchor_features(anchor, slopes, points)
    return _log_similarity(x, points, features, is_source, eps, chunk_size,
                           backend)


def fused_fourier_log_similarities(x_dst: Tensor, x_src: Tensor,
                                   anchor: Tensor, slopes: Tensor,
                                   spectral_points: Sequence[Tensor],
                                   eps: float,
                                   chunk_size: Optional[int] = None,
                                   node_path: str = 'eager'
                                   ) -> Tuple[Tensor, Tensor]:
    r"""Both sides of the attention at once: what
    :func:`fused_fourier_log_similarity` returns for the targets
    :obj:`x_dst` (``is_source=False``) and for the sources :obj:`x_src`
    (``is_source=True``), with the anchor features :math:`A^c, A^s`, which
    do not depend on the side, computed once (their operations and their
    backward pass are half the launches of the node-wise term on a GPU).
    Arguments as in :func:`fused_fourier_log_similarity`."""
    points = _stacked_points(spectral_points, x_dst, x_src)
    _check_path(chunk_size, node_path)
    features = anchor_features(anchor, slopes, points)
    return (_log_similarity(x_dst, points, features, False, eps, chunk_size,
                            node_path),
            _log_similarity(x_src, points, features, True, eps, chunk_size,
                            node_path))


def _stacked_points(spectral_points: Sequence[Tensor], *xs: Tensor
                    ) -> Tensor:
    r"""The sets :math:`(H, R, 2C)` (or :math:`(1, H, R, 2C)`) stacked as
    :math:`(m, H, R, 2C)`, contiguous, checked against the projections
    :obj:`xs`; already stacked sets (one tensor :math:`(m, H, R, 2C)`) are
    taken as they are."""
    if isinstance(spectral_points, Tensor) and spectral_points.dim() == 4:
        _check_projections(spectral_points.shape[-1], xs)
        return spectral_points.contiguous()
    sets = list(spectral_points)
    if sets and sets[0].dim() == 4 and sets[0].size(0) == 1:
        sets = [points[0] for points in sets]
    if not sets or any(points.dim() != 3 for points in sets):
        shapes = [tuple(points.shape) for points in sets]
        raise ValueError(f"fused_fourier_log_similarity takes spectral point "
                         f"sets of shape (H, R, 2C) (got {shapes}); use "
                         f"fourier_log_similarity for per-graph samples")
    _check_projections(sets[0].shape[-1], xs)
    return (torch.stack(sets) if len(sets) > 1 else
            sets[0].unsqueeze(0)).contiguous()


def _check_projections(width: int, xs: Sequence[Tensor]) -> None:
    for x in xs:
        if x.dim() != 3 or width != 2 * x.size(-1):
            raise ValueError(f"fused_fourier_log_similarity: x must be "
                             f"(N, H, C) with spectral points of width 2C "
                             f"(got x {tuple(x.shape)}, width {width})")


def _check_path(chunk_size: Optional[int], node_path: str) -> None:
    if chunk_size is not None and (isinstance(chunk_size, bool) or
                                   not isinstance(chunk_size, int) or
                                   chunk_size < 1):
        raise ValueError(f"'chunk_size' must be a positive integer "
                         f"(got {chunk_size!r})")
    if node_path not in BACKENDS:
        raise ValueError(f"Unknown node_path {node_path!r} for the fused "
                         f"path; choose one of {list(BACKENDS)}")


def _log_similarity(x: Tensor, points: Tensor,
                    features: Tuple[Tensor, Tensor], is_source: bool,
                    eps: float, chunk_size: Optional[int],
                    node_path: str) -> Tensor:
    r""":math:`\log(f^2 + \epsilon)` of one side from the stacked sets and
    the anchor features."""
    anchor_cos, anchor_sin = features
    angles_per_node = x.size(1) * points.size(0) * points.size(2)
    node_path = _resolve_node_path(node_path, x, x.size(0) * angles_per_node,
                                   anchor_cos.size(1))
    size = chunk_size_for(x.size(1), points.size(0) * points.size(2),
                          chunk_size, node_path, x.device)
    log_similarity, _ = fourier_estimate(x.contiguous(), points,
                                         anchor_cos.contiguous(),
                                         anchor_sin.contiguous(),
                                         bool(is_source), size, node_path,
                                         float(eps),
                                         1.0 / (points.size(0)**2 *
                                                points.size(2)))
    return log_similarity


def _resolve_node_path(node_path: str, x: Tensor, angles: int,
                       num_slopes: int) -> str:
    r"""The chunk kernel that runs for :obj:`angles` angles in all:
    ``'eager'`` becomes ``'triton'`` for float32 tensors on a CUDA device
    (or ``'meta'``, which stands for one) when Triton is installed,
    ``'native'`` for float32 CPU tensors where
    :func:`~ikgat.ops.node_terms_native.applies`, and ``'compile'`` on CPU
    where
    :func:`~ikgat.ops.compiled_features.use_compiled` says compiling pays
    (at least :data:`~ikgat.ops.compiled_features.MIN_ANGLES` angles);
    ``'triton'`` needs float32 (on CPU tensors it runs in Triton's
    interpreter)."""
    if node_path == 'eager' and x.device.type in ('cuda', 'meta') and (
            x.dtype == torch.float32 and triton_usable()):
        return 'triton'
    if node_path == 'eager' and node_terms_native.applies(x, num_slopes):
        # On CPU in float32 the C kernels, where they can be built:
        return 'native'
    if node_path == 'eager' and use_compiled(x, angles,
                                             COMPILE_FROM_ANGLES):
        # On CPU, from PubMed's size up, the compiled chunks repay their
        # first compilation within a training run (one loop for the
        # angles, their sines and cosines and the reductions):
        return 'compile'
    if node_path == 'triton' and x.dtype != torch.float32:
        raise ValueError(f"fused_fourier_log_similarity: node_path='triton' "
                         f"computes in float32 (got {x.dtype}); pass float32 "
                         f"projections or node_path='eager'")
    return node_path
