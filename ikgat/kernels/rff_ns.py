r"""IKA's non-stationary random-feature kernel (fixed spectral samples)."""
from ikgat.kernels.rff import RandomFourierKernel


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
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        num_spectral_points (int, optional): :math:`R`, the spectral points
            per head (formerly ``num_features``). (default: :obj:`64`)
        lengthscale (float, optional): :math:`l`. (default: :obj:`1.0`)
        eps (float, optional): :math:`\epsilon` in
            :math:`\log(f^2 + \epsilon)`. (default: :obj:`1e-5`)
        node_path (str, optional): How the node-wise term is evaluated, one
            of :obj:`~ikgat.kernels.random_features.NODE_PATHS`.
            (default: :obj:`"eager"`)
    """
    num_sets = 2
