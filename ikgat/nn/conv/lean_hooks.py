r"""Deprecated: the switches of the lean paths moved to
:mod:`ikgat.nn.conv.kernel_attention`, where ``LeanPathHooks`` is
:class:`~ikgat.nn.conv.kernel_attention.LeanPathSwitches`.  The old names
still work for one release, with a :class:`DeprecationWarning`."""
from ikgat.deprecation import moved_names

__getattr__ = moved_names(__name__, {
    'LeanPathHooks': ('ikgat.nn.conv.kernel_attention', 'LeanPathSwitches'),
    'SKIPPED_STEPS': ('ikgat.nn.conv.kernel_attention', 'SKIPPED_STEPS')})
