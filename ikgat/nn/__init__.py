from ikgat.nn.conv import (
    AttentionDecomposition,
    IKGATConv,
    IKTransformerConv,
    KEPGATConv,
    MIKANConv,
    MIKANTransformerConv,
)
from ikgat.nn.graph_batch import graph_batch
from ikgat.nn.layerwise import layer_over_full_graph
from ikgat.nn.losses import kl_divergence, ksvd_loss
from ikgat.ops.aggregation import attention_aggregate
from ikgat.ops.edge_softmax import kernel_edge_softmax

__all__ = [
    'IKGATConv', 'MIKANConv', 'KEPGATConv', 'IKTransformerConv',
    'MIKANTransformerConv', 'AttentionDecomposition',
    'kl_divergence', 'ksvd_loss', 'attention_aggregate',
    'kernel_edge_softmax', 'layer_over_full_graph', 'graph_batch'
]
