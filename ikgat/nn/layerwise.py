r"""One layer over the whole graph, a batch of targets at a time: the
layer-wise inference of PyG's mini-batch examples, without a sampler.

For targets :math:`T = \{s, \dots, s + B - 1\}` the layer runs on the
subgraph of their in-edges :math:`\{(j, i) : i \in T\}`, whose nodes are
:math:`T` (first, in order) followed by the other sources.  A layer whose
target output depends only on the target, its in-edges and their sources
(:attr:`~ikgat.nn.conv.kernel_attention.AttentionLayer.local_to_in_neighbourhood`,
and PyG's GATConv and TransformerConv)
then gives every target its full-graph output, while memory grows with the
batch's in-edges, not with :math:`E`.  The layer's
self-loops are those of the subgraph's nodes, so the targets get theirs.
Layers that summarise the graph run inside their
:meth:`~ikgat.nn.conv.kernel_attention.AttentionLayer.full_graph_summary`; a layer
that is not local to in-neighbourhoods (KEPGATConv's adjoint branch sums
over out-edges) runs on the whole graph at once.
"""
from contextlib import nullcontext
from typing import Optional

import torch
from torch import Tensor

from ikgat.nn.conv.kernel_attention import AttentionLayer


@torch.no_grad()
def layer_over_full_graph(conv: torch.nn.Module, x: Tensor,
                          edge_index: Tensor, batch_size: int,
                          edge_attr: Optional[Tensor] = None) -> Tensor:
    r"""Return :obj:`conv` applied to the graph :math:`(x, \text{edge\_index})`
    for :obj:`batch_size` targets at a time (module docstring), without
    gradients, in the layer's current mode (call ``model.eval()`` first).

    Args:
        conv: A GAT-style layer called as ``conv(x, edge_index)`` or
            ``conv(x, edge_index, edge_attr)``.
        x: Node features :math:`(N, F)`.
        edge_index: Edges :math:`(2, E)`, sources in row 0.
        batch_size: Targets per batch, at least 1.
        edge_attr: Edge features :math:`(E, D)`, or :obj:`None`.
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f'layer_over_full_graph: batch_size must be a '
                         f'positive integer (got {batch_size!r})')
    extra = () if edge_attr is None else (edge_attr, )
    is_ours = isinstance(conv, AttentionLayer)
    if is_ours and not conv.local_to_in_neighbourhood:
        return conv(x, edge_index, *extra)
    num_nodes = x.size(0)
    order = torch.argsort(edge_index[1], stable=True)
    edge_index = edge_index[:, order]
    if edge_attr is not None:
        edge_attr = edge_attr[order]
    # rowptr[i]: the first of target i's in-edges in the sorted order.
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=x.device)
    torch.cumsum(torch.bincount(edge_index[1], minlength=num_nodes), 0,
                 out=rowptr[1:])
    rowptr = rowptr.tolist()  # one sync for the whole pass
    outputs = []
    summary = conv.full_graph_summary(x) if is_ours else nullcontext()
    with summary:
        for start in range(0, num_nodes, batch_size):
            end = min(start + batch_size, num_nodes)
            lo, hi = rowptr[start], rowptr[end]
            src, dst = edge_index[0, lo:hi], edge_index[1, lo:hi]
            # Subgraph nodes: the targets start..end-1, then the other
            # sources in increasing order; relabel the edges to match.
            sources = torch.unique(src)
            others = sources[(sources < start) | (sources >= end)]
            inside = (src >= start) & (src < end)
            local_src = torch.where(
                inside, src - start,
                (end - start) + torch.searchsorted(others, src))
            nodes = torch.cat([torch.arange(start, end, device=x.device),
                               others])
            sub_edges = torch.stack([local_src, dst - start])
            sub_extra = () if edge_attr is None else (edge_attr[lo:hi], )
            out = conv(x[nodes], sub_edges, *sub_extra)
            outputs.append(out[:end - start])
    if not outputs:
        return conv(x, edge_index, *extra)
    return torch.cat(outputs)

