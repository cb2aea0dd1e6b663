r"""IKA's non-stationary random-feature kernel (fixed spectral samples)."""
from ikgat.kernels.docstrings import shared_docstring
from ikgat.kernels.rff import RandomFourierKernel


@shared_docstring
class NonStationaryRandomFourierKernel(RandomFourierKernel):
    r"""The non-stationary random-feature kernel of Implicit Kernel Attention

    .. math::
        \mathrm{sim}(x, y) = f(x, y)^2, \qquad
        f(x, y) = \frac{\phi(x)^\top \phi(y)}{4R}, \qquad
        \phi_r(x) = \begin{bmatrix} \cos w_{1,r}^\top x + \cos w_{2,r}^\top x
        \\ \sin w_{1,r}^\top x + \sin w_{2,r}^\top x \end{bmatrix},

    with two fixed sets of spectral points
    :math:`w_{1,r}, w_{2,r} \sim \mathcal{N}(0, I/(2l^2))`.  Expanding,
    :math:`4R f = \sum_r \sum_{s, s'} \cos(w_{s,r}^\top x - w_{s',r}^\top y)`:
    the cross terms :math:`s \ne s'` make the kernel depend on :math:`x` and
    :math:`y`, not only on :math:`x - y`.  Spectral points are buffers named
    ``spectral_points_1`` and ``spectral_points_2``.

    Args:
        {random_fourier_arguments}
    """
    num_sets = 2
