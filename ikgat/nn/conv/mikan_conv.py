from typing import Any, Dict, Optional, Tuple, Union

from torch import Tensor

from ikgat.kernels import ImplicitSpectralKernel
from ikgat.kernels.arguments import renamed_num_features
from ikgat.nn.conv.docstrings import shared_docstring
from ikgat.nn.conv.gat_base import check_sizes
from ikgat.nn.conv.ikgat_conv import IKGATConv


@shared_docstring
class MIKANConv(IKGATConv):
    r"""Multi-head implicit kernel attention (MIKAN) from the `"Implicit
    Kernel Attention" <https://arxiv.org/abs/2006.06147>`_ paper; a drop-in
    replacement for :class:`torch_geometric.nn.conv.GATConv`.

    The attention of :class:`~ikgat.IKGATConv`,

    .. math::
        \log \tilde\alpha_{i,j} = \log \mathrm{sim}(q_i, c_{ij} a)
        + \log \mathrm{sim}(c_{ij} a, k_j)
        + \|c_{ij} a\|_p^2 + \tfrac12\|q_i\|_p^2 + \tfrac12\|k_j\|_p^2,

    with the non-stationary random-feature similarity
    :math:`\mathrm{sim}(x, y) = (\phi(x)^\top\phi(y)/4R)^2` whose spectral
    points come from an implicit density inferred per graph (see
    :class:`~ikgat.kernels.ImplicitSpectralKernel`):

    .. math::
        \tilde z = \mu(h_s) + \sigma(h_s) \odot (L \epsilon), \quad
        z = [\tilde z \,\|\, -\tilde z], \quad
        w = \operatorname{sign}(z)\, g_\psi(|z|),

    where :math:`\epsilon \sim \mathcal{N}(0, I)` and the Cholesky factor
    :math:`L` of a learned correlation matrix ties the heads' latent
    variables through a Gaussian copula.  Train with
    ``nll + beta * ikgat.nn.kl_divergence(model)``; :meth:`kl_divergence`
    is the analytic KL of the last forward pass to
    :math:`\mathcal{N}(0, \sigma_p^2 I)`.  Evaluation is deterministic
    (:math:`\tilde z = \mu`) unless :obj:`num_samples > 1`, which averages
    the attention weights (and so the output) over that many draws.

    **Batches of graphs.**  The summary :math:`h_s` is taken over the
    whole input: pass ``batch=data.batch, batch_size=data.num_graphs``
    (or supply them with :func:`ikgat.nn.graph_batch` to a container that
    does not pass them, such as PyG's ``GPSConv``), else a graph's outputs
    depend on the other graphs of its mini-batch (measured in the guide's
    "Batches of graphs" section).

    Args:
        {gatconv_arguments}
        num_spectral_points (int, optional): Spectral points per head
            :math:`R`, even (formerly ``num_features``, still accepted for
            one release with a :class:`DeprecationWarning`).
            (default: :obj:`64`)
        p (float, optional): The :math:`p > 0` of the :math:`L^p`
            magnitude. (default: :obj:`2.0`)
        prior_scale (float, optional): :math:`\sigma_p`, the prior's
            standard deviation (variance 0.1 by default, as the authors).
            (default: :obj:`0.1 ** 0.5`)
        num_samples (int, optional): Monte-Carlo draws averaged in
            evaluation. (default: :obj:`1`)
        hidden_channels (int, optional): Width of the inference network.
            (default: :obj:`64`)
        magnitude (bool, optional): Keep the magnitude term.
            (default: :obj:`True`)
        kernel_kwargs (dict, optional): More arguments of
            :class:`~ikgat.kernels.ImplicitSpectralKernel` (``lengthscale``,
            ``eps``). (default: :obj:`None`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    {gatconv_shapes}
    """
    def __init__(
        self,
        in_channels: Union[int, Tuple[int, int]],
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: Optional[int] = None,
        fill_value: Union[float, Tensor, str] = 'mean',
        bias: bool = True,
        residual: bool = False,
        *,
        num_spectral_points: int = 64,
        p: float = 2.0,
        prior_scale: float = 0.1**0.5,
        num_samples: int = 1,
        hidden_channels: int = 64,
        magnitude: bool = True,
        kernel_kwargs: Optional[Dict[str, Any]] = None,
        num_features: Optional[int] = None,
        **kwargs,
    ):
        check_sizes(type(self).__name__, in_channels, out_channels, heads,
                    edge_dim)
        num_spectral_points = renamed_num_features(
            type(self).__name__, old_value=num_features,
            new_value=num_spectral_points, new_default=64)
        kernel = ImplicitSpectralKernel(
            heads, out_channels, num_spectral_points=num_spectral_points,
            hidden_channels=hidden_channels, prior_scale=prior_scale,
            num_samples=num_samples, copula=True, **(kernel_kwargs or {}))
        super().__init__(in_channels, out_channels, heads, concat,
                         negative_slope, dropout, add_self_loops, edge_dim,
                         fill_value, bias, residual, kernel=kernel,
                         num_spectral_points=num_spectral_points, p=p,
                         magnitude=magnitude,
                         **kwargs)

    def copula_correlation(self) -> Tensor:
        r"""The learned correlation matrix across heads,
        :math:`LL^\top`, of shape :math:`(H, H)`."""
        return self.kernel.correlation()
