r"""Supply the ``batch`` vector of a mini-batch of graphs to every ikgat
layer of a model whose code does not pass it on (PyG's ``GPSConv`` and
``BasicGNN`` call ``conv(x, edge_index, **kwargs)``, and code written for
GATConv has no ``batch`` to give)."""
from contextlib import contextmanager
from typing import Iterator, Optional

import torch
from torch import Tensor

from ikgat.nn.conv.gat_base import GATConvBase
from ikgat.nn.conv.ik_transformer_conv import IKTransformerConv


@contextmanager
def graph_batch(model: torch.nn.Module, batch: Tensor,
                batch_size: Optional[int] = None) -> Iterator[None]:
    r"""Within the block, every ikgat layer of :obj:`model` called without
    a :obj:`batch` argument takes :obj:`batch` (and :obj:`batch_size`) as
    if it had been passed to its :meth:`forward`, so that no graph's
    outputs depend on the other graphs of the mini-batch:

    .. code-block:: python

        from torch_geometric.nn import GPSConv
        from ikgat.nn import MIKANConv, graph_batch

        gps = GPSConv(64, MIKANConv(64, 16, heads=4), heads=4)
        for data in loader:  # a DataLoader over many small graphs
            with graph_batch(gps, data.batch, data.num_graphs):
                out = gps(data.x, data.edge_index, data.batch)

    A layer given :obj:`batch` explicitly uses its own.  Layers of other
    libraries (PyG's GATConv) are left alone.  The block may be nested; it
    restores what the layers had before.

    Args:
        model (torch.nn.Module): The model, or one layer.
        batch (torch.Tensor): The sorted graph index of every node,
            PyG's ``Batch.batch``.
        batch_size (int, optional): The number of graphs, PyG's
            ``Batch.num_graphs``; read from :obj:`batch` if not given (a
            host synchronisation on CUDA). (default: :obj:`None`)
    """
    layers = [module for module in model.modules()
              if isinstance(module, (GATConvBase, IKTransformerConv))]
    before = [layer.graph_batch for layer in layers]
    for layer in layers:
        layer.graph_batch = (batch, batch_size)
    try:
        yield
    finally:
        for layer, previous in zip(layers, before):
            layer.graph_batch = previous
