r"""The edges of a graph sorted by target (CSR) and by source (CSC), the
layout every fused attention operator reads (:mod:`ikgat.ops.gat_attention`,
:mod:`ikgat.ops.transformer_attention`).

A program per target walks its in-edges ``rowptr[i]:rowptr[i+1]`` in the
CSR order; a program per source walks its out-edges
``colptr[j]:colptr[j+1]`` in the CSC order, whose entries point back into
the CSR order (``csc_edge``), so that the backward pass reads what the
forward pass wrote without atomics.  :func:`prepare_csr` sorts once per
graph; the layers keep the result with the graph
(:mod:`ikgat.nn.graph_cache`).
"""
from typing import NamedTuple, Optional, Union

import torch
from torch import Tensor


class AttentionCSR(NamedTuple):
    r"""The edges sorted by target (CSR) and by source (CSC), from
    :func:`prepare_csr`.  Positions :math:`0..E-1` below are positions in
    the CSR order."""
    # Integer tensors (int32 or int64, see prepare_csr):
    rowptr: Tensor  #: (N_t + 1,) in-edges of target i: rowptr[i]:rowptr[i+1]
    src: Tensor  #: (E,) source of each edge, CSR order
    dst: Tensor  #: (E,) target of each edge, CSR order
    perm: Tensor  #: (E,) original edge id of each CSR position
    inverse_perm: Tensor  #: (E,) CSR position of each original edge
    colptr: Tensor  #: (N_s + 1,) out-edges of source j in the CSC order
    csc_edge: Tensor  #: (E,) CSR position of each CSC entry
    csc_dst: Tensor  #: (E,) target of each CSC entry
    num_src: int
    num_dst: int
    #: With self-loops added in the sort (prepare_csr), their number.
    self_loops: Optional[int] = None


def prepare_csr(edge_index: Tensor, num_src: int, num_dst: int,
                index_dtype: Optional[torch.dtype] = None,
                self_loops: Optional[int] = None) -> AttentionCSR:
    r"""Sort the edges of an :math:`(2, E)` :obj:`edge_index` (row 0 the
    sources, row 1 the targets) by target and by source, once per graph.

    Stable sorts, so duplicate edges keep their order.  The pointers come
    from :func:`torch.searchsorted` on the sorted indices, which needs no
    host synchronisation.  The indices are kept as :obj:`index_dtype`:
    by default int32 (:math:`24 E` bytes for the six edge arrays) when
    every index and pointer fits, int64 otherwise; the kernels compute
    addresses in int64 either way.

    With :obj:`self_loops` :math:`= n`, the CSR of GATConv's self-loops:
    of ``add_self_loops(*remove_self_loops(edge_index), num_nodes=n)``, the
    same edges in the same order, without selecting edges (a host
    synchronisation on CUDA).  The sort itself moves the self-loops that
    :obj:`edge_index` holds behind every node's range, where no kernel
    reads them, and one self-loop per node :math:`0..n-1` is appended.
    Positions then refer to ``[edge_index, loops]``, so such a CSR takes no
    edge gate and returns no attention weights.
    """
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"prepare_csr: 'edge_index' must be (2, E) (got "
                         f"{tuple(edge_index.shape)})")
    if self_loops is not None and not 0 <= self_loops <= min(num_src,
                                                             num_dst):
        raise ValueError(f"prepare_csr: 'self_loops' must lie in 0.."
                         f"{min(num_src, num_dst)}, the nodes that are both "
                         f"sources and targets (got {self_loops!r})")
    index = edge_index.long()
    src, dst = index[0], index[1]
    device = index.device
    if self_loops is not None:
        # Keys past the last node: sorted behind every node's range.
        given_loop = src == dst
        loops = torch.arange(self_loops, device=device)
        src = torch.cat([src.masked_fill(given_loop, num_src), loops])
        dst = torch.cat([dst.masked_fill(given_loop, num_dst), loops])
    dst_sorted, perm = torch.sort(dst, stable=True)
    src_csr = src.index_select(0, perm)
    rowptr = torch.searchsorted(
        dst_sorted, torch.arange(num_dst + 1, device=device))
    inverse_perm = torch.empty_like(perm)
    inverse_perm[perm] = torch.arange(perm.numel(), device=device)
    src_sorted, csc_edge = torch.sort(src_csr, stable=True)
    colptr = torch.searchsorted(
        src_sorted, torch.arange(num_src + 1, device=device))
    csc_dst = dst_sorted.index_select(0, csc_edge)
    if index_dtype is None:
        fits = max(src.numel(), num_src, num_dst) < 2**31 - 1
        index_dtype = torch.int32 if fits else torch.int64
    return AttentionCSR(*(tensor.to(index_dtype).contiguous() for tensor in (
        rowptr, src_csr, dst_sorted, perm, inverse_perm, colptr, csc_edge,
        csc_dst)), int(num_src), int(num_dst), self_loops)


def csr_for(owner: str, edge_index_or_csr: Union[Tensor, AttentionCSR],
            num_src: int, num_dst: int,
            self_loops_allowed: bool = True) -> AttentionCSR:
    r"""The CSR an operator reads: :obj:`edge_index_or_csr` sorted here
    (:func:`prepare_csr`), or checked to be prepared for :obj:`num_src`
    sources and :obj:`num_dst` targets (and without added self-loops
    unless :obj:`self_loops_allowed`); a mismatch raises naming
    :obj:`owner`."""
    if not isinstance(edge_index_or_csr, AttentionCSR):
        return prepare_csr(edge_index_or_csr, num_src, num_dst)
    csr = edge_index_or_csr
    if (csr.num_src, csr.num_dst) != (num_src, num_dst) or (
            csr.self_loops is not None and not self_loops_allowed):
        raise ValueError(f"{owner}: the prepared CSR is for {csr.num_src} "
                         f"sources and {csr.num_dst} targets (self_loops="
                         f"{csr.self_loops}), the inputs have {num_src} and "
                         f"{num_dst}; call prepare_csr(edge_index, N_src, "
                         f"N_dst) for them")
    return csr
