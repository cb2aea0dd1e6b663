r"""The checks of the constructor arguments that kernels and layers share,
with errors that name the argument and the value, and the former name
``num_features`` of ``num_spectral_points``."""
import functools
import warnings

from ikgat.deprecation import renamed_argument


def check_positive(owner: str, name: str, value: float) -> float:
    """Return ``value`` as a float, or raise naming the option and value."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not value > 0 or value == float('inf')):
        raise ValueError(f"{owner}: '{name}' must be a positive finite number "
                         f"(got {value!r})")
    return float(value)


def check_num_spectral_points(owner: str, num_spectral_points: int) -> int:
    r"""Return :obj:`num_spectral_points` (:math:`R`), or raise naming it."""
    if (isinstance(num_spectral_points, bool)
            or not isinstance(num_spectral_points, int)
            or num_spectral_points < 1):
        raise ValueError(f"{owner}: 'num_spectral_points' (the number R of "
                         f"spectral points per head) must be a positive "
                         f"integer (got {num_spectral_points!r})")
    return num_spectral_points


#: :func:`~ikgat.deprecation.renamed_argument` of ``num_spectral_points``
#: (default :obj:`None`: the kernel's own :math:`R`) under its former name
#: ``num_features``, for the constructors that take both:
#: ``renamed_num_features(owner, old_value=num_features,
#: new_value=num_spectral_points)``.  A :func:`functools.partial` rather
#: than a function, because it adds no frame to the stack: the
#: :class:`DeprecationWarning` points at the line that called the
#: constructor, as when the constructor calls ``renamed_argument`` itself.
renamed_num_features = functools.partial(
    renamed_argument, old='num_features', new='num_spectral_points',
    new_default=None)


class DeprecatedNumFeatures:
    r"""Mixin: the attribute ``num_features``, the former name of
    ``num_spectral_points``, read with a :class:`DeprecationWarning`."""
    @property
    def num_features(self) -> int:
        warnings.warn(f"{type(self).__name__}.num_features is deprecated; "
                      f"read num_spectral_points", DeprecationWarning,
                      stacklevel=2)
        return self.num_spectral_points
