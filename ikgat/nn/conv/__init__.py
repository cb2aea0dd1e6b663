from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv
from ikgat.nn.conv.mikan_conv import MIKANConv

__all__ = ['IKGATConv', 'MIKANConv', 'AttentionDecomposition']
