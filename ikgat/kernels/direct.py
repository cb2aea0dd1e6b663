r"""IKAN-direct: the non-stationary feature map with learned spectral points."""
from ikgat.kernels.docstrings import shared_docstring
from ikgat.kernels.rff_ns import NonStationaryRandomFourierKernel


@shared_docstring
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
        {random_fourier_arguments}
    """
    learnable = True
    #: :math:`R = 16`, within noise of 64 on 20 seeds of Cora and CiteSeer
    #: and 10 of PubMed, paired with the Planetoid table's runs
    #: (``benchmarks/results/planetoid_r16.md``), at about 0.6 times the
    #: cost of an epoch on PubMed (``docs/benchmarks/epoch_speed.md``).
    default_num_spectral_points = 16
