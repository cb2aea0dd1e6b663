r"""IKAN-direct: the non-stationary feature map with learned spectral points."""
from ikgat.kernels.rff_ns import NonStationaryRandomFourierKernel


class DirectSpectralKernel(NonStationaryRandomFourierKernel):
    r"""IKAN-direct: the non-stationary random-feature kernel whose spectral
    points are learned parameters

    .. math::
        \mathrm{sim}(x, y) = \left(\frac{\phi(x)^\top \phi(y)}{4R}\right)^2,
        \qquad
        \phi_r(x) = \begin{bmatrix} \cos w_{1,r}^\top x + \cos w_{2,r}^\top x
        \\ \sin w_{1,r}^\top x + \sin w_{2,r}^\top x \end{bmatrix},

    where :math:`w_{1,r}, w_{2,r} \in \mathbb{R}^{2C}` are trained with the
    rest of the model (parameters ``spectral_points_1`` and
    ``spectral_points_2``).  They start from :math:`\mathcal{N}(0, I/(2l^2))`,
    the spectral density of the RBF kernel of GAT's decomposition.

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        num_spectral_points (int, optional): :math:`R`, the spectral points
            per head (formerly ``num_features``). (default: :obj:`64`)
        lengthscale (float, optional): :math:`l` of the initial density.
            (default: :obj:`1.0`)
        eps (float, optional): :math:`\epsilon` in
            :math:`\log(f^2 + \epsilon)`. (default: :obj:`1e-5`)
        node_path (str, optional): How the node-wise term is evaluated, one
            of :obj:`~ikgat.kernels.random_features.NODE_PATHS`.
            (default: :obj:`"eager"`)
    """
    learnable = True
