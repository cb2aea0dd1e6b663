from ikgat.nn.conv import AttentionDecomposition, IKGATConv, MIKANConv
from ikgat.nn.kl import kl_divergence

__all__ = ['IKGATConv', 'MIKANConv', 'AttentionDecomposition', 'kl_divergence']
