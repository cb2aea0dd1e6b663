r"""The tiles of the fused attention kernels: the edge tiles of every one
(:func:`edge_tiling`), and the head blocks, constants and grid that the
two transformer kernel modules share (:func:`head_block`, :func:`tiling`,
:func:`grid`).  Shapes only: choosing a tiling needs no host
synchronisation."""
from ikgat.ops.runtime import next_power_of_2

#: Upper bound on the elements of one edges x heads x channels tile at 4
#: warps (kernels with such tiles keep three alive; the tiles of edges x
#: heads, twice as many).  A single row of heads x channels above it takes
#: 8 warps.  Both keep every launch within the register budget without
#: spilling (benchmarks.gpu_compile).
TILE_ELEMENTS = 1024


def edge_tiling(num_edges: int, num_nodes: int, row: int,
                budget: int = TILE_ELEMENTS, min_edges: int = 2) -> dict:
    r"""``BLOCK_E`` and ``num_warps`` of a kernel whose tiles are
    :math:`B_E` edges of :obj:`row` elements: about one tile per node on
    average (:math:`E` and :math:`N` are shapes, so choosing needs no host
    synchronisation), at least :obj:`min_edges` while the tile fits, at
    most :obj:`budget` elements at 4 warps."""
    degree = next_power_of_2(max(1, -(-num_edges // max(1, num_nodes))))
    block_e = max(2, min(max(degree, min_edges), 128, budget // row))
    return dict(BLOCK_E=block_e,
                num_warps=4 if block_e * row <= budget else 8)


#: The elements of one gathered row (:math:`B_H \times \max(B_D, B_C)`)
#: and of one edge tile of the three kernels: half the GAT kernels'
#: :data:`TILE_ELEMENTS`.  Their 3-D tiles
#: (edges x heads x features) keep more registers live per element than
#: the GAT kernels' 2-D ones: at 2,048-element tiles the backward kernels
#: reached 128 registers (16 resident warps per SM) and spilled with
#: dropout at 16 x 8 x 8 (``benchmarks.gpu_compile``).
ROW_ELEMENTS = TILE_ELEMENTS // 2


def head_block(heads: int, width: int, channels: int,
               row_elements: int = ROW_ELEMENTS) -> int:
    r""":math:`B_H`: all heads in one program while a gathered row of
    :math:`B_H \times \max(B_D, B_C)` floats fits :obj:`row_elements`,
    else the largest power of two that does (the grid's second axis walks
    the head blocks)."""
    row = max(next_power_of_2(width), next_power_of_2(channels))
    return max(1, min(next_power_of_2(heads), row_elements // row))


def tiling(num_edges: int, num_nodes: int, heads: int, width: int,
           channels: int, row_elements: int = ROW_ELEMENTS,
           tile_elements: int = ROW_ELEMENTS, min_edges: int = 2) -> dict:
    r"""The block constants and warps of the three kernels: :math:`B_H`
    (:func:`head_block` for rows of :obj:`row_elements`), :math:`B_D`,
    :math:`B_C` and the edge block of
    :func:`edge_tiling` for rows of :math:`B_H
    \times \max(B_D, B_C)` elements, tiles of :obj:`tile_elements` (at
    least :obj:`min_edges` edges while they fit, and two: 8 warps
    above)."""
    block_d, block_c = next_power_of_2(width), next_power_of_2(channels)
    block_h = head_block(heads, width, channels, row_elements)
    return dict(BLOCK_H=block_h, BLOCK_D=block_d, BLOCK_C=block_c,
                **edge_tiling(num_edges, num_nodes,
                              block_h * max(block_d, block_c),
                              tile_elements, min_edges))


def grid(num_nodes: int, heads: int, constants: dict) -> tuple:
    r"""One program per node and block of :math:`B_H` heads."""
    return (num_nodes, -(-heads // constants['BLOCK_H']))
