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
On CPU the per-node tables of points shared by all rows come from
:mod:`ikgat.ops.compiled_features` (one fused loop after the angle
product) once they hold enough angles.
Memory: :math:`O(E H)` saved for backward, and :math:`O(N H_g R)` plus one
chunk of scratch.  Inputs below float32 are computed in float32 (the
sparse products' smallest precision) and the results cast back.

Per-graph spectral points (IKAN's draws for a mini-batch of graphs,
:math:`G > 1`) pair each node, and each edge, with the points of its graph.
"""
import warnings
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ikgat.ops.compiled_features import (
    compiled_features,
    compiled_features_backward,
    use_compiled,
)
from ikgat.ops.trigonometry import cos_sin

#: Elements of one per-node feature table of a head group
#: (:math:`N \times H_g \times 2R`; float32: 16 MiB); a head group holds as
#: many heads as fit, at least one.
TABLE_ELEMENTS = 1 << 22
#: Elements of one chunk's scratch (:math:`E_c \times H_g \times 2R` for an
#: edge chunk; float32: 1 MiB, cache-sized).
CHUNK_ELEMENTS = 1 << 18
#: The most angles (:math:`n H_g m R`) of a side for which the compiled
#: tables' functions run once on all rows; above, they run on row chunks of
#: :data:`COMPILED_CHUNK_ANGLES` (float32: 2 MiB).  Temporaries of tens of
#: MiB come fresh from the operating system at every call, page by page:
#: at arxiv size (169,343 rows, 128 angles a head) a table's forward and
#: backward took 137 and 118 ms on all rows, 67 and 73 ms in chunks of
#: 4,096 rows; at PubMed size (19,717 rows) the chunks' calls and copies
#: cost more than they save (one thread, an Intel Xeon).
COMPILED_WHOLE_ANGLES = 1 << 22
#: Angles of one call of the compiled tables' functions on a row chunk
#: (:data:`COMPILED_WHOLE_ANGLES`).
COMPILED_CHUNK_ANGLES = 1 << 19


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
    r""":math:`W_s x` of rows :math:`x` :math:`(n, H_g, C)`, head-major and
    the sets side by side: :math:`(H_g, n, mR)`; with :obj:`graph`, each row
    against the points of its graph."""
    if graph is None:
        return torch.bmm(x.transpose(0, 1), points.matrix[0])
    return torch.einsum('nhc,nhcq->hnq', x, points.matrix[graph])


def _angles_backward(grad: Tensor, x: Tensor, points: _Points,
                     graph: Optional[Tensor]) -> Tensor:
    r"""The gradient of :func:`_angles` with respect to :obj:`x`, from
    :obj:`grad` :math:`(H_g, n, mR)`; adds the one with respect to the
    points to :obj:`points.grad`."""
    if graph is None:
        points.grad[0] += torch.bmm(x.permute(1, 2, 0), grad)
        return torch.bmm(grad, points.matrix[0].transpose(1, 2)).transpose(
            0, 1)
    points.grad.index_add_(0, graph, torch.einsum('hnq,nhc->nhcq', grad, x))
    return torch.einsum('hnq,nhcq->nhc', grad, points.matrix[graph])


def _sum_sets(values: Tensor, num_points: int, out: Tensor) -> None:
    r"""Write :math:`\sum_s v_s` of :obj:`values` :math:`(H_g, n, mR)` (the
    sets side by side) into :obj:`out` :math:`(H_g, n, R)`."""
    sets = values.unflatten(2, (-1, num_points))
    if sets.size(2) == 1:
        out.copy_(sets[:, :, 0])
        return
    torch.add(sets[:, :, 0], sets[:, :, 1], out=out)
    for index in range(2, sets.size(2)):
        out += sets[:, :, index]


def _features(cos: Tensor, sin: Tensor, num_points: int,
              out: Optional[Tensor] = None) -> Tensor:
    r""":math:`\phi = [\sum_s \cos;\, \sum_s \sin]` of shape :math:`(H_g, n,
    2R)` from :func:`~ikgat.ops.trigonometry.cos_sin` (into :obj:`out`
    if given)."""
    if out is None:
        out = cos.new_empty(*cos.shape[:2], 2 * num_points)
    _sum_sets(cos, num_points, out[..., :num_points])
    _sum_sets(sin, num_points, out[..., num_points:])
    return out


def _features_backward(grad: Tensor, cos: Tensor, sin: Tensor,
                       num_points: int) -> Tensor:
    r"""The gradient of :func:`_features` with respect to the angles,
    :math:`\partial\phi/\partial a = [-\sin;\, \cos]` per set, from
    :obj:`grad` :math:`(H_g, n, 2R)`."""
    grad_cos = grad[..., :num_points].unsqueeze(2)
    grad_sin = grad[..., num_points:].unsqueeze(2)
    out = cos.unflatten(2, (-1, num_points)) * grad_sin
    out.addcmul_(sin.unflatten(2, (-1, num_points)), grad_cos, value=-1)
    return out.flatten(2)


def _fused_side(x: Tensor, graph: Optional[Tensor], heads: int,
                angles: int) -> bool:
    r"""Whether the features of rows :obj:`x` in a group of :obj:`heads`
    heads, :obj:`angles` angles per head, come from
    :mod:`ikgat.ops.compiled_features` (points shared by all rows)."""
    return graph is None and use_compiled(x, x.size(0) * heads * angles)


def _fused(x: Tensor, points: _Points, graph: Optional[Tensor]) -> bool:
    r""":func:`_fused_side` for a head group's :class:`_Points`."""
    return _fused_side(x, graph, points.matrix.size(1),
                       points.matrix.size(3))


def _compiled_whole(rows: int, angles: int) -> bool:
    r"""Whether the compiled functions take all :obj:`rows` rows of
    :obj:`angles` angles each in one call (:data:`COMPILED_WHOLE_ANGLES`)."""
    return rows * angles <= COMPILED_WHOLE_ANGLES


class _NodeSide:
    r"""One side's (queries' or keys') features in a head group,
    :attr:`table` :math:`(H_g, n, 2R)`, written into :obj:`table`
    (allocated if not given) row chunk by row chunk: by the compiled
    functions of :mod:`ikgat.ops.compiled_features` where they apply
    (:func:`_fused`; all rows in one call up to
    :data:`COMPILED_WHOLE_ANGLES` angles, a new table, else chunks of
    :data:`COMPILED_CHUNK_ANGLES`; their backward pass recomputes the
    angles), else with cache-sized temporaries and the cosines and sines
    kept in :obj:`cache` :math:`(H_g, n, mR)` if given (else recomputed by
    :meth:`backward`)."""

    def __init__(self, x: Tensor, points: _Points, graph: Optional[Tensor],
                 table: Optional[Tensor] = None,
                 cache: Optional[Tuple[Tensor, Tensor]] = None):
        self.x, self.points, self.graph = x, points, graph
        self.fused = _fused(x, points, graph)
        row_chunks = list(self._row_chunks())
        if self.fused and len(row_chunks) == 1:
            self.table = compiled_features(x, points.matrix[0],
                                           points.num_points)
            self.cache = None
            return
        if table is None:
            table = x.new_empty(points.matrix.size(1), x.size(0),
                                2 * points.num_points)
        self.table, self.cache = table, None if self.fused else cache
        for a, b in row_chunks:
            if self.fused:
                table[:, a:b] = compiled_features(
                    x[a:b], points.matrix[0], points.num_points)
            else:
                _features(*self._cos_sin(a, b), points.num_points,
                          out=table[:, a:b])

    def _row_chunks(self):
        per_row = self.points.matrix[0].numel()
        if self.graph is None:  # angles only, no gathered points
            per_row //= self.points.matrix.size(2)
        size = CHUNK_ELEMENTS
        if self.fused:
            size = (self.x.size(0) * per_row
                    if _compiled_whole(self.x.size(0), per_row)
                    else COMPILED_CHUNK_ANGLES)
        return chunks(self.x.size(0), max(1, size // per_row))

    def _graph(self, a: int, b: int) -> Optional[Tensor]:
        return None if self.graph is None else self.graph[a:b]

    def _cos_sin(self, a: int, b: int) -> Tuple[Tensor, Tensor]:
        angles = _angles(self.x[a:b], self.points, self._graph(a, b))
        if self.cache is None:
            return cos_sin(angles)
        return cos_sin(angles, self.cache[0][:, a:b], self.cache[1][:, a:b])

    def backward(self, grad_table: Tensor) -> Tensor:
        r"""The gradient with respect to :obj:`x` (the points' is added to
        :obj:`points.grad`)."""
        grad_x = torch.empty_like(self.x)
        for a, b in self._row_chunks():
            if self.fused:
                grad_rows, grad_matrix = compiled_features_backward(
                    grad_table[:, a:b], self.x[a:b], self.points.matrix[0],
                    self.points.num_points)
                grad_x[a:b] = grad_rows
                self.points.grad[0] += grad_matrix
                continue
            if self.cache is not None:
                cos, sin = self.cache[0][:, a:b], self.cache[1][:, a:b]
            else:
                cos, sin = self._cos_sin(a, b)
            grad_x[a:b] = _angles_backward(
                _features_backward(grad_table[:, a:b], cos, sin,
                                   self.points.num_points),
                self.x[a:b], self.points, self._graph(a, b))
        return grad_x


class _Compressed(NamedTuple):
    r"""Edges compressed by rows: the edge order that sorts them by row,
    the row pointers and the column of each edge in that order."""
    order: Tensor
    pointers: Tensor
    cols: Tensor


class _Adjacency:
    r"""The edges :math:`j \to i` as compressed rows: by target (rows
    :math:`i`, columns :math:`j`) and, for the backward pass, by source.
    :meth:`by_target` and :meth:`by_source` make the sparse matrix of one
    head's edge values, with which the edge dots are one sampled product
    (SDDMM) and their gradients one sparse-dense product (SpMM): no
    gathered feature rows."""

    def __init__(self, src: Tensor, dst: Tensor, num_dst: int,
                 num_src: int, transposed: bool = False):
        self.shape = (num_dst, num_src)
        self.target = self._compress(dst, src, num_dst)
        self.source = (self._compress(src, dst, num_src)
                       if transposed else None)

    @staticmethod
    def _compress(rows: Tensor, cols: Tensor, num_rows: int) -> _Compressed:
        order = torch.argsort(rows, stable=True)
        counts = torch.bincount(rows, minlength=num_rows)
        pointers = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
        return _Compressed(order, pointers, cols.index_select(0, order))

    @staticmethod
    def _matrix(compressed: _Compressed, values: Tensor, shape) -> Tensor:
        with warnings.catch_warnings():  # "beta state"
            warnings.simplefilter('ignore', UserWarning)
            return torch.sparse_csr_tensor(compressed.pointers,
                                           compressed.cols, values, shape,
                                           check_invariants=False)

    def by_target(self, values: Tensor) -> Tensor:
        r"""The :math:`(N_t, N_s)` matrix of :obj:`values` given in the
        order of :obj:`self.target.order`."""
        return self._matrix(self.target, values, self.shape)

    def by_source(self, values: Tensor) -> Tensor:
        r"""The :math:`(N_s, N_t)` matrix of :obj:`values` given in the
        order of :obj:`self.source.order`."""
        assert self.source is not None
        return self._matrix(self.source, values, self.shape[::-1])


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


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    r"""The tables' precision: the inputs', at least float32 (the sparse
    products' smallest)."""
    return torch.promote_types(dtype, torch.float32)


# The estimate as a pair of registered operators (forward, backward): one
# opaque node under torch.compile (its head groups and chunks are loops over
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
    dtype = query.dtype
    query, key, points = (t.to(_compute_dtype(dtype))
                          for t in (query, key, points))
    if edge_key is not None:
        edge_key = edge_key.to(query.dtype)
    heads, width = query.size(1), 2 * points.size(3)
    normaliser = points.size(3) * points.size(1)**2
    size = _group_size(heads, max(query.size(0), key.size(0)), width)
    # One pair of tables for every head group (allocated once, unless
    # compiled functions make them):
    query_table = key_table = None
    if edge_key is None:
        adjacency = _Adjacency(src, dst, query.size(0), key.size(0))
        # The sampled product's pattern (values unread with beta = 0):
        pattern = adjacency.by_target(query.new_zeros(src.numel()))
        dots = query.new_empty(heads, src.numel())  # in target order
    else:
        estimate = query.new_empty(src.numel(), heads)
    for start in range(0, heads, size):
        group = slice(start, start + size)
        group_points = _Points(points, group)
        query_table = _NodeSide(query[:, group], group_points, graph_dst,
                                query_table).table
        if edge_key is None:
            key_table = _NodeSide(key[:, group], group_points, graph_src,
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
    edges of :obj:`pattern` (:meth:`_Adjacency.by_target`; their order),
    from its tables :math:`(N, 2R)`."""
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
    compute = _compute_dtype(query.dtype)
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
    size = _group_size(heads, max(query.size(0), key.size(0)), width)
    tables = _BackwardTables(query, key, edge_key is None, size, width,
                             points.size(1) * points.size(3), graph_dst,
                             graph_src)
    edges = (_EdgeGradients(grad_dot, src, dst, query.size(0),
                            key.size(0)) if edge_key is None else None)
    for start in range(0, heads, size):
        group = slice(start, start + size)
        group_points = _Points(points, group)
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
    the compiled functions make them in one call (:func:`_compiled_whole`);
    and, for a side whose features are not compiled (:func:`_fused`), the
    cosines and sines if their table fits :data:`TABLE_ELEMENTS` (else
    :obj:`None`)."""

    def __init__(self, query: Tensor, key: Tensor, node_keys: bool,
                 size: int, width: int, angles: int,
                 graph_dst: Optional[Tensor], graph_src: Optional[Tensor]):
        def side(x: Tensor, graph: Optional[Tensor]):
            grad_features = x.new_empty(size, x.size(0), width)
            if _fused_side(x, graph, size, angles):  # a table if chunked
                return (None if _compiled_whole(x.size(0), size * angles)
                        else torch.empty_like(grad_features),
                        grad_features, None)
            cache = None
            if x.size(0) * size * angles <= TABLE_ELEMENTS:
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
        self.adjacency = _Adjacency(src, dst, num_dst, num_src,
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
                    key: Tensor, points: _Points, graph_dst: Optional[Tensor],
                    graph_src: Optional[Tensor], tables: _BackwardTables
                    ) -> Tuple[Tensor, Tensor]:
    r"""One head group's gradients with respect to the queries and the keys
    (the points' are added to :obj:`points.grad`), for keys per node."""
    assert tables.key is not None
    query_features, grad_query_features, query_cache = tables.query
    key_features, grad_key_features, key_cache = tables.key
    query_side = _NodeSide(query, points, graph_dst, query_features,
                           query_cache)
    key_side = _NodeSide(key, points, graph_src, key_features, key_cache)
    for offset, head in enumerate(range(group.start, group.stop)):
        edges.query_features(head, key_side.table[offset],
                             grad_query_features[offset])
        edges.key_features(head, query_side.table[offset],
                           grad_key_features[offset])
    return (query_side.backward(grad_query_features),
            key_side.backward(grad_key_features))


def _edge_dots(query_table: Tensor, key: Tensor, edge_key: Tensor,
               points: _Points, src: Tensor, dst: Tensor,
               graph_dst: Optional[Tensor], out: Tensor) -> None:
    r"""Write the edge dots :math:`\phi(q_i)^\top\phi(k_j + e_{ij})` of one
    head group into :obj:`out` :math:`(E, H_g)`, the key features made per
    edge chunk."""
    per_edge_points = graph_dst is not None
    for a, b in chunks(src.numel(), _edge_chunk(points, query_table.size(0),
                                                per_edge_points)):
        key_chunk = _edge_key_side(key, edge_key, points, src, dst,
                                   graph_dst, a, b).table
        product = query_table.index_select(1, dst[a:b])
        product *= key_chunk
        torch.sum(product, dim=-1, out=out[a:b].t())


def _edge_key_side(key: Tensor, edge_key: Tensor, points: _Points,
                   src: Tensor, dst: Tensor, graph_dst: Optional[Tensor],
                   a: int, b: int, keep: bool = False) -> _NodeSide:
    r"""The keys :math:`k_j + e_{ij}` of edges :obj:`a` to :obj:`b` as rows
    of a :class:`_NodeSide` (features :math:`(H_g, E_c, 2R)`); with
    :obj:`keep`, ready for its backward pass (the eager path keeps the
    cosines and sines)."""
    keys = key.index_select(0, src[a:b]) + edge_key[a:b]
    graph = None if graph_dst is None else graph_dst.index_select(
        0, dst[a:b])
    cache = None
    if keep and not _fused(keys, points, graph):
        shape = (keys.size(1), keys.size(0), points.matrix.size(3))
        cache = (keys.new_empty(shape), keys.new_empty(shape))
    return _NodeSide(keys, points, graph, cache=cache)


def _group_backward_edge_keys(grad_dot: Tensor, query: Tensor, key: Tensor,
                              edge_key: Tensor, points: _Points,
                              src: Tensor, dst: Tensor,
                              graph_dst: Optional[Tensor],
                              tables: _BackwardTables
                              ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""One head group's gradients with respect to the queries, the keys
    and the edge keys (the points' are added to :obj:`points.grad`), the
    key features made again per edge chunk."""
    query_features, grad_query_features, query_cache = tables.query
    query_side = _NodeSide(query, points, graph_dst, query_features,
                           query_cache)
    grad_query_features.zero_()
    grad_key = torch.zeros_like(key)
    grad_edge_key = torch.empty_like(edge_key)
    for a, b in chunks(src.numel(),
                       _edge_chunk(points, query.size(1),
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
