r"""The kernels whose log-similarity is a function of one number of the
pair, its squared distance or its dot product: their shared entry
points."""
from typing import Optional

from torch import Tensor

from ikgat.kernels.anchor import scaled_anchor_distance_sq, scaled_anchor_dot
from ikgat.kernels.base import Kernel
from ikgat.kernels.draws import Draws


class PairStatisticKernel(Kernel):
    r"""Base of the kernels whose log-similarity is a function :math:`g` of
    one number of the pair: the squared distance (:attr:`statistic`
    ``'distance_sq'``, the stationary kernels) or the dot product
    (``'dot'``),

    .. math::
        \log\mathrm{sim}(x, y) = g(\|x - y\|^2) \quad\text{or}\quad
        \log\mathrm{sim}(x, y) = g(x^\top y).

    A subclass sets :attr:`statistic` and defines :math:`g` as
    :meth:`log_similarity_of`; the entry points evaluate the statistic in
    both pairings, row by row (:meth:`similarity`,
    :meth:`pair_log_similarity`) and node-wise against the scaled anchors
    (:meth:`log_similarity`, through
    :func:`~ikgat.kernels.anchor.scaled_anchor_distance_sq` or
    :func:`~ikgat.kernels.anchor.scaled_anchor_dot`).
    """
    pairs_vectors = True
    #: The number of the pair :math:`g` takes: ``'distance_sq'``,
    #: :math:`\|x - y\|^2`, or ``'dot'``, :math:`x^\top y`.
    statistic: str

    def log_similarity_of(self, statistic: Tensor) -> Tensor:
        r""":math:`g`, element-wise: the log-similarity of the pairs whose
        :attr:`statistic` is :obj:`statistic`."""
        raise NotImplementedError

    def similarity(self, x: Tensor, y: Tensor, *,
                   draws: Optional[Draws] = None) -> Tensor:
        return self.log_similarity_of(self._pair_statistic(x, y)).exp()

    def pair_log_similarity(self, query: Tensor, key: Tensor, *,
                            draws: Optional[Draws] = None) -> Tensor:
        return self.log_similarity_of(self._pair_statistic(query, key))

    def log_similarity(self, x: Tensor, anchor: Tensor, is_source: bool,
                       slopes: Tensor, *,
                       draws: Optional[Draws] = None) -> Tensor:
        anchor_statistic = (scaled_anchor_dot if self.statistic == 'dot'
                            else scaled_anchor_distance_sq)
        return self.log_similarity_of(
            anchor_statistic(x, anchor, is_source, slopes))

    def _pair_statistic(self, x: Tensor, y: Tensor) -> Tensor:
        if self.statistic == 'dot':
            return (x * y).sum(-1)
        diff = x - y
        return (diff * diff).sum(-1)
