r"""ikgat: kernelized graph attention for PyTorch Geometric.

GAT's attention factorises into similarity kernels times an exponential of
norms; :class:`IKGATConv` generalises both parts (Implicit Kernel Attention).
:class:`IKTransformerConv` and :class:`MIKANTransformerConv` do the same for
TransformerConv's scaled dot product.
"""
from ikgat import deprecation

deprecation.install()

from ikgat import kernels  # noqa: E402
from ikgat.nn import (  # noqa: E402
    AttentionDecomposition,
    IKGATConv,
    IKTransformerConv,
    KEPGATConv,
    MIKANConv,
    MIKANTransformerConv,
)

__version__ = '0.2.0.dev0'

__all__ = [
    'IKGATConv', 'MIKANConv', 'KEPGATConv', 'IKTransformerConv',
    'MIKANTransformerConv', 'AttentionDecomposition', 'kernels',
    '__version__'
]
