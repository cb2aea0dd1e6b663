r"""Values derived from an :obj:`edge_index` tensor (its self-looped edges,
its CSR), kept while the tensor lives and shared by every layer that is
given the same tensor, as PyG's :class:`~torch_geometric.EdgeIndex` keeps
its sort orders with the index.

Off the CPU, deriving these values synchronises with the host (selecting
the edges that are not self-loops) or sorts every edge, so the layers
compute them once per graph: passing the same :obj:`edge_index` to every
layer and in every step, as PyG's training loops do, computes them once for
the whole model.  A value is valid while the tensor is the same object (held
by a weak reference) at the same version (an in-place change bumps it)
with the same :obj:`key` (e.g. the number of nodes); each tensor keeps the
last value of each kind.  The values live as long as the tensor (not the
layers: about 3 GB for a graph of ogbn-products size), or until
:func:`clear`.  Nothing is stored on the tensor itself, so saving a graph
or a layer saves none of it.  Under :func:`torch.inference_mode` nothing
is stored (its tensors could not be saved for a later backward pass, and
inference tensors track no version): values are looked up, or computed
for the call.  While :func:`torch.compile` traces, the values are computed
in the compiled graph for every call, not looked up: a dictionary keyed
by tensor identity would become a guard that fails for every new tensor
(a recompilation per graph).

Writes that do not bump the version are not seen: through ``.data``,
NumPy or DLPack views of :obj:`edge_index`, or in place into the edges a
layer returns with its attention weights (they are the stored self-looped
edges).  After such a write, call :func:`clear`.
"""
from typing import Any, Callable, Dict, Hashable, Optional, Tuple

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

# edge_index -> {kind: ((version, key), value)}
_CACHES: WeakIdKeyDictionary = WeakIdKeyDictionary()


def lookup(edge_index: Tensor, kind: str, key: Hashable) -> Optional[Any]:
    r"""The value of :obj:`kind` stored for :obj:`edge_index` and
    :obj:`key`, or :obj:`None`."""
    entries: Dict[str, Tuple[Any, Any]] = _CACHES.get(edge_index, {})
    stamp, value = entries.get(kind, (None, None))
    return value if stamp == (edge_index._version, key) else None


def store(edge_index: Tensor, kind: str, key: Hashable, value: Any) -> Any:
    r"""Keep :obj:`value` as the :obj:`kind` of :obj:`edge_index` for
    :obj:`key` (replacing the previous one) and return it."""
    entries = _CACHES.setdefault(edge_index, {})
    entries[kind] = ((edge_index._version, key), value)
    return value


def cached(edge_index: Tensor, kind: str, key: Hashable,
           compute: Callable[[], Any]) -> Any:
    r"""The stored :obj:`kind` of :obj:`edge_index` for :obj:`key`, computed
    by :obj:`compute` and stored if there is none (computed, not stored,
    in inference mode, and computed in the graph under
    :func:`torch.compile`)."""
    if torch.compiler.is_compiling() or edge_index.is_inference():
        return compute()
    value = lookup(edge_index, kind, key)
    if value is None:
        value = compute()
        if not torch.is_inference_mode_enabled():
            store(edge_index, kind, key, value)
    return value


def clear() -> None:
    r"""Free every stored value now (they are recomputed when needed)."""
    _CACHES.clear()
