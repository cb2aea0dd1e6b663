r"""Random Fourier feature maps shared by the spectral kernels.

By Bochner's theorem a stationary kernel is the Fourier transform of a
spectral density :math:`p(w)`:

.. math::
    k(x - y) = \mathbb{E}_{w \sim p}\left[\cos\left(w^\top (x - y)\right)
    \right] \approx \frac{1}{R} \sum_{r=1}^R \left(\cos w_r^\top x
    \cos w_r^\top y + \sin w_r^\top x \sin w_r^\top y\right)
    = \frac{1}{R}\,\phi(x)^\top \phi(y),

with :math:`\phi(x) = [\cos w_r^\top x;\, \sin w_r^\top x]_{r=1}^R`.  With
:math:`m` sets of spectral points the feature map is summed over the sets,
:math:`\phi(x) = \sum_{s=1}^m [\cos w_{s,r}^\top x;\, \sin w_{s,r}^\top x]`,
and normalised by :math:`m^2 R` (the non-stationary map of IKA uses
:math:`m = 2`).  The similarity is the square of the estimate,
:math:`\mathrm{sim}(x, y) = f(x, y)^2` with
:math:`f = \phi(x)^\top\phi(y) / (m^2 R) \in [-1, 1]`.
"""
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.utils import to_dense_batch

from ikgat.kernels.base import PairFeatureMap
from ikgat.ops.fourier_features import fourier_features
from ikgat.ops.node_terms import (
    fused_fourier_log_similarities,
    fused_fourier_log_similarity,
)

#: The values of the random-feature kernels' ``node_path`` option, how the
#: node-wise term is evaluated (documented here once):
#:
#: * ``'eager'`` (the default): the fused, memory-lean path of
#:   :mod:`ikgat.ops.node_terms`, cosines recomputed in backward
#:   (Triton kernels on float32 CUDA tensors, node chunks elsewhere);
#: * ``'compile'``: the same chunk kernels through :func:`torch.compile`
#:   (fastest on CPU once compiled);
#: * ``'triton'``: the Triton kernels of :mod:`ikgat.ops.node_terms_triton`
#:   on any device (the default takes them on float32 CUDA tensors; on CPU
#:   this runs Triton's interpreter, for tests);
#: * ``'plain'``: stores the :math:`N \times H \times 2R` features; supports
#:   double backward.
#:
#: The option is the node-against-anchor pairing's (IKGATConv, MIKANConv).
#: The query-against-key pairing (IKTransformerConv) takes the chunks of
#: :mod:`ikgat.ops.edge_fourier` on CPU and the kernels of
#: :mod:`ikgat.ops.transformer_fourier` on CUDA whatever its value; on CPU
#: its node tables go through :func:`torch.compile` by themselves once they
#: are large enough (:mod:`ikgat.ops.compiled_features`, switched off
#: by its ``ENABLED``).
NODE_PATHS = ('eager', 'compile', 'triton', 'plain')

#: The default :math:`\epsilon` of the random-feature kernels'
#: log-similarity :math:`\log(f^2 + \epsilon)`: the floor under which an
#: edge's similarity no longer lowers its score.  At :math:`10^{-2}` an edge
#: is held at most :math:`\log 100 \approx 4.6` under its best neighbour by
#: the similarity alone; at the earlier :math:`10^{-5}` (11.5) the learned
#: and inferred spectral points drove single edges towards
#: :math:`f = 0` and the deterministic evaluation swung from epoch to epoch
#: (PyG's ``examples/gat.py`` on Cora: the validation accuracy's spread
#: over the last 100 epochs fell from 1.9x GATConv's to about 1.2x for
#: ``implicit`` and MIKAN; ``benchmarks.eval_stability``).
DEFAULT_EPS = 1e-2


def check_node_path(owner: str, node_path: str) -> str:
    r"""Return :obj:`node_path` if it is one of :data:`NODE_PATHS`; raise a
    :class:`ValueError` naming :obj:`owner` and the choices otherwise."""
    if node_path not in NODE_PATHS:
        raise ValueError(f"{owner}: unknown 'node_path' {node_path!r}; choose "
                         f"one of {list(NODE_PATHS)}")
    return node_path


def fourier_estimate(x: Tensor, y: Tensor,
                     spectral_points: Sequence[Tensor]) -> Tensor:
    r"""Return :math:`f(x, y) = \phi(x)^\top\phi(y) / (m^2 R)` of shape
    :math:`(*, H)` (the reference, evaluated pair by pair)."""
    num_points = spectral_points[0].size(-2)
    normaliser = num_points * len(spectral_points)**2
    return (fourier_features(x, spectral_points) *
            fourier_features(y, spectral_points)).sum(-1) / normaliser


def fourier_pair_feature_map(query: Tensor, key: Tensor, points: Tensor,
                              eps: float) -> PairFeatureMap:
    r"""The tables :math:`U = \phi(q)`, :math:`V = \phi(k)` of the
    random-feature estimate :math:`f = U^\top V / (m^2 R)`, whose pairwise
    log-similarity :math:`\log(f^2 + \epsilon)` is the ``'log_square'``
    link with :math:`c = 1/(m^2 R)`, for stacked sets :obj:`points`
    :math:`(m, H, R, D)`: given as the queries, keys and points (the
    fused attention computes the features in its kernels)."""
    num_sets, num_points = points.size(0), points.size(2)
    return PairFeatureMap(query, key, 'log_square',
                          1.0 / (num_points * num_sets**2), eps, points)


def fourier_log_similarity(x: Tensor, anchor: Tensor, is_source: bool,
                           slopes: Tensor, spectral_points: Sequence[Tensor],
                           eps: float, batch: Optional[Tensor] = None,
                           node_path: str = 'eager') -> Tensor:
    r"""Return :math:`\log(f(v_n, c_t a_h)^2 + \epsilon)` of shape
    :math:`(N, H, T)`, node-wise.

    Node vectors are :math:`v_n = [x_n \| 0]` (``is_source=False``) or
    :math:`[0 \| x_n]` (``is_source=True``), so :math:`w^\top v_n` only
    needs the matching half of :math:`w`, and :math:`w^\top (c_t a) = c_t\, w^\top a`
    is one scalar per head and spectral point.  The features of the
    :math:`T` scaled anchors are computed once; every node then needs one
    :math:`(2R \times T)` product per head.

    Args:
        x (torch.Tensor): Node projections :math:`(N, H, C)`.
        anchor (torch.Tensor): Attention vectors :math:`(H, 2C)`.
        is_source (bool): :obj:`False` for targets, :obj:`True` for
            sources.
        slopes (torch.Tensor): :math:`c_t`, shape :math:`(T,)`.
        spectral_points (list of torch.Tensor): Sets of shape
            :math:`(H, R, 2C)`, or :math:`(G, H, R, 2C)` with one sample per
            graph of a mini-batch.
        eps (float): :math:`\epsilon` inside the logarithm.
        batch (torch.Tensor, optional): The sorted graph index of each node,
            required with per-graph sets (:math:`G > 1`).
        node_path (str, optional): One of :obj:`NODE_PATHS`.  One shared
            sample of spectral points goes through the fused path (a
            registered operator, also under :func:`torch.compile`) unless
            this is :obj:`"plain"`; per-graph samples (:math:`G > 1`)
            always take the plain path.
            (default: :obj:`"eager"`)
    """
    shared = spectral_points[0].dim() == 3 or spectral_points[0].size(0) == 1
    if shared and node_path != 'plain':
        return fused_fourier_log_similarity(x, anchor, is_source, slopes,
                                            spectral_points, eps,
                                            node_path=node_path)
    if spectral_points[0].dim() == 3:
        spectral_points = [points.unsqueeze(0) for points in spectral_points]
    num_graphs = spectral_points[0].size(0)
    mask: Optional[Tensor] = None
    if num_graphs == 1:
        dense = x.unsqueeze(0)
    elif batch is None:
        raise ValueError('Per-graph spectral points need the batch vector')
    else:
        # One sample per graph: pad the nodes per graph, [G, N_max, H, C], so
        # each graph meets its own points; still O(N H R) work.
        dense, mask = to_dense_batch(x.flatten(1), batch,
                                     batch_size=num_graphs)
        dense = dense.view(num_graphs, -1, *x.shape[1:])
    channels = x.size(-1)
    num_points = spectral_points[0].size(-2)
    # Head-major layout, [G, H, N, *], so both contractions are plain
    # batched matrix products:
    dense = dense.permute(0, 2, 1, 3)  # [G, H, N, C]
    node_features = 0
    anchor_features = 0
    for points in spectral_points:  # [G, H, R, 2C]
        own = points[..., channels:] if is_source else points[..., :channels]
        angle = dense @ own.transpose(-1, -2)  # [G, H, N, R]
        node_features = node_features + torch.cat([angle.cos(), angle.sin()],
                                                  dim=-1)
        anchor_angle = (points * anchor.unsqueeze(1)).sum(-1)  # [G, H, R]
        scaled = anchor_angle.unsqueeze(-1) * slopes  # [G, H, R, T]
        anchor_features = anchor_features + torch.cat(
            [scaled.cos(), scaled.sin()], dim=2)  # [G, H, 2R, T]
    estimate = (node_features @ anchor_features).transpose(1, 2)
    estimate = estimate[0] if mask is None else estimate[mask]  # [N, H, T]
    estimate = estimate / (num_points * len(spectral_points)**2)
    return (estimate * estimate + eps).log()


def fourier_log_similarities(x_dst: Tensor, x_src: Tensor, anchor: Tensor,
                             slopes: Tensor,
                             spectral_points: Sequence[Tensor], eps: float,
                             batch_dst: Optional[Tensor] = None,
                             batch_src: Optional[Tensor] = None,
                             node_path: str = 'eager'
                             ) -> Tuple[Tensor, Tensor]:
    r"""Both sides at once: :func:`fourier_log_similarity` of the targets
    :obj:`x_dst` (``is_source=False``) and of the sources :obj:`x_src`
    (``is_source=True``).  On the fused path the anchor features are
    computed once for both (see
    :func:`~ikgat.ops.node_terms.fused_fourier_log_similarities`);
    the sets may also come stacked, one tensor :math:`(m, H, R, 2C)`."""
    first_shape = spectral_points.shape[1:] if isinstance(
        spectral_points, Tensor) else spectral_points[0].shape
    shared = len(first_shape) == 3 or first_shape[0] == 1
    if shared and node_path != 'plain':
        return fused_fourier_log_similarities(x_dst, x_src, anchor, slopes,
                                              spectral_points, eps,
                                              node_path=node_path)
    return (fourier_log_similarity(x_dst, anchor, False, slopes,
                                   spectral_points, eps, batch_dst,
                                   node_path),
            fourier_log_similarity(x_src, anchor, True, slopes,
                                   spectral_points, eps, batch_src,
                                   node_path))
