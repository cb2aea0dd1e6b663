r"""What :class:`~ikgat.IKTransformerConv` does with its inputs before it
attends, whichever backend attends: the checks that name the offending
value, the projections (queries, keys, values, the skip connection and
the edge keys, one product per input), and the edges in the order of
PyG's ``propagate``."""
from typing import Tuple, Union

import torch
from torch import Tensor
from torch_geometric.typing import Adj, OptTensor, SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor, to_edge_index

from ikgat.nn.conv.checks import (
    check_batch,
    check_edge_attr,
    check_edge_index,
    check_node_features,
)
from ikgat.nn.projections import project_together


class TransformerInputs:
    r"""Mixin of :class:`~ikgat.IKTransformerConv` (before its
    :class:`~torch_geometric.nn.conv.TransformerConv` base): the input
    checks and projections of its forward pass and attention
    decomposition, from TransformerConv's parameters (``lin_query``,
    ``lin_key``, ``lin_value``, ``lin_skip``, ``lin_edge``)."""

    def _project(self, x_src: Tensor, x_dst: Tensor, edge_index: Adj,
                 edge_attr: OptTensor,
                 batch: Union[OptTensor, Tuple[Tensor, Tensor]]
                 ) -> Tuple[Tensor, Tensor, Tensor, OptTensor, OptTensor,
                            Tuple[Tensor, Tensor, OptTensor]]:
        r"""Check the inputs; return the queries, keys and values
        :math:`(N, H, C)`, the skip connection :math:`\mathbf{W}_1
        \mathbf{x}_i` (without :obj:`root_weight`: :obj:`None`), the edge
        keys :math:`(E, H, C)` (with :obj:`edge_dim`) and the edges'
        sources, targets and target pointer.  The maps of one input are
        one product (:func:`~ikgat.nn.projections.project_together`)."""
        self._check_inputs(x_src, x_dst, edge_index, edge_attr, batch)
        H, C = self.heads, self.out_channels
        skip = [self.lin_skip] if self.root_weight else []
        if x_src is x_dst:
            query, key, value, *x_r = project_together(
                x_src, [self.lin_query, self.lin_key, self.lin_value] + skip)
        else:
            query, *x_r = project_together(x_dst, [self.lin_query] + skip)
            key, value = project_together(x_src,
                                          [self.lin_key, self.lin_value])
        src, dst, ptr, edge_attr = _edges(edge_index, edge_attr)
        edge_key = None
        if self.lin_edge is not None:
            edge_key = self.lin_edge(edge_attr).view(-1, H, C)
        return (query.view(-1, H, C), key.view(-1, H, C),
                value.view(-1, H, C), x_r[0] if x_r else None, edge_key,
                (src, dst, ptr))

    def _check_inputs(self, x_src: Tensor, x_dst: Tensor, edge_index: Adj,
                      edge_attr: OptTensor,
                      batch: Union[OptTensor, Tuple[Tensor, Tensor]]
                      ) -> None:
        name = type(self).__name__
        if torch.compiler.is_compiling():
            # Only the device-side assertion that the indices are in range:
            if x_dst is not None:
                check_edge_index(name, edge_index, x_src.size(0),
                                 x_dst.size(0))
            return
        src_channels, dst_channels = (
            (self.in_channels, self.in_channels) if isinstance(
                self.in_channels, int) else self.in_channels)
        if x_dst is None:
            raise ValueError(f"{name}: the target features of x=(x_src, "
                             f"x_dst) are None; the queries need them")
        check_node_features(name, 'x_src' if x_src is not x_dst else 'x',
                            x_src, src_channels)
        if x_dst is not x_src:
            check_node_features(name, 'x_dst', x_dst, dst_channels)
        check_edge_index(name, edge_index, x_src.size(0), x_dst.size(0))
        check_edge_attr(name, edge_attr, self.edge_dim, edge_index)
        if self.edge_dim is not None and edge_attr is None and not (
                isinstance(edge_index, SparseTensor)
                and edge_index.has_value()):
            raise ValueError(f"{name}: the layer has edge_dim="
                             f"{self.edge_dim} but no 'edge_attr' was given; "
                             f"pass edge_attr of shape [num_edges, "
                             f"{self.edge_dim}]")
        batches = batch if isinstance(batch, (tuple, list)) else (batch,
                                                                  batch)
        for vector, rows, side in ((batches[0], x_src.size(0), 'batch'),
                                   (batches[1], x_dst.size(0), 'batch')):
            check_batch(name, side, vector, rows)


def _edges(edge_index: Adj, edge_attr: OptTensor
           ) -> Tuple[Tensor, Tensor, OptTensor, OptTensor]:
    r"""The sources, targets, target pointer (sparse inputs) and edge
    features of an adjacency, in the order PyG's ``propagate`` uses
    (features of shape :math:`(E,)` as :math:`(E, 1)`, as the input
    check accepts them for ``edge_dim=1``)."""
    if edge_attr is not None and edge_attr.dim() == 1:
        edge_attr = edge_attr.view(-1, 1)
    if isinstance(edge_index, SparseTensor):
        dst, src, value = edge_index.coo()
        if edge_attr is None:
            edge_attr = value
        return src, dst, edge_index.storage.rowptr(), edge_attr
    if is_torch_sparse_tensor(edge_index):
        (dst, src), _ = to_edge_index(edge_index)
        return src, dst, None, edge_attr
    if edge_index.dtype != torch.long:
        edge_index = edge_index.long()
    return edge_index[0], edge_index[1], None, edge_attr
