r"""ikgat: kernelized graph attention for PyTorch Geometric.

GAT's attention factorises into similarity kernels times an exponential of
norms; :class:`IKGATConv` generalises both parts (Implicit Kernel Attention).
:class:`IKTransformerConv` and :class:`MIKANTransformerConv` do the same for
TransformerConv's scaled dot product.

The names below are imported when first used (a module ``__getattr__``,
PEP 562), so that ``import ikgat.cli`` and ``ikgat --help`` do not import
torch.
"""
import importlib
from typing import Any, List

from ikgat import deprecation

deprecation.install()

__version__ = '0.2.0.dev0'

#: The layers, by the module of :mod:`ikgat.nn` that exports them.
_LAYERS = ('IKGATConv', 'MIKANConv', 'KEPGATConv', 'IKTransformerConv',
           'MIKANTransformerConv', 'AttentionDecomposition')
#: The subpackages reachable as attributes of ``ikgat`` once used.
_SUBPACKAGES = ('kernels', 'nn', 'ops', 'models', 'data', 'training',
                'inspection', 'metrics', 'cli')

__all__ = [
    'IKGATConv', 'MIKANConv', 'KEPGATConv', 'IKTransformerConv',
    'MIKANTransformerConv', 'AttentionDecomposition', 'kernels',
    '__version__'
]


def __getattr__(name: str) -> Any:
    if name in _LAYERS:
        return getattr(importlib.import_module('ikgat.nn'), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f'ikgat.{name}')
    raise AttributeError(f"module 'ikgat' has no attribute {name!r}")


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_LAYERS) | set(_SUBPACKAGES))
