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

#: Elements of one per-node feature table of a head group
#: (:math:`N \times H_g \times 2R`; float32: 16 MiB); a head group holds as
#: many heads as fit, at least one.
TABLE_ELEMENTS = 1 << 22
#: Elements of one chunk's scratch (:math:`E_c \times H_g \times 2R` for an
#: edge chunk; float32: 1 MiB, cache-sized).
CHUNK_ELEMENTS = 1 << 18


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
    return edge_fourier_estimate(query, key, edge_key, points, src, dst,
                                 graph_dst, graph_src, float(eps))[0]


class _Points:
    r"""A head group's spectral points laid out for batched products:
    :math:`(G, H_g, C, mR)` (the sets side by side), with the gradient
    accumulated in the same layout."""

    def __init__(self, points: Tensor, group: slice):
        self.num_sets, self.num_points = points.size(1), points.size(3)
        # [G, m, Hg, R, C] -> [G, Hg, C, m R]:
        self.matrix = points[:, :, group].permute(0, 2, 4, 1, 3).flatten(3)
        self.grad = torch.zeros_like(self.matrix)

    def grad_points(self) -> Tensor:
        r"""The accumulated gradient as :math:`(G, m, H_g, R, C)`."""
        grad = self.grad.unflatten(3, (self.num_sets, self.num_points))
        return grad.permute(0, 3, 1, 4, 2)


def _angles(x: Tensor, points: _Points, graph: Optional[Tensor]) -> Tensor:
    r""":math:`W_s x` of rows :math:`x` :math:`(n, H_g, C)`, the sets side
    by side: :math:`(n, H_g, mR)` (a view of a head-major product); with
    :obj:`graph`, each row against the points of its graph."""
    if graph is None:
        return torch.bmm(x.transpose(0, 1), points.matrix[0]).transpose(0, 1)
    return torch.einsum('nhc,nhcq->nhq', x, points.matrix[graph])


def _angles_backward(grad: Tensor, x: Tensor, points: _Points,
                     graph: Optional[Tensor]) -> Tensor:
    r"""The gradient of :func:`_angles` with respect to :obj:`x`; adds the
    one with respect to the points to :obj:`points.grad`."""
    if graph is None:
        head_major = grad.transpose(0, 1)  # [Hg, n, mR]
        points.grad[0] += torch.bmm(x.permute(1, 2, 0), head_major)
        return torch.bmm(head_major,
                         points.matrix[0].transpose(1, 2)).transpose(0, 1)
    points.grad.index_add_(0, graph, torch.einsum('nhq,nhc->nhcq', grad, x))
    return torch.einsum('nhq,nhcq->nhc', grad, points.matrix[graph])


def _cos_sin(angles: Tensor) -> Tuple[Tensor, Tensor]:
    r"""The cosines and sines of the angles, row-major :math:`(n, H_g,
    mR)` whatever the layout of :obj:`angles`."""
    cos = angles.new_empty(angles.shape)
    sin = angles.new_empty(angles.shape)
    torch.cos(angles, out=cos)
    torch.sin(angles, out=sin)
    return cos, sin


def _features(cos: Tensor, sin: Tensor, num_points: int,
              out: Optional[Tensor] = None) -> Tensor:
    r""":math:`\phi = [\sum_s \cos;\, \sum_s \sin]` of shape :math:`(n,
    H_g, 2R)` from :func:`_cos_sin` (into :obj:`out` if given)."""
    n, heads, width = cos.shape
    if out is None:
        out = cos.new_empty(n, heads, 2 * num_points)
    for half, values in ((slice(0, num_points), cos),
                         (slice(num_points, None), sin)):
        sets = values.view(n, heads, width // num_points, num_points)
        torch.sum(sets, dim=2, out=out[..., half])
    return out


def _features_backward(grad: Tensor, cos: Tensor, sin: Tensor,
                       num_points: int) -> Tensor:
    r"""The gradient of :func:`_features` with respect to the angles,
    :math:`\partial\phi/\partial a = [-\sin;\, \cos]` per set."""
    n, heads, width = cos.shape
    shape = (n, heads, width // num_points, num_points)
    grad_cos = grad[..., :num_points].unsqueeze(2)
    grad_sin = grad[..., num_points:].unsqueeze(2)
    out = cos.view(shape) * grad_sin
    out -= sin.view(shape) * grad_cos
    return out.view(n, heads, width)


class _NodeSide:
    r"""One side's (queries' or keys') features in a head group, written
    into :obj:`table` :math:`(n, H_g, 2R)` row chunk by row chunk (cache-
    sized temporaries), with the cosines and sines kept in :obj:`cache`
    if given (else recomputed by :meth:`backward`)."""

    def __init__(self, x: Tensor, points: _Points, graph: Optional[Tensor],
                 table: Tensor,
                 cache: Optional[Tuple[Tensor, Tensor]] = None):
        self.x, self.points, self.graph = x, points, graph
        self.table, self.cache = table, cache
        for a, b in self._row_chunks():
            _features(*self._cos_sin(a, b), points.num_points,
                      out=table[a:b])

    def _row_chunks(self):
        per_row = self.points.matrix[0].numel()
        if self.graph is None:  # angles only, no gathered points
            per_row //= self.points.matrix.size(2)
        return chunks(self.x.size(0), max(1, CHUNK_ELEMENTS // per_row))

    def _graph(self, a: int, b: int) -> Optional[Tensor]:
        return None if self.graph is None else self.graph[a:b]

    def _cos_sin(self, a: int, b: int) -> Tuple[Tensor, Tensor]:
        angles = _angles(self.x[a:b], self.points, self._graph(a, b))
        if self.cache is None:
            return _cos_sin(angles)
        cos, sin = self.cache[0][a:b], self.cache[1][a:b]
        torch.cos(angles, out=cos)
        torch.sin(angles, out=sin)
        return cos, sin

    def backward(self, grad_table: Tensor) -> Tensor:
        r"""The gradient with respect to :obj:`x` (the points' is added to
        :obj:`points.grad`)."""
        grad_x = torch.empty_like(self.x)
        for a, b in self._row_chunks():
            if self.cache is not None:
                cos, sin = self.cache[0][a:b], self.cache[1][a:b]
            else:
                cos, sin = self._cos_sin(a, b)
            grad_x[a:b] = _angles_backward(
                _features_backward(grad_table[a:b], cos, sin,
                                   self.points.num_points),
                self.x[a:b], self.points, self._graph(a, b))
        return grad_x


def _group_size(num_heads: int, rows: int, width: int) -> int:
    r"""Heads per group: as many as keep a feature table of :obj:`rows`
    rows within :data:`TABLE_ELEMENTS` (at least one), dividing
    :obj:`num_heads` so that every group reuses the same tables."""
    size = max(1, min(num_heads, TABLE_ELEMENTS // max(1, rows * width)))
    while num_heads % size:
        size -= 1
    return size


def _edge_chunk(points: _Points, heads: int, per_edge_points: bool) -> int:
    width = 2 * points.num_points * heads
    if per_edge_points:
        width += points.matrix[0].numel()
    return max(1, CHUNK_ELEMENTS // width)


# The estimate as a pair of registered operators (forward, backward): one
# opaque node under torch.compile (its edge and node chunks are loops over
# sizes), a fake implementation that also serves the 'meta' device, and
# autograd through the backward operator, which recomputes the features (so
# the operator is differentiable once).
@torch.library.custom_op('ikgat::edge_fourier_estimate', mutates_args=())
def edge_fourier_estimate(query: Tensor, key: Tensor,
                          edge_key: Optional[Tensor], points: Tensor,
                          src: Tensor, dst: Tensor,
                          graph_dst: Optional[Tensor],
                          graph_src: Optional[Tensor],
                          eps: float) -> Tuple[Tensor, Tensor]:
    r"""The edges' :math:`\ell = \log(f^2 + \epsilon)` and estimate
    :math:`f`, both :math:`(E, H)` (see
    :func:`edge_fourier_log_similarity`); only :math:`\ell` is
    differentiable, :math:`f` is what its backward pass needs."""
    heads, width = query.size(1), 2 * points.size(3)
    normaliser = points.size(3) * points.size(1)**2
    estimate = query.new_empty(src.numel(), heads)
    size = _group_size(heads, max(query.size(0), key.size(0)), width)
    # One pair of tables for every head group (allocated once):
    query_table = query.new_empty(query.size(0), size, width)
    key_table = (key.new_empty(key.size(0), size, width)
                 if edge_key is None else None)
    for start in range(0, heads, size):
        group = slice(start, start + size)
        group_points = _Points(points, group)
        _NodeSide(query[:, group], group_points, graph_dst, query_table)
        if key_table is not None:
            _NodeSide(key[:, group], group_points, graph_src, key_table)
        _edge_dots(query_table, key_table, key[:, group],
                   None if edge_key is None else edge_key[:, group],
                   group_points, src, dst, graph_dst, estimate[:, group])
    estimate /= normaliser
    return (estimate * estimate + eps).log(), estimate


@edge_fourier_estimate.register_fake
def _(query, key, edge_key, points, src, dst, graph_dst, graph_src, eps):
    shape = (src.size(0), query.size(1))
    return query.new_empty(shape), query.new_empty(shape)


@torch.library.custom_op('ikgat::edge_fourier_estimate_backward',
                         mutates_args=())
def edge_fourier_estimate_backward(
        grad_log: Tensor, query: Tensor, key: Tensor,
        edge_key: Optional[Tensor], points: Tensor, src: Tensor,
        dst: Tensor, graph_dst: Optional[Tensor],
        graph_src: Optional[Tensor], estimate: Tensor, eps: float
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The gradients of :func:`edge_fourier_estimate`'s :math:`\ell` with
    respect to the queries, the keys, the edge keys (empty without them)
    and the points."""
    normaliser = points.size(3) * points.size(1)**2
    # d log(f^2 + eps) / d(dot) with f = dot / normaliser:
    grad_dot = grad_log * 2 * estimate / (
        (estimate * estimate + eps) * normaliser)
    grad_query = torch.empty_like(query)
    grad_key = torch.empty_like(key)
    grad_edge_key = (query.new_empty(0) if edge_key is None else
                     torch.empty_like(edge_key))
    grad_points = torch.empty_like(points)
    heads, width = query.size(1), 2 * points.size(3)
    size = _group_size(heads, max(query.size(0), key.size(0)), width)
    tables = _BackwardTables(query, key, edge_key is None, size, width,
                             points.size(1) * points.size(3))
    for start in range(0, heads, size):
        group = slice(start, start + size)
        group_points = _Points(points, group)
        grads = _group_backward(
            grad_dot[:, group], query[:, group], key[:, group],
            None if edge_key is None else edge_key[:, group], group_points,
            src, dst, graph_dst, graph_src, tables)
        grad_query[:, group], grad_key[:, group] = grads[:2]
        if grads[2] is not None:
            grad_edge_key[:, group] = grads[2]
        grad_points[:, :, group] = group_points.grad_points()
    return grad_query, grad_key, grad_edge_key, grad_points


@edge_fourier_estimate_backward.register_fake
def _(grad_log, query, key, edge_key, points, src, dst, graph_dst, graph_src,
      estimate, eps):
    return (torch.empty_like(query), torch.empty_like(key),
            query.new_empty(0) if edge_key is None else
            torch.empty_like(edge_key), torch.empty_like(points))


def _setup_context(ctx, inputs, output):
    (query, key, edge_key, points, src, dst, graph_dst, graph_src,
     eps) = inputs
    _, estimate = output
    ctx.mark_non_differentiable(estimate)
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(query, key, edge_key, points, src, dst, graph_dst,
                          graph_src, estimate)
    ctx.eps = eps


def _backward(ctx, grad_log, grad_estimate):
    if grad_log is None:  # l unused
        return (None, ) * 9
    (query, key, edge_key, points, src, dst, graph_dst, graph_src,
     estimate) = ctx.saved_tensors
    grad_query, grad_key, grad_edge_key, grad_points = (
        edge_fourier_estimate_backward(grad_log, query, key, edge_key,
                                       points, src, dst, graph_dst,
                                       graph_src, estimate, ctx.eps))
    return (grad_query, grad_key,
            None if edge_key is None else grad_edge_key, grad_points, None,
            None, None, None, None)


edge_fourier_estimate.register_autograd(_backward,
                                        setup_context=_setup_context)


class _BackwardTables:
    r"""The backward pass's per-node tables, allocated once and reused by
    every head group: features and their gradients for the queries and
    (without edge features) the keys, and the cosines and sines of a side
    whose table fits :data:`TABLE_ELEMENTS`."""

    def __init__(self, query: Tensor, key: Tensor, node_keys: bool,
                 size: int, width: int, angles: int):
        def side(x: Tensor):
            features = x.new_empty(x.size(0), size, width)
            cache = None
            if x.size(0) * size * angles <= TABLE_ELEMENTS:
                cache = (x.new_empty(x.size(0), size, angles),
                         x.new_empty(x.size(0), size, angles))
            return features, torch.empty_like(features), cache

        self.query = side(query)
        self.key = side(key) if node_keys else None


def _edge_dots(query_table: Tensor, key_table: Optional[Tensor],
               key: Tensor, edge_key: Optional[Tensor], points: _Points,
               src: Tensor, dst: Tensor, graph_dst: Optional[Tensor],
               out: Tensor) -> None:
    r"""Write the edge dots :math:`\phi(q_i)^\top\phi(k_j)` of one head
    group into :obj:`out` :math:`(E, H_g)`."""
    per_edge_points = edge_key is not None and graph_dst is not None
    for a, b in chunks(src.numel(), _edge_chunk(points, query_table.size(1),
                                                per_edge_points)):
        key_chunk, _ = _edge_key_features(key, edge_key, key_table, points,
                                          src, dst, graph_dst, a, b)
        product = query_table.index_select(0, dst[a:b])
        product *= key_chunk
        torch.sum(product, dim=-1, out=out[a:b])


def _edge_key_features(key: Tensor, edge_key: Optional[Tensor],
                       key_table: Optional[Tensor], points: _Points,
                       src: Tensor, dst: Tensor, graph_dst: Optional[Tensor],
                       a: int, b: int
                       ) -> Tuple[Tensor, Optional[Tuple[Tensor, Tensor,
                                                         Tensor,
                                                         Optional[Tensor]]]]:
    r"""The key features of edges :obj:`a` to :obj:`b`, and, for per-edge
    keys, what their backward needs (keys, cosines, sines, graphs)."""
    if edge_key is None:
        assert key_table is not None
        return key_table.index_select(0, src[a:b]), None
    keys = key.index_select(0, src[a:b]) + edge_key[a:b]
    graph = None if graph_dst is None else graph_dst.index_select(
        0, dst[a:b])
    cos, sin = _cos_sin(_angles(keys, points, graph))
    return (_features(cos, sin, points.num_points),
            (keys, cos, sin, graph))


def _group_backward(grad_dot: Tensor, query: Tensor, key: Tensor,
                    edge_key: Optional[Tensor], points: _Points, src: Tensor,
                    dst: Tensor, graph_dst: Optional[Tensor],
                    graph_src: Optional[Tensor], tables: _BackwardTables
                    ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    r"""One head group's gradients with respect to the queries, the keys
    and the edge keys (the points' are added to :obj:`points.grad`)."""
    query_features, grad_query_features, query_cache = tables.query
    query_side = _NodeSide(query, points, graph_dst, query_features,
                           query_cache)
    grad_query_features.zero_()
    key_side = grad_key_features = grad_key = None
    if tables.key is not None:
        key_features, grad_key_features, key_cache = tables.key
        key_side = _NodeSide(key, points, graph_src, key_features, key_cache)
        grad_key_features.zero_()
    else:
        grad_key = torch.zeros_like(key)
    grad_edge_key = None if edge_key is None else torch.empty_like(edge_key)
    per_edge_points = edge_key is not None and graph_dst is not None
    for a, b in chunks(src.numel(),
                       _edge_chunk(points, query.size(1), per_edge_points)):
        weight = grad_dot[a:b].unsqueeze(-1)
        query_chunk = query_features.index_select(0, dst[a:b])
        key_chunk, saved = _edge_key_features(
            key, edge_key, None if key_side is None else key_side.table,
            points, src, dst, graph_dst, a, b)
        key_chunk *= weight
        grad_query_features.index_add_(0, dst[a:b], key_chunk)
        query_chunk *= weight
        if saved is None:
            assert grad_key_features is not None
            grad_key_features.index_add_(0, src[a:b], query_chunk)
            continue
        keys, cos, sin, graph = saved
        grad_keys = _angles_backward(
            _features_backward(query_chunk, cos, sin, points.num_points),
            keys, points, graph)
        assert grad_edge_key is not None and grad_key is not None
        grad_edge_key[a:b] = grad_keys
        grad_key.index_add_(0, src[a:b], grad_keys)
    grad_query = query_side.backward(grad_query_features)
    if key_side is not None:
        assert grad_key_features is not None
        grad_key = key_side.backward(grad_key_features)
    assert grad_key is not None
    return grad_query, grad_key, grad_edge_key
