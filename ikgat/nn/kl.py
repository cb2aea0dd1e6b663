r"""Deprecated: :func:`kl_divergence` moved to :mod:`ikgat.nn.losses`."""
import warnings

from ikgat.nn.losses import kl_divergence, sum_outermost

warnings.warn("ikgat.nn.kl is deprecated and will be removed in the next "
              "release; import kl_divergence from ikgat.nn (or "
              "ikgat.nn.losses)", DeprecationWarning, stacklevel=2)

__all__ = ['kl_divergence', 'sum_outermost']
