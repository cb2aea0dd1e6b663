from ikgat.nn.conv.ikgat_conv import AttentionDecomposition, IKGATConv

__all__ = ['IKGATConv', 'AttentionDecomposition']
