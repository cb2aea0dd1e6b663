r"""The pieces of :mod:`ikgat.ops.edge_fourier`'s estimate (its module
docstring has the formulas), sized so that no scratch grows with the graph:
a side's per-node feature tables by head group (:class:`NodeSide`, at most
:data:`TABLE_ELEMENTS` floats; on CPU in float32 the C kernels of
:mod:`ikgat.ops.node_terms_native`, else compiled loops of
:mod:`ikgat.ops.compiled_features` where they pay), the edges by target
(:class:`Adjacency`), and the chunk sizes (:func:`group_size`,
:func:`edge_chunk`).
"""
import warnings
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor

import ikgat.ops.node_terms_native as node_terms_native
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


class Points:
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


def _angles(x: Tensor, points: Points, graph: Optional[Tensor]) -> Tensor:
    r""":math:`W_s x` of rows :math:`x` :math:`(n, H_g, C)`, head-major and
    the sets side by side: :math:`(H_g, n, mR)`; with :obj:`graph`, each row
    against the points of its graph."""
    if graph is None:
        return torch.bmm(x.transpose(0, 1), points.matrix[0])
    return torch.einsum('nhc,nhcq->hnq', x, points.matrix[graph])


def _angles_backward(grad: Tensor, x: Tensor, points: Points,
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


def fused_side(x: Tensor, graph: Optional[Tensor], heads: int,
               angles: int) -> bool:
    r"""Whether the features of rows :obj:`x` in a group of :obj:`heads`
    heads, :obj:`angles` angles per head, come from
    :mod:`ikgat.ops.compiled_features` (points shared by all rows)."""
    return graph is None and use_compiled(x, x.size(0) * heads * angles)


def fuses(x: Tensor, points: Points, graph: Optional[Tensor]) -> bool:
    r""":func:`fused_side` for a head group's :class:`Points`."""
    return fused_side(x, graph, points.matrix.size(1),
                      points.matrix.size(3))


def compiled_whole(rows: int, angles: int) -> bool:
    r"""Whether the compiled functions take all :obj:`rows` rows of
    :obj:`angles` angles each in one call (:data:`COMPILED_WHOLE_ANGLES`)."""
    return rows * angles <= COMPILED_WHOLE_ANGLES


class NodeSide:
    r"""One side's (queries' or keys') features in a head group,
    ``table`` :math:`(H_g, n, 2R)`, written into :obj:`table`
    (allocated if not given): for rows of points shared by all rows, in
    float32 on CPU, by the C kernels of
    :mod:`ikgat.ops.node_terms_native` in one call (their backward pass
    recomputes the angles); else row chunk by row chunk: by the compiled
    functions of :mod:`ikgat.ops.compiled_features` where they apply
    (:func:`fuses`; all rows in one call up to
    :data:`COMPILED_WHOLE_ANGLES` angles, a new table, else chunks of
    :data:`COMPILED_CHUNK_ANGLES`; their backward pass recomputes the
    angles), else with cache-sized temporaries and the cosines and sines
    kept in :obj:`cache` :math:`(H_g, n, mR)` if given (else recomputed by
    :meth:`backward`)."""

    def __init__(self, x: Tensor, points: Points, graph: Optional[Tensor],
                 table: Optional[Tensor] = None,
                 cache: Optional[Tuple[Tensor, Tensor]] = None):
        self.x, self.points, self.graph = x, points, graph
        self.native = graph is None and node_terms_native.table_applies(
            x, points.num_points)
        if self.native:
            self.table = node_terms_native.features(
                x, points.matrix[0], points.num_points, out=table)
            self.fused, self.cache = False, None
            return
        self.fused = fuses(x, points, graph)
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
                    if compiled_whole(self.x.size(0), per_row)
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
        if self.native:
            grad_x, grad_matrix = node_terms_native.features_backward(
                grad_table, self.x, self.points.matrix[0],
                self.points.num_points)
            self.points.grad[0] += grad_matrix
            return grad_x
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


class Adjacency:
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


def group_size(num_heads: int, rows: int, width: int) -> int:
    r"""Heads per group: as many as keep a feature table of :obj:`rows`
    rows within :data:`TABLE_ELEMENTS` (at least one), dividing
    :obj:`num_heads` so that every group reuses the same tables."""
    size = max(1, min(num_heads, TABLE_ELEMENTS // max(1, rows * width)))
    while num_heads % size:
        size -= 1
    return size


def edge_chunk(points: Points, heads: int, per_edge_points: bool) -> int:
    width = 2 * points.num_points * heads
    if per_edge_points:
        width += points.matrix[0].numel()
    return max(1, CHUNK_ELEMENTS // width)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    r"""The tables' precision: the inputs', at least float32 (the sparse
    products' smallest)."""
    return torch.promote_types(dtype, torch.float32)


# The estimate as a pair of registered operators (forward, backward): one
# opaque node under torch.compile (its head groups and chunks are loops over
# sizes), a fake implementation that also serves the 'meta' device, and
# autograd through the backward operator, which recomputes the features (so
# the operator is differentiable once).
