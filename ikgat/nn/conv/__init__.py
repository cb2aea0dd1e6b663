from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv
from ikgat.nn.conv.kep_gat_conv import KEPGATConv, ksvd_loss
from ikgat.nn.conv.mikan_conv import MIKANConv

__all__ = [
    'IKGATConv', 'MIKANConv', 'KEPGATConv', 'AttentionDecomposition',
    'ksvd_loss'
]
