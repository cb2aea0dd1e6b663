r"""Ready-made node classifiers built from any GAT-compatible layer."""
from typing import Any, Dict, Optional, Type

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.typing import Adj
from torch_geometric.utils import add_self_loops, remove_self_loops

from ikgat.nn.dropout import nonzero_dropout
from ikgat.nn.layerwise import layer_over_full_graph


class TwoLayerGAT(torch.nn.Module):
    r"""The two-layer architecture of the GAT paper for node classification:
    dropout → conv (:obj:`heads` × :obj:`hidden_channels`, concatenated) →
    ELU → dropout → conv (:obj:`out_heads` heads of :obj:`out_channels`,
    averaged).  Attention dropout equals feature dropout, as in the paper.
    The input dropout draws random numbers only for non-zero features
    (:func:`ikgat.nn.dropout.nonzero_dropout`: same distribution, several
    times faster on sparse bag-of-words inputs).

    Args:
        in_channels (int): Input features.
        hidden_channels (int): Channels per head of the first layer.
        out_channels (int): Number of classes.
        conv (type): A layer with GATConv's constructor, e.g.
            :class:`ikgat.IKGATConv` or PyG's ``GATConv``.
        heads (int, optional): Heads of the first layer. (default: :obj:`8`)
        out_heads (int, optional): Heads of the output layer.
            (default: :obj:`1`)
        dropout (float, optional): Feature and attention dropout.
            (default: :obj:`0.6`)
        conv_kwargs (dict, optional): More arguments of both layers, e.g.
            ``{'kernel': 'direct', 'p': 2.0}``. (default: :obj:`None`)
        out_conv_kwargs (dict, optional): Arguments of the output layer
            only, added to (and overriding) :obj:`conv_kwargs`, e.g.
            ``{'magnitude': False}``. (default: :obj:`None`)
        self_loops (bool, optional): Replace the self-loops of the graph by
            one per node before the layers, for layers that add none
            (PyG's ``TransformerConv`` and its drop-ins), as GATConv does
            inside. (default: :obj:`False`)
    """
    def __init__(self, in_channels: int, hidden_channels: int,
                 out_channels: int, conv: Type[torch.nn.Module], heads: int = 8,
                 out_heads: int = 1, dropout: float = 0.6,
                 conv_kwargs: Optional[Dict[str, Any]] = None,
                 out_conv_kwargs: Optional[Dict[str, Any]] = None,
                 self_loops: bool = False):
        super().__init__()
        self.self_loops = bool(self_loops)
        kwargs = dict(conv_kwargs or {})
        out_kwargs = {**kwargs, **(out_conv_kwargs or {})}
        self.dropout = dropout
        self.conv1 = conv(in_channels, hidden_channels, heads=heads,
                          dropout=dropout, **kwargs)
        self.conv2 = conv(hidden_channels * heads, out_channels,
                          heads=out_heads, concat=False, dropout=dropout,
                          **out_kwargs)

    def reset_parameters(self):
        self.conv1.reset_parameters()
        self.conv2.reset_parameters()

    def forward(self, x: Tensor, edge_index: Adj, **kwargs: Any) -> Tensor:
        r"""The class logits :math:`(N, \text{out})`: dropout, the first
        layer and ELU, dropout, the second layer; :obj:`kwargs` go to both
        layers."""
        edge_index = self._with_self_loops(edge_index, x.size(0))
        x = nonzero_dropout(x, p=self.dropout, training=self.training)
        x = F.elu(self.conv1(x, edge_index, **kwargs))
        x = F.dropout(x, p=self.dropout, training=self.training)
        return self.conv2(x, edge_index, **kwargs)

    @torch.no_grad()
    def inference(self, x: Tensor, edge_index: Tensor,
                  batch_size: int = 4096) -> Tensor:
        r"""The model's output on every node of the full graph, computed
        layer by layer for :obj:`batch_size` targets at a time
        (:func:`ikgat.nn.layerwise.layer_over_full_graph`): only one
        layer's activations of the whole graph are held at once, and each
        batch's memory grows with its in-edges.  In evaluation mode it
        equals ``model(x, edge_index)``, the implicit kernels included
        (their density comes from the full graph); the evaluation after
        mini-batch training, as in PyG's examples."""
        edge_index = self._with_self_loops(edge_index, x.size(0))
        x = F.elu(layer_over_full_graph(self.conv1, x, edge_index,
                                        batch_size))
        return layer_over_full_graph(self.conv2, x, edge_index, batch_size)

    def _with_self_loops(self, edge_index: Adj, num_nodes: int) -> Adj:
        # GATConv's own rule (remove, then add one loop per node), applied
        # once for both layers.
        if not self.self_loops:
            return edge_index
        if not isinstance(edge_index, Tensor) or edge_index.is_sparse:
            raise ValueError(
                f'TwoLayerGAT(self_loops=True) takes an edge_index tensor of '
                f'shape (2, E) (got {type(edge_index).__name__}); add the '
                f'self-loops to the sparse adjacency and pass '
                f'self_loops=False')
        edge_index, _ = remove_self_loops(edge_index)
        edge_index, _ = add_self_loops(edge_index, num_nodes=num_nodes)
        return edge_index
