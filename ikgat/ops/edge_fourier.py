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
:math:`2R`-dots of all edges of a head at once, as a sampled dense-dense
product over the edges compressed by target (SDDMM,
:func:`torch.sparse.sampled_addmm`): no feature row is gathered per edge.
The backward pass recomputes the features; the gradient of
:math:`\phi(q_i)` is :math:`\sum_j g_{ij} \phi(k_j)` and that of
:math:`\phi(k_j)` is :math:`\sum_i g_{ij} \phi(q_i)`, two sparse-dense
products (SpMM, by target and by source), mapped back through the angles.
With edge features the key is :math:`k_j + e_{ij}`, per edge: its features
are computed per edge chunk, in the forward and again in the backward pass.
On CPU the per-node tables of points shared by all rows come from the C
kernels of :mod:`ikgat.ops.node_terms_native` in float32, else from
:mod:`ikgat.ops.compiled_features` (one fused loop after the angle
product) once they hold enough angles.
Memory: :math:`O(E H)` saved for backward, and :math:`O(N H_g R)` plus one
chunk of scratch.  Inputs below float32 are computed in float32 (the
sparse products' smallest precision) and the results cast back.

Per-graph spectral points (IKAN's draws for a mini-batch of graphs,
:math:`G > 1`) pair each node, and each edge, with the points of its graph.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

import ikgat.ops.edge_fourier_tables as side_tables
from ikgat.ops.edge_fourier_tables import (
    Adjacency,
    NodeSide,
    Points,
    chunks,
    compiled_whole,
    compute_dtype,
    edge_chunk,
    fused_side,
    fuses,
    group_size,
)


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
    dtype = query.dtype
    query, key, points = (t.to(compute_dtype(dtype))
                          for t in (query, key, points))
    if edge_key is not None:
        edge_key = edge_key.to(query.dtype)
    heads, width = query.size(1), 2 * points.size(3)
    normaliser = points.size(3) * points.size(1)**2
    size = group_size(heads, max(query.size(0), key.size(0)), width)
    # One pair of tables for every head group (allocated once, unless
    # compiled functions make them):
    query_table = key_table = None
    if edge_key is None:
        adjacency = Adjacency(src, dst, query.size(0), key.size(0))
        # The sampled product's pattern (values unread with beta = 0):
        pattern = adjacency.by_target(query.new_zeros(src.numel()))
        dots = query.new_empty(heads, src.numel())  # in target order
    else:
        estimate = query.new_empty(src.numel(), heads)
    for start in range(0, heads, size):
        group = slice(start, start + size)
        group_points = Points(points, group)
        query_table = NodeSide(query[:, group], group_points, graph_dst,
                               query_table).table
        if edge_key is None:
            key_table = NodeSide(key[:, group], group_points, graph_src,
                                 key_table).table
            for head in range(size):
                dots[start + head] = _sampled_dots(
                    pattern, query_table[head], key_table[head])
        else:
            _edge_dots(query_table, key[:, group], edge_key[:, group],
                       group_points, src, dst, graph_dst,
                       estimate[:, group])
    if edge_key is None:
        estimate = dots.new_empty(src.numel(), heads)
        estimate.index_copy_(0, adjacency.target.order, dots.t())
    estimate /= normaliser
    return (estimate * estimate + eps).log().to(dtype), estimate.to(dtype)


@edge_fourier_estimate.register_fake
def _(query, key, edge_key, points, src, dst, graph_dst, graph_src, eps):
    shape = (src.size(0), query.size(1))
    return query.new_empty(shape), query.new_empty(shape)


def _sampled_dots(pattern: Tensor, query_table: Tensor,
                  key_table: Tensor) -> Tensor:
    r"""One head's edge dots :math:`\phi(q_i)^\top\phi(k_j)` at the
    edges of :obj:`pattern`
    (:meth:`~ikgat.ops.edge_fourier_tables.Adjacency.by_target`; their
    order), from its tables :math:`(N, 2R)`."""
    if pattern.values().numel() == 0:
        return query_table.new_empty(0)
    return torch.sparse.sampled_addmm(pattern, query_table, key_table.t(),
                                      beta=0.0).values()


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
    dtypes = [t.dtype for t in (query, key, edge_key, points)
              if t is not None]
    compute = compute_dtype(query.dtype)
    grad_log, query, key, points, estimate = (
        t.to(compute) for t in (grad_log, query, key, points, estimate))
    if edge_key is not None:
        edge_key = edge_key.to(compute)
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
    size = group_size(heads, max(query.size(0), key.size(0)), width)
    tables = _BackwardTables(query, key, edge_key is None, size, width,
                             points.size(1) * points.size(3), graph_dst,
                             graph_src)
    edges = (_EdgeGradients(grad_dot, src, dst, query.size(0),
                            key.size(0)) if edge_key is None else None)
    for start in range(0, heads, size):
        group = slice(start, start + size)
        group_points = Points(points, group)
        if edges is None:
            assert edge_key is not None
            grads = _group_backward_edge_keys(
                grad_dot[:, group], query[:, group], key[:, group],
                edge_key[:, group], group_points, src, dst, graph_dst,
                tables)
            grad_edge_key[:, group] = grads[2]
        else:
            grads = _group_backward(edges, group, query[:, group],
                                    key[:, group], group_points, graph_dst,
                                    graph_src, tables)
        grad_query[:, group], grad_key[:, group] = grads[:2]
        grad_points[:, :, group] = group_points.grad_points()
    grads = (grad_query, grad_key, grad_edge_key, grad_points)
    if edge_key is None:
        dtypes.insert(2, grad_edge_key.dtype)
    return tuple(g.to(d) for g, d in zip(grads, dtypes))


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
    r"""The backward pass's per-node tables :math:`(H_g, n, 2R)`, allocated
    once and reused by every head group: the gradients of the features for
    the queries and (without edge features) the keys; the features, unless
    the compiled functions make them in one call
    (:func:`~ikgat.ops.edge_fourier_tables.compiled_whole`); and, for a side
    whose features are not compiled
    (:func:`~ikgat.ops.edge_fourier_tables.fuses`), the cosines and sines if
    their table fits :data:`~ikgat.ops.edge_fourier_tables.TABLE_ELEMENTS`
    (else :obj:`None`)."""

    def __init__(self, query: Tensor, key: Tensor, node_keys: bool,
                 size: int, width: int, angles: int,
                 graph_dst: Optional[Tensor], graph_src: Optional[Tensor]):
        def side(x: Tensor, graph: Optional[Tensor]):
            grad_features = x.new_empty(size, x.size(0), width)
            if fused_side(x, graph, size, angles):  # a table if chunked
                return (None if compiled_whole(x.size(0), size * angles)
                        else torch.empty_like(grad_features),
                        grad_features, None)
            cache = None
            if x.size(0) * size * angles <= side_tables.TABLE_ELEMENTS:
                cache = (x.new_empty(size, x.size(0), angles),
                         x.new_empty(size, x.size(0), angles))
            return torch.empty_like(grad_features), grad_features, cache

        self.query = side(query, graph_dst)
        self.key = side(key, graph_src) if node_keys else None


class _EdgeGradients:
    r"""The gradients of the edge dots, :math:`(E, H)`, as one sparse
    matrix per head by target and by source: the gradient of
    :math:`\phi(q_i)` is :math:`\sum_j g_{ij} \phi(k_j)`, a sparse-dense
    product, and that of :math:`\phi(k_j)` the transposed one.  The
    products write in place (``addmm_`` with :math:`\beta = 0`, which
    ignores what the table held): ``torch.mm(..., out=)`` makes, fills
    and copies a new result."""

    def __init__(self, grad_dot: Tensor, src: Tensor, dst: Tensor,
                 num_dst: int, num_src: int):
        self.adjacency = Adjacency(src, dst, num_dst, num_src,
                                   transposed=True)
        assert self.adjacency.source is not None
        # [H, E] in the orders of the two compressions:
        self.by_target = grad_dot.index_select(
            0, self.adjacency.target.order).t().contiguous()
        self.by_source = grad_dot.index_select(
            0, self.adjacency.source.order).t().contiguous()

    def query_features(self, head: int, key_table: Tensor,
                       out: Tensor) -> None:
        r"""Write the gradient of one head's query features into
        :obj:`out` :math:`(N_t, 2R)`."""
        out.addmm_(self.adjacency.by_target(self.by_target[head]), key_table,
                   beta=0)

    def key_features(self, head: int, query_table: Tensor,
                     out: Tensor) -> None:
        r"""Write the gradient of one head's key features into
        :obj:`out` :math:`(N_s, 2R)`."""
        out.addmm_(self.adjacency.by_source(self.by_source[head]),
                   query_table, beta=0)


def _group_backward(edges: _EdgeGradients, group: slice, query: Tensor,
                    key: Tensor, points: Points,
                    graph_dst: Optional[Tensor], graph_src: Optional[Tensor],
                    tables: _BackwardTables) -> Tuple[Tensor, Tensor]:
    r"""One head group's gradients with respect to the queries and the keys
    (the points' are added to :obj:`points.grad`), for keys per node."""
    assert tables.key is not None
    query_features, grad_query_features, query_cache = tables.query
    key_features, grad_key_features, key_cache = tables.key
    query_side = NodeSide(query, points, graph_dst, query_features,
                          query_cache)
    key_side = NodeSide(key, points, graph_src, key_features, key_cache)
    for offset, head in enumerate(range(group.start, group.stop)):
        edges.query_features(head, key_side.table[offset],
                             grad_query_features[offset])
        edges.key_features(head, query_side.table[offset],
                           grad_key_features[offset])
    return (query_side.backward(grad_query_features),
            key_side.backward(grad_key_features))


def _edge_dots(query_table: Tensor, key: Tensor, edge_key: Tensor,
               points: Points, src: Tensor, dst: Tensor,
               graph_dst: Optional[Tensor], out: Tensor) -> None:
    r"""Write the edge dots :math:`\phi(q_i)^\top\phi(k_j + e_{ij})` of one
    head group into :obj:`out` :math:`(E, H_g)`, the key features made per
    edge chunk."""
    per_edge_points = graph_dst is not None
    for a, b in chunks(src.numel(), edge_chunk(points, query_table.size(0),
                                               per_edge_points)):
        key_chunk = _edge_key_side(key, edge_key, points, src, dst,
                                   graph_dst, a, b).table
        product = query_table.index_select(1, dst[a:b])
        product *= key_chunk
        torch.sum(product, dim=-1, out=out[a:b].t())


def _edge_key_side(key: Tensor, edge_key: Tensor, points: Points,
                   src: Tensor, dst: Tensor, graph_dst: Optional[Tensor],
                   a: int, b: int, keep: bool = False) -> NodeSide:
    r"""The keys :math:`k_j + e_{ij}` of edges :obj:`a` to :obj:`b` as rows
    of a :class:`~ikgat.ops.edge_fourier_tables.NodeSide` (features
    :math:`(H_g, E_c, 2R)`); with
    :obj:`keep`, ready for its backward pass (the eager path keeps the
    cosines and sines)."""
    keys = key.index_select(0, src[a:b]) + edge_key[a:b]
    graph = None if graph_dst is None else graph_dst.index_select(
        0, dst[a:b])
    cache = None
    if keep and not fuses(keys, points, graph):
        shape = (keys.size(1), keys.size(0), points.matrix.size(3))
        cache = (keys.new_empty(shape), keys.new_empty(shape))
    return NodeSide(keys, points, graph, cache=cache)


def _group_backward_edge_keys(grad_dot: Tensor, query: Tensor, key: Tensor,
                              edge_key: Tensor, points: Points,
                              src: Tensor, dst: Tensor,
                              graph_dst: Optional[Tensor],
                              tables: _BackwardTables
                              ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""One head group's gradients with respect to the queries, the keys
    and the edge keys (the points' are added to :obj:`points.grad`), the
    key features made again per edge chunk."""
    query_features, grad_query_features, query_cache = tables.query
    query_side = NodeSide(query, points, graph_dst, query_features,
                          query_cache)
    grad_query_features.zero_()
    grad_key = torch.zeros_like(key)
    grad_edge_key = torch.empty_like(edge_key)
    for a, b in chunks(src.numel(), edge_chunk(points, query.size(1),
                                               graph_dst is not None)):
        weight = grad_dot[a:b].t().unsqueeze(-1)
        query_chunk = query_side.table.index_select(1, dst[a:b])
        key_side = _edge_key_side(key, edge_key, points, src, dst,
                                  graph_dst, a, b, keep=True)
        key_chunk = key_side.table
        key_chunk *= weight
        grad_query_features.index_add_(1, dst[a:b], key_chunk)
        query_chunk *= weight
        grad_keys = key_side.backward(query_chunk)
        grad_edge_key[a:b] = grad_keys
        grad_key.index_add_(0, src[a:b], grad_keys)
    return query_side.backward(grad_query_features), grad_key, grad_edge_key
