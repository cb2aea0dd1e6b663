r"""The exact RBF kernel: GAT's own similarity."""
from typing import Optional

from torch import Tensor

from ikgat.kernels.anchor import scaled_anchor_dot
from ikgat.kernels.arguments import check_positive
from ikgat.kernels.base import PairFeatureMap
from ikgat.kernels.draws import Draws
from ikgat.kernels.pair_statistic import PairStatisticKernel


class RBFKernel(PairStatisticKernel):
    r"""The radial basis function kernel

    .. math::
        \mathrm{sim}(x, y) = \exp\left(-\frac{\|x - y\|^2}{2 l^2}\right).

    With :math:`l = 1` and :math:`p = 2` the factorisation
    :math:`\exp(c\,e_{ij}) = k(q_i, c a)\, k(c a, k_j)\,
    \exp(\|c a\|^2 + \tfrac12\|q_i\|^2 + \tfrac12\|k_j\|^2)` reproduces GAT
    exactly.  The layer evaluates it through :meth:`reduced_log_similarity`,
    :math:`(v^\top c a - \tfrac12\|c a\|^2)/l^2`, in which the squared
    norms of the nodes cancel algebraically, so the logits are GAT's
    :math:`c\,e_{ij}` (plus a parameter-only constant that cancels) at any
    input scale, not a difference of huge squared norms.

    Args:
        heads (int): Number of heads :math:`H`.
        channels (int): Channels per head :math:`C`.
        lengthscale (float, optional): :math:`l`. (default: :obj:`1.0`)

    Example:
        >>> import torch
        >>> from ikgat.kernels import RBFKernel
        >>> kernel = RBFKernel(heads=2, channels=4)
        >>> x = torch.zeros(3, 8)
        >>> kernel.similarity(x, x)
        tensor([1., 1., 1.])
        >>> y = torch.full((3, 8), 0.5)   # |x - y|^2 = 2
        >>> kernel.similarity(x, y)
        tensor([0.3679, 0.3679, 0.3679])
    """
    statistic = 'distance_sq'
    has_pair_feature_map = True

    def __init__(self, heads: int, channels: int, lengthscale: float = 1.0,
                 *, pairing: str = 'anchor'):
        super().__init__(heads, channels, pairing=pairing)
        self.lengthscale = check_positive(type(self).__name__, 'lengthscale',
                                           lengthscale)

    def log_similarity_of(self, distance_sq: Tensor) -> Tensor:
        return -distance_sq / (2 * self.lengthscale**2)

    def reduced_pair_log_similarity(self, query: Tensor,
                                    key: Tensor, *,
                                    draws: Optional[Draws] = None) -> Tensor:
        # -|q - k|^2 / 2l^2 = q^T k / l^2 - (|q|^2 + |k|^2) / 2l^2: the
        # dot-product logit itself.
        return (query * key).sum(-1) / self.lengthscale**2

    def pair_feature_map(self, query: Tensor, key: Tensor, *,
                         draws: Optional[Draws] = None) -> PairFeatureMap:
        # The reduced logit q^T k / l^2: the dot itself, identity link.
        return PairFeatureMap(query, key, 'identity', self.lengthscale**-2,
                              0.0)

    @property
    def node_norm_coefficient(self) -> float:
        return -0.5 / self.lengthscale**2

    def reduced_log_similarity(self, x: Tensor, anchor: Tensor,
                               is_source: bool, slopes: Tensor, *,
                               draws: Optional[Draws] = None) -> Tensor:
        # -|v - c a|^2 / 2l^2 = (v^T (c a) - |c a|^2 / 2) / l^2 - |v|^2 / 2l^2,
        # where |c a|^2 = c^2 |a|^2 over both halves of a; the last term is
        # the node_norm_coefficient's and is left out here:
        dot = scaled_anchor_dot(x, anchor, is_source, slopes)  # [N, H, T]
        anchor_sq = (anchor * anchor).sum(-1, keepdim=True) * slopes**2
        return (dot - 0.5 * anchor_sq) / self.lengthscale**2  # [H, T] bcast

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, lengthscale={self.lengthscale}'


class RBFOnlyKernel(RBFKernel):
    r"""The RBF similarity alone, without the magnitude term:
    :math:`\tilde\alpha_{ij} = k(q_i, c a)\, k(c a, k_j)`, with
    :math:`k(x, y) = \exp(-\|x - y\|^2 / (2 l^2))`."""
    uses_magnitude = False
