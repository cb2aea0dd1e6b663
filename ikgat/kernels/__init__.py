r"""Similarity kernels for kernel attention, selectable by name."""
from typing import Any, Dict, List, Optional, Union

from ikgat.kernels.base import PAIRINGS, Kernel
from ikgat.kernels.direct import DirectSpectralKernel
from ikgat.kernels.draws import Draws
from ikgat.kernels.exp import ExpKernel
from ikgat.kernels.expsin import ExpSinKernel
from ikgat.kernels.implicit import ImplicitSpectralKernel
from ikgat.kernels.linear import LinearKernel
from ikgat.kernels.poly import PolynomialKernel
from ikgat.kernels.rbf import RBFKernel, RBFOnlyKernel
from ikgat.kernels.rff import RandomFourierKernel
from ikgat.kernels.rff_ns import NonStationaryRandomFourierKernel

#: The kernels by name: ``IKGATConv(kernel='rff')`` builds
#: ``KERNELS['rff'](heads, channels, **kernel_kwargs)``
#: (:func:`resolve_kernel`). The documentation's kernel table is made from it.
KERNELS = {
    'rbf': RBFKernel,
    'rbf_only': RBFOnlyKernel,
    'rff': RandomFourierKernel,
    'rff_ns': NonStationaryRandomFourierKernel,
    'direct': DirectSpectralKernel,
    'implicit': ImplicitSpectralKernel,
    'expsin': ExpSinKernel,
    'linear': LinearKernel,
    'poly': PolynomialKernel,
    'exp': ExpKernel,
}


def resolve_kernel(kernel: Union[str, Kernel], heads: int, channels: int,
                   num_spectral_points: Optional[int] = None,
                   kernel_kwargs: Optional[Dict[str, Any]] = None,
                   pairing: str = 'anchor') -> Kernel:
    r"""Return the kernel named :obj:`kernel` built for :obj:`heads` heads of
    :obj:`channels` channels and the :obj:`pairing` (one of
    :data:`~ikgat.kernels.base.PAIRINGS`; kernels that declare
    :attr:`~Kernel.has_spectral_points` also get :obj:`num_spectral_points`
    unless :obj:`kernel_kwargs` sets it or it is :obj:`None`, which leaves
    them their :attr:`~Kernel.default_num_spectral_points`), or check and return a given
    :class:`Kernel`.  For ``pairing='vectors'`` only the kernels that
    declare :attr:`~Kernel.pairs_vectors` (:func:`vector_kernels`) apply.

    Example:
        >>> from ikgat.kernels import resolve_kernel
        >>> resolve_kernel('rbf', heads=8, channels=8, num_spectral_points=64)
        RBFKernel(heads=8, channels=8, lengthscale=1.0)
        >>> kernel = resolve_kernel('direct', 8, 8, 64)
        >>> kernel.num_spectral_points, kernel.has_spectral_points
        (64, True)
        >>> resolve_kernel('gauss', 8, 8, 64)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
          ...
        ValueError: Unknown kernel 'gauss'; choose one of ['direct', ...]...
    """
    if isinstance(kernel, Kernel):
        if kernel_kwargs:
            raise ValueError("'kernel_kwargs' only applies to a kernel given "
                             "by name; configure the kernel instance instead "
                             f"(got kernel_kwargs={kernel_kwargs!r})")
        if kernel.pairing != pairing:
            raise ValueError(
                f"The kernel instance was built for pairing="
                f"{kernel.pairing!r}, but the layer needs pairing="
                f"{pairing!r}; build it with "
                f"{type(kernel).__name__}(..., pairing={pairing!r})")
        if (kernel.heads, kernel.channels) != (heads, channels):
            raise ValueError(
                f"The kernel instance was built for heads={kernel.heads}, "
                f"channels={kernel.channels}, but the layer has "
                f"heads={heads}, out_channels={channels}; build the kernel "
                f"with matching sizes")
        return kernel
    if not isinstance(kernel, str):
        raise TypeError(f"'kernel' must be a name or a Kernel instance "
                        f"(got {type(kernel).__name__})")
    if kernel not in KERNELS:
        raise ValueError(f"Unknown kernel {kernel!r}; choose one of "
                         f"{sorted(KERNELS)} or pass a Kernel instance")
    kernel_class = KERNELS[kernel]
    if pairing not in PAIRINGS:
        raise ValueError(f"Unknown pairing {pairing!r}; choose one of "
                         f"{list(PAIRINGS)}")
    kwargs = dict(kernel_kwargs or {})
    if pairing != 'anchor':
        if not kernel_class.pairs_vectors:
            raise ValueError(f"The kernel {kernel!r} does not pair two "
                             f"vectors; choose one of {vector_kernels()}")
        kwargs['pairing'] = pairing
    if (kernel_class.has_spectral_points and 'num_features' not in kwargs
            and num_spectral_points is not None):
        kwargs.setdefault('num_spectral_points', num_spectral_points)
    try:
        return kernel_class(heads, channels, **kwargs)
    except TypeError as error:
        raise TypeError(f"Invalid kernel_kwargs {kernel_kwargs!r} for kernel "
                        f"{kernel!r}: {error}") from None


def vector_kernels() -> List[str]:
    r"""The names of the kernels that pair two vectors (query against key,
    :class:`ikgat.IKTransformerConv`), sorted."""
    return sorted(name for name, kernel_class in KERNELS.items()
                  if kernel_class.pairs_vectors)


def random_feature_kernels() -> List[str]:
    r"""The names of the random-feature kernels (spectral points), whose
    log-similarity :math:`\log(f^2 + \epsilon)` has the floor ``eps``
    (:data:`~ikgat.kernels.random_features.DEFAULT_EPS`), sorted."""
    return sorted(name for name, kernel_class in KERNELS.items()
                  if kernel_class.has_spectral_points)


__all__ = [
    'Kernel',
    'RBFKernel',
    'RBFOnlyKernel',
    'RandomFourierKernel',
    'NonStationaryRandomFourierKernel',
    'DirectSpectralKernel',
    'ImplicitSpectralKernel',
    'ExpSinKernel',
    'LinearKernel',
    'PolynomialKernel',
    'ExpKernel',
    'Draws',
    'KERNELS',
    'resolve_kernel',
    'vector_kernels',
    'random_feature_kernels',
]
