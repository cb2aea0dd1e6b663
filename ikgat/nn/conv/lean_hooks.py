r"""The switches of the lean paths of :class:`~ikgat.IKGATConv` and
:class:`~ikgat.IKTransformerConv` and the hook bookkeeping that turns them
off.

A lean path skips steps of PyG's :class:`MessagePassing` (``edge_update``,
``message``/``aggregate``/``propagate``): a hook registered through the
public ``register_*_hook`` methods for a skipped step, or a subclass that
overrides one, would silently not run.  So registering such a hook turns
the path off until the hook is removed, and a subclass that defines a
skipped step declares its path off (unless it sets the switch itself).
"""
from typing import Any, Set

from torch.utils.hooks import RemovableHandle

#: The steps of PyG's path that each switch's lean path skips.
SKIPPED_STEPS = {
    'lean_aggregation': ('message', 'aggregate', 'update',
                         'message_and_aggregate'),
    'lean_edge_softmax': ('edge_update', ),
}


class LeanPathHooks:
    r"""Mixin for a :class:`MessagePassing` layer with lean paths: the
    ids of the registered hooks that turn them off
    (:attr:`_aggregation_hook_ids`, :attr:`_edge_update_hook_ids`), and
    the switches ``lean_aggregation`` and ``lean_edge_softmax`` turned off
    for a subclass that overrides a step they skip.  The layer that
    implements a lean path sets its switch in its own class body (which
    exempts it from that rule); :meth:`_switch_on` also catches a step
    that comes from a mixin or is set on the layer."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Ids of the registered hooks that a lean path would bypass:
        self._aggregation_hook_ids: Set[int] = set()
        self._edge_update_hook_ids: Set[int] = set()

    def __init_subclass__(cls, **kwargs: Any):
        # A subclass that overrides a step of PyG's path (and does not set
        # the switch itself) declares the lean path that skips it off:
        super().__init_subclass__(**kwargs)
        for switch, steps in SKIPPED_STEPS.items():
            if switch not in cls.__dict__ and any(name in cls.__dict__
                                                  for name in steps):
                setattr(cls, switch, False)

    def _switch_on(self, switch: str) -> bool:
        r"""Whether the lean path of :obj:`switch` (a key of
        :data:`SKIPPED_STEPS`) may run: the switch is on, and every step it
        skips is the one of the nearest class that sets the switch (no
        step from a mixin or set on the layer)."""
        if not getattr(self, switch, False):
            return False
        cls = type(self)
        owner = next(base for base in cls.__mro__ if switch in base.__dict__)
        return not any(
            name in self.__dict__
            or getattr(cls, name, None) is not getattr(owner, name, None)
            for name in SKIPPED_STEPS[switch])

    # Registering a hook turns the lean path it would bypass off until the
    # hook is removed (the handles returned keep the count):
    def register_propagate_forward_pre_hook(self, hook):
        return _LeanHookHandle(super().register_propagate_forward_pre_hook(
            hook), self._aggregation_hook_ids)

    def register_propagate_forward_hook(self, hook):
        return _LeanHookHandle(super().register_propagate_forward_hook(hook),
                               self._aggregation_hook_ids)

    def register_message_forward_pre_hook(self, hook):
        return _LeanHookHandle(super().register_message_forward_pre_hook(
            hook), self._aggregation_hook_ids)

    def register_message_forward_hook(self, hook):
        return _LeanHookHandle(super().register_message_forward_hook(hook),
                               self._aggregation_hook_ids)

    def register_aggregate_forward_pre_hook(self, hook):
        return _LeanHookHandle(super().register_aggregate_forward_pre_hook(
            hook), self._aggregation_hook_ids)

    def register_aggregate_forward_hook(self, hook):
        return _LeanHookHandle(super().register_aggregate_forward_hook(hook),
                               self._aggregation_hook_ids)

    def register_message_and_aggregate_forward_pre_hook(self, hook):
        return _LeanHookHandle(
            super().register_message_and_aggregate_forward_pre_hook(hook),
            self._aggregation_hook_ids)

    def register_message_and_aggregate_forward_hook(self, hook):
        return _LeanHookHandle(
            super().register_message_and_aggregate_forward_hook(hook),
            self._aggregation_hook_ids)

    def register_edge_update_forward_pre_hook(self, hook):
        return _LeanHookHandle(
            super().register_edge_update_forward_pre_hook(hook),
            self._edge_update_hook_ids)

    def register_edge_update_forward_hook(self, hook):
        return _LeanHookHandle(super().register_edge_update_forward_hook(hook),
                               self._edge_update_hook_ids)


class _LeanHookHandle:
    r"""PyG's :class:`~torch.utils.hooks.RemovableHandle` for a hook, which
    also keeps the layer's count of hooks that turn a lean path off."""
    def __init__(self, handle: RemovableHandle, hook_ids: Set[int]):
        self.handle = handle
        self.hook_ids = hook_ids
        hook_ids.add(handle.id)

    @property
    def id(self) -> int:
        return self.handle.id

    def remove(self) -> None:
        self.handle.remove()
        self.hook_ids.discard(self.handle.id)

    def __enter__(self) -> '_LeanHookHandle':
        return self

    def __exit__(self, *args: Any) -> None:
        self.remove()
