r"""Each subclass of a :class:`MessagePassing` layer compiles its own
``propagate``.

PyG compiles ``propagate`` and ``edge_updater`` from templates when a class
is first instantiated, stores them on the class, and keeps the methods they
replace as the class's originals, which explain mode runs (they apply the
edge mask in ``explain_message``; the compiled ones do not).  A subclass
instantiated after its parent finds the parent's compiled methods as its
own and keeps them as its originals: their ``collect`` gathers the
parent's message arguments, and explain mode then runs the parent's
message passing (:class:`~ikgat.MIKANConv` created after an
:class:`~ikgat.IKGATConv` ignored the edge mask of PyG's explainers; an
:class:`~ikgat.IKTransformerConv` created after a ``TransformerConv``
would collect TransformerConv's queries and keys).
"""
from typing import Any

from torch_geometric.nn.conv import MessagePassing


class OwnTemplates:
    r"""Mixin (before the :class:`MessagePassing` base): every subclass
    starts from :class:`MessagePassing`'s own ``propagate`` and
    ``edge_updater``, unless it defines them, so that PyG compiles its own
    and explain mode runs its own."""

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        for name in ('propagate', 'edge_updater'):
            if name not in cls.__dict__:
                setattr(cls, name, getattr(MessagePassing, name))
