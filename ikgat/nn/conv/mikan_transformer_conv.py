r"""MIKAN for graph transformers: IKTransformerConv with heads tied by a
copula."""
from typing import Any, Dict, Optional, Tuple, Union

from torch import Tensor

from ikgat.kernels import ImplicitSpectralKernel
from ikgat.nn.conv.gat_base import check_sizes
from ikgat.nn.conv.ik_transformer_conv import IKTransformerConv


class MIKANTransformerConv(IKTransformerConv):
    r"""Multi-head implicit kernel attention (MIKAN) for graph transformers;
    a drop-in replacement for :class:`torch_geometric.nn.conv.TransformerConv`
    as :class:`~ikgat.MIKANConv` is for GATConv.

    The attention of :class:`~ikgat.IKTransformerConv`,

    .. math::
        \log \tilde\alpha_{i,j} = \log\mathrm{sim}(\tilde q_i, \tilde k_{ij})
        + \tfrac12\|\tilde k_{ij}\|_p^2,

    with the non-stationary random-feature similarity
    :math:`\mathrm{sim}(q, k) = (\phi(q)^\top\phi(k)/4R)^2` whose spectral
    points (in :math:`\mathbb{R}^d`, query against key) are drawn per graph
    from an implicit density inferred from the graph's summary
    :math:`h_s = [\operatorname{mean}_i \tilde q_i \,\|\,
    \operatorname{mean}_j \tilde k_j]`, the heads' draws tied by a learned
    Gaussian copula:

    .. math::
        \tilde z = \mu(h_s) + \sigma(h_s) \odot (L \epsilon), \quad
        z = [\tilde z \,\|\, -\tilde z], \quad
        w = \operatorname{sign}(z)\, g_\psi(|z|)

    (see :class:`~ikgat.kernels.ImplicitSpectralKernel` with
    ``copula=True``).  Add :meth:`kl_divergence` (or
    :func:`ikgat.nn.kl_divergence` of the model) to the loss.

    ``in_channels``, ``out_channels``, ``heads``, ``concat``, ``beta``,
    ``dropout``, ``edge_dim``, ``bias`` and ``root_weight`` are those of
    :class:`~ikgat.IKTransformerConv` (TransformerConv's).

    Args:
        num_spectral_points (int, optional): :math:`R`, even.
            (default: :obj:`64`)
        p (float, optional): The :math:`p` of the magnitude's norms.
            (default: :obj:`2.0`)
        prior_scale (float, optional): :math:`\sigma_p`.
            (default: :obj:`0.1 ** 0.5`)
        num_samples (int, optional): Draws averaged in evaluation (:obj:`1`:
            the density's mean). (default: :obj:`1`)
        hidden_channels (int, optional): Width of the inference network.
            (default: :obj:`64`)
        magnitude (bool, optional): Multiply by the magnitude term.
            (default: :obj:`True`)
        kernel_kwargs (dict, optional): Further options of
            :class:`~ikgat.kernels.ImplicitSpectralKernel`.
    """
    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        beta: bool = False,
        dropout: float = 0.,
        edge_dim: Optional[int] = None,
        bias: bool = True,
        root_weight: bool = True,
        *,
        num_spectral_points: int = 64,
        p: float = 2.0,
        prior_scale: float = 0.1**0.5,
        num_samples: int = 1,
        hidden_channels: int = 64,
        magnitude: bool = True,
        kernel_kwargs: Optional[Dict[str, Any]] = None,
        **kwargs,
    ):
        name = type(self).__name__
        check_sizes(name, in_channels, out_channels, heads, edge_dim)
        fixed = sorted({'copula', 'pairing'} & set(kernel_kwargs or {}))
        if fixed:
            raise ValueError(f"{name}: 'kernel_kwargs' cannot set {fixed}: "
                             f"MIKAN's kernel pairs query and key with a "
                             f"copula across heads; for the implicit kernel "
                             f"without it use IKTransformerConv(..., "
                             f"kernel='implicit')")
        try:
            kernel = ImplicitSpectralKernel(
                heads, out_channels, num_spectral_points=num_spectral_points,
                hidden_channels=hidden_channels, prior_scale=prior_scale,
                num_samples=num_samples, copula=True, pairing='vectors',
                **(kernel_kwargs or {}))
        except (TypeError, ValueError) as error:
            raise type(error)(f'{name}: {error}') from None
        super().__init__(in_channels, out_channels, heads, concat, beta,
                         dropout, edge_dim, bias, root_weight, kernel=kernel,
                         num_spectral_points=num_spectral_points, p=p,
                         magnitude=magnitude, **kwargs)

    def copula_correlation(self) -> Tensor:
        r"""The learned correlation matrix across heads, :math:`LL^\top`,
        of shape :math:`(H, H)`."""
        return self.kernel.correlation()
