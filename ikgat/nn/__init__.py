from ikgat.nn.conv import (
    AttentionDecomposition,
    IKGATConv,
    KEPGATConv,
    MIKANConv,
    ksvd_loss,
)
from ikgat.nn.aggregation import attention_aggregate
from ikgat.nn.edge_softmax import kernel_edge_softmax
from ikgat.nn.kl import kl_divergence

__all__ = [
    'IKGATConv', 'MIKANConv', 'KEPGATConv', 'AttentionDecomposition',
    'kl_divergence', 'ksvd_loss', 'attention_aggregate',
    'kernel_edge_softmax'
]
