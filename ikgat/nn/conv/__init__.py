from ikgat.nn.conv.ik_transformer_conv import IKTransformerConv
from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv
from ikgat.nn.conv.kep_gat_conv import KEPGATConv, ksvd_loss
from ikgat.nn.conv.mikan_conv import MIKANConv
from ikgat.nn.conv.mikan_transformer_conv import MIKANTransformerConv

__all__ = [
    'IKGATConv', 'MIKANConv', 'KEPGATConv', 'IKTransformerConv',
    'MIKANTransformerConv', 'AttentionDecomposition', 'ksvd_loss'
]
