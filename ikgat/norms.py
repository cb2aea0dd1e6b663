r"""Deprecated: the :math:`L^p` norms moved to :mod:`ikgat.nn.norms`."""
import warnings

from ikgat.nn.norms import LOG_MAX, MAX, SMALL, lp_norm_squared

warnings.warn("ikgat.norms is deprecated and will be removed in the next "
              "release; import from ikgat.nn.norms", DeprecationWarning,
              stacklevel=2)

__all__ = ['LOG_MAX', 'MAX', 'SMALL', 'lp_norm_squared']
