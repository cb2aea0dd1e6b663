r"""Random-feature kernels between two vectors, over the edges of a graph,
without per-edge feature tensors.

For a query :math:`q_i` and a key :math:`k_j` (each :math:`(H, C)`) the
random-feature estimate of the kernel pairs their feature maps,

.. math::
    f(q_i, k_j) = \frac{\phi(q_i)^\top \phi(k_j)}{m^2 R}, \qquad
    \phi(v) = \sum_{s=1}^m \left[\cos W_s v;\, \sin W_s v\right]
    \in \mathbb{R}^{2R},

and the edge's log-similarity is :math:`\log(f^2 + \epsilon)` (see
:mod:`ikgat.kernels.random_features`).  Stored per edge, the features
would be :math:`E \times H \times 2R`.  :func:`edge_fourier_log_similarity`
instead computes them per node (:math:`\phi(q)` and :math:`\phi(k)`, one
head group at a time so that the tables stay small) and takes the
:math:`2R`-dot of each edge in chunks; the backward pass recomputes the
features, scatters the gradients of the edge dots into per-node feature
gradients and maps them back through the angles.  With edge features the
key is :math:`k_j + e_{ij}`, per edge: its features are computed per edge
chunk, in the forward and again in the backward pass.  Memory:
:math:`O(E H)` saved for backward, and :math:`O(N H_g R)` plus one chunk of
scratch.

Per-graph spectral points (IKAN's draws for a mini-batch of graphs,
:math:`G > 1`) pair each node, and each edge, with the points of its graph.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

#: Elements of one per-node feature table of a head group
#: (:math:`N \times H_g \times 2R`; float32: 64 MiB).
TABLE_ELEMENTS = 1 << 24
#: Elements of one edge chunk's scratch (:math:`E_c \times H_g \times 2R`).
EDGE_CHUNK_ELEMENTS = 1 << 22


def chunks(count: int, size: int):
    r"""Yield :obj:`(start, stop)` of consecutive chunks of :obj:`size`."""
    for start in range(0, count, size):
        yield start, min(start + size, count)


def edge_fourier_log_similarity(query: Tensor, key: Tensor, points: Tensor,
                                src: Tensor, dst: Tensor, eps: float,
                                edge_key: Optional[Tensor] = None,
                                graph_dst: Optional[Tensor] = None,
                                graph_src: Optional[Tensor] = None) -> Tensor:
    r"""Return :math:`\log(f(q_i, k_j + e_{ij})^2 + \epsilon)` of every edge
    :math:`j \to i`, shape :math:`(E, H)`.

    Args:
        query (torch.Tensor): :math:`(N_t, H, C)`.
        key (torch.Tensor): :math:`(N_s, H, C)`.
        points (torch.Tensor): The spectral points, :math:`(G, m, H, R, C)`
            (:math:`m` sets; one sample per graph).
        src (torch.Tensor): Edge sources, :math:`(E,)`, long.
        dst (torch.Tensor): Edge targets, :math:`(E,)`, long.
        eps (float): :math:`\epsilon`.
        edge_key (torch.Tensor, optional): :math:`e_{ij}`, :math:`(E, H, C)`.
        graph_dst (torch.Tensor, optional): The graph of each target,
            required for :math:`G > 1`.
        graph_src (torch.Tensor, optional): The graph of each source,
            required for :math:`G > 1`.
    """
    if points.dim() != 5 or points.shape[2:] != (
            query.size(1), points.size(3), query.size(2)):
        raise ValueError(f"edge_fourier_log_similarity: 'points' must be "
                         f"(G, m, H, R, C) for query {tuple(query.shape)} "
                         f"(got {tuple(points.shape)})")
    if points.size(0) > 1 and (graph_dst is None or graph_src is None):
        raise ValueError('edge_fourier_log_similarity: per-graph spectral '
                         'points need graph_dst and graph_src')
    if points.size(0) == 1:
        graph_dst = graph_src = None
    return _EdgeFourierLogSimilarity.apply(query, key, edge_key, points, src,
                                           dst, graph_dst, graph_src,
                                           float(eps))


def _angles(x: Tensor, points: Tensor, graph: Optional[Tensor]) -> Tensor:
    r""":math:`W_s x` of shape :math:`(m, n, H_g, R)` for rows :math:`x`
    :math:`(n, H_g, C)` and points :math:`(G, m, H_g, R, C)`; with
    :obj:`graph`, each row against the points of its graph."""
    if graph is None:
        return torch.einsum('nhc,mhrc->mnhr', x, points[0])
    return torch.einsum('nhc,nmhrc->mnhr', x, points[graph])


def _angles_backward(grad: Tensor, x: Tensor, points: Tensor,
                     graph: Optional[Tensor],
                     grad_points: Tensor) -> Tensor:
    r"""The gradient of :func:`_angles` with respect to :obj:`x`; adds the
    one with respect to the points to :obj:`grad_points` (in place)."""
    if graph is None:
        grad_points[0] += torch.einsum('mnhr,nhc->mhrc', grad, x)
        return torch.einsum('mnhr,mhrc->nhc', grad, points[0])
    grad_points.index_add_(0, graph, torch.einsum('mnhr,nhc->nmhrc', grad, x))
    return torch.einsum('mnhr,nmhrc->nhc', grad, points[graph])


def _features(angles: Tensor) -> Tensor:
    r""":math:`\phi = \sum_s [\cos; \sin]` of shape :math:`(n, H_g, 2R)`."""
    return torch.cat([angles.cos(), angles.sin()], dim=-1).sum(0)


def _features_backward(grad: Tensor, angles: Tensor) -> Tensor:
    r"""The gradient of :func:`_features` with respect to the angles."""
    grad_cos, grad_sin = grad.chunk(2, dim=-1)
    return angles.cos() * grad_sin - angles.sin() * grad_cos


def _row_chunk(points: Tensor, graph: Optional[Tensor]) -> int:
    r"""Rows per chunk of :func:`_angles`: the :math:`m \times n \times H_g
    \times R` angles (times :math:`C` gathered points per row with
    :obj:`graph`) within :data:`EDGE_CHUNK_ELEMENTS`."""
    per_row = points[0].numel() // points.size(-1)
    if graph is not None:
        per_row *= points.size(-1) + 1
    return max(1, EDGE_CHUNK_ELEMENTS // max(1, per_row))


def _node_features(x: Tensor, points: Tensor,
                   graph: Optional[Tensor]) -> Tensor:
    r""":math:`\phi(x)` of every row, :math:`(n, H_g, 2R)`, in row chunks."""
    step = _row_chunk(points, graph)
    return torch.cat([
        _features(_angles(x[a:b], points,
                          None if graph is None else graph[a:b]))
        for a, b in chunks(x.size(0), step)
    ]) if x.size(0) else x.new_zeros(0, x.size(1), 2 * points.size(3))


def _node_features_backward(grad: Tensor, x: Tensor, points: Tensor,
                            graph: Optional[Tensor],
                            grad_points: Tensor) -> Tensor:
    r"""Map the gradient of :func:`_node_features` back to :obj:`x` (and
    add the points' share to :obj:`grad_points`)."""
    grad_x = torch.empty_like(x)
    for a, b in chunks(x.size(0), _row_chunk(points, graph)):
        part = None if graph is None else graph[a:b]
        angles = _angles(x[a:b], points, part)
        grad_x[a:b] = _angles_backward(_features_backward(grad[a:b], angles),
                                       x[a:b], points, part, grad_points)
    return grad_x


def _head_groups(num_heads: int, rows: int, width: int):
    r"""Consecutive head slices whose feature tables of :obj:`rows` rows
    stay within :data:`TABLE_ELEMENTS`."""
    size = max(1, min(num_heads, TABLE_ELEMENTS // max(1, rows * width)))
    for start in range(0, num_heads, size):
        yield slice(start, min(start + size, num_heads))


def _edge_chunk(points: Tensor, heads: int, per_edge_points: bool) -> int:
    width = 2 * points.size(3) * heads
    if per_edge_points:
        width += points.size(1) * heads * points.size(3) * points.size(4)
    return max(1, EDGE_CHUNK_ELEMENTS // width)


class _EdgeFourierLogSimilarity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query: Tensor, key: Tensor, edge_key: Optional[Tensor],
                points: Tensor, src: Tensor, dst: Tensor,
                graph_dst: Optional[Tensor], graph_src: Optional[Tensor],
                eps: float) -> Tensor:
        num_edges, heads = src.numel(), query.size(1)
        normaliser = points.size(3) * points.size(1)**2
        estimate = query.new_empty(num_edges, heads)
        rows = max(query.size(0), key.size(0))
        for group in _head_groups(heads, rows, 2 * points.size(3)):
            estimate[:, group] = _group_estimates(
                query[:, group], key[:, group],
                None if edge_key is None else edge_key[:, group],
                points[:, :, group], src, dst, graph_dst, graph_src)
        estimate /= normaliser
        ctx.save_for_backward(query, key, edge_key, points, src, dst,
                              graph_dst, graph_src, estimate)
        ctx.eps = eps
        return (estimate * estimate + eps).log()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_log: Tensor):
        (query, key, edge_key, points, src, dst, graph_dst, graph_src,
         estimate) = ctx.saved_tensors
        normaliser = points.size(3) * points.size(1)**2
        # d log(f^2 + eps) / d(dot) with f = dot / normaliser:
        grad_dot = grad_log * 2 * estimate / (
            (estimate * estimate + ctx.eps) * normaliser)
        grad_query = torch.zeros_like(query)
        grad_key = torch.zeros_like(key)
        grad_edge_key = None if edge_key is None else torch.empty_like(
            edge_key)
        grad_points = torch.zeros_like(points)
        rows = max(query.size(0), key.size(0))
        for group in _head_groups(query.size(1), rows, 2 * points.size(3)):
            _group_backward(grad_dot[:, group], query[:, group],
                            key[:, group],
                            None if edge_key is None else edge_key[:, group],
                            points[:, :, group], src, dst, graph_dst,
                            graph_src, grad_query[:, group],
                            grad_key[:, group],
                            None if grad_edge_key is None else
                            grad_edge_key[:, group], grad_points[:, :, group])
        return (grad_query, grad_key, grad_edge_key, grad_points, None, None,
                None, None, None)


def _group_estimates(query: Tensor, key: Tensor, edge_key: Optional[Tensor],
                     points: Tensor, src: Tensor, dst: Tensor,
                     graph_dst: Optional[Tensor],
                     graph_src: Optional[Tensor]) -> Tensor:
    r"""The edge dots :math:`\phi(q_i)^\top\phi(k_j)` of one head group,
    :math:`(E, H_g)`."""
    query_features = _node_features(query, points, graph_dst)
    key_features = (_node_features(key, points, graph_src)
                    if edge_key is None else None)
    per_edge_points = edge_key is not None and graph_dst is not None
    out = query.new_empty(src.numel(), query.size(1))
    for a, b in chunks(src.numel(),
                       _edge_chunk(points, query.size(1), per_edge_points)):
        key_chunk, _ = _edge_key_features(key, edge_key, key_features,
                                          points, src, dst, graph_dst, a, b)
        out[a:b] = (query_features.index_select(0, dst[a:b]) *
                    key_chunk).sum(-1)
    return out


def _edge_key_features(key: Tensor, edge_key: Optional[Tensor],
                       key_features: Optional[Tensor], points: Tensor,
                       src: Tensor, dst: Tensor, graph_dst: Optional[Tensor],
                       a: int, b: int
                       ) -> Tuple[Tensor, Optional[Tuple[Tensor, Tensor,
                                                         Optional[Tensor]]]]:
    r"""The key features of edges :obj:`a` to :obj:`b`, and, for per-edge
    keys, what their backward needs (keys, angles, graphs)."""
    if edge_key is None:
        assert key_features is not None
        return key_features.index_select(0, src[a:b]), None
    keys = key.index_select(0, src[a:b]) + edge_key[a:b]
    graph = None if graph_dst is None else graph_dst.index_select(
        0, dst[a:b])
    angles = _angles(keys, points, graph)
    return _features(angles), (keys, angles, graph)


def _group_backward(grad_dot: Tensor, query: Tensor, key: Tensor,
                    edge_key: Optional[Tensor], points: Tensor, src: Tensor,
                    dst: Tensor, graph_dst: Optional[Tensor],
                    graph_src: Optional[Tensor], grad_query: Tensor,
                    grad_key: Tensor, grad_edge_key: Optional[Tensor],
                    grad_points: Tensor) -> None:
    r"""Add one head group's gradients to the given views (in place)."""
    query_features = _node_features(query, points, graph_dst)
    grad_query_features = torch.zeros_like(query_features)
    key_features = grad_key_features = None
    if edge_key is None:
        key_features = _node_features(key, points, graph_src)
        grad_key_features = torch.zeros_like(key_features)
    per_edge_points = edge_key is not None and graph_dst is not None
    for a, b in chunks(src.numel(),
                       _edge_chunk(points, query.size(1), per_edge_points)):
        weight = grad_dot[a:b].unsqueeze(-1)
        query_chunk = query_features.index_select(0, dst[a:b])
        key_chunk, saved = _edge_key_features(key, edge_key, key_features,
                                              points, src, dst, graph_dst,
                                              a, b)
        grad_query_features.index_add_(0, dst[a:b], weight * key_chunk)
        if saved is None:
            assert grad_key_features is not None
            grad_key_features.index_add_(0, src[a:b], weight * query_chunk)
            continue
        keys, angles, graph = saved
        grad_keys = _angles_backward(
            _features_backward(weight * query_chunk, angles), keys, points,
            graph, grad_points)
        assert grad_edge_key is not None
        grad_edge_key[a:b] = grad_keys
        grad_key.index_add_(0, src[a:b], grad_keys)
    grad_query += _node_features_backward(grad_query_features, query, points,
                                          graph_dst, grad_points)
    if grad_key_features is not None:
        grad_key += _node_features_backward(grad_key_features, key, points,
                                            graph_src, grad_points)
