from ikgat.nn.conv import AttentionDecomposition, IKGATConv

__all__ = ['IKGATConv', 'AttentionDecomposition']
