r"""Deprecated: the switches of the lean paths moved to
:mod:`ikgat.nn.conv.kernel_attention`, where ``LeanPathHooks`` is
:class:`~ikgat.nn.conv.kernel_attention.LeanPathSwitches`.  The old names
still work for one release, with a :class:`DeprecationWarning`."""
import warnings
from typing import Any

#: Old name -> name in :mod:`ikgat.nn.conv.kernel_attention`.
_MOVED = {'LeanPathHooks': 'LeanPathSwitches', 'SKIPPED_STEPS': 'SKIPPED_STEPS'}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        new_name = _MOVED[name]
        warnings.warn(
            f"ikgat.nn.conv.lean_hooks.{name} is deprecated; import "
            f"{new_name} from ikgat.nn.conv.kernel_attention", DeprecationWarning,
            stacklevel=2)
        from ikgat.nn.conv import kernel_attention
        return getattr(kernel_attention, new_name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
