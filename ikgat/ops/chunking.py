r"""Edge chunks of the memory-lean operators.

:func:`~ikgat.ops.edge_softmax.kernel_edge_softmax` and
:func:`~ikgat.ops.aggregation.attention_aggregate` walk the edges in chunks
so that their scratch tensors stay :math:`O(\text{chunk})`: a chunk holds
:obj:`CHUNK_ELEMENTS` elements of the operator's per-edge buffer (:math:`H C`
for the aggregation; the edge softmax's :math:`H` per edge use its own
:obj:`~ikgat.ops.edge_softmax.CHUNK_ELEMENTS`).
"""
from typing import Iterator, Optional, Tuple

#: Elements of one chunk's per-edge buffer (float32: 4 MiB); the edge chunk
#: is this divided by the elements per edge.
CHUNK_ELEMENTS = 1 << 20


def chunks(num_edges: int, chunk_size: int) -> Iterator[Tuple[int, int]]:
    r"""Yield :obj:`(start, stop)` of consecutive chunks of
    :obj:`chunk_size` edges covering :obj:`num_edges`."""
    for start in range(0, num_edges, chunk_size):
        yield start, min(start + chunk_size, num_edges)


def resolve_chunk_size(owner: str, chunk_size: Optional[int],
                       elements_per_edge: int,
                       elements: int = CHUNK_ELEMENTS) -> int:
    r"""Return :obj:`chunk_size`, or by default :obj:`elements` (by default
    :obj:`CHUNK_ELEMENTS`) divided by :obj:`elements_per_edge`; raise naming
    :obj:`owner` if it is not a positive integer."""
    if chunk_size is None:
        return max(1, elements // max(1, elements_per_edge))
    if isinstance(chunk_size, bool) or not isinstance(
            chunk_size, int) or chunk_size < 1:
        raise ValueError(f"{owner}: 'chunk_size' must be a positive integer "
                         f"(got {chunk_size!r})")
    return chunk_size
