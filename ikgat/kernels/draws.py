r"""The spectral points a stochastic kernel draws for one forward pass.

A kernel whose spectral points depend on the graph
(:attr:`~ikgat.kernels.base.Kernel.stochastic`, the implicit kernels)
draws them with :meth:`~ikgat.kernels.base.Kernel.draw`, which returns a
:class:`Draws`.  The layer holds it for the step and passes it as
``draws=`` to the similarity entry points of its pairing; the kernel keeps
no state between those calls, so two forward passes, two graphs or two
layers sharing one kernel cannot see each other's points.  The
deterministic kernels draw nothing (:meth:`~ikgat.kernels.base.Kernel.draw`
returns :obj:`None`) and ignore ``draws``.

Example:
    >>> import torch
    >>> from ikgat.kernels import ImplicitSpectralKernel
    >>> kernel = ImplicitSpectralKernel(heads=2, channels=3,
    ...                                 num_spectral_points=4)
    >>> nodes = torch.randn(5, 2, 3)
    >>> draws = kernel.draw(nodes, nodes, num_draws=3, sample=True)
    >>> draws.num_draws, tuple(draws.points.shape)  # (G, S H, sets, R/2, D)
    (3, (1, 6, 2, 2, 6))
    >>> second = draws.select(1)  # a new object; draws is unchanged
    >>> tuple(second.points.shape), draws.num_draws
    ((1, 2, 2, 2, 6), 3)
    >>> [tuple(w.shape) for w in second.spectral_points()]  # both halves
    [(1, 2, 4, 6), (1, 2, 4, 6)]
"""
from typing import List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor


class Draws(NamedTuple):
    r"""The spectral points of one forward pass of a stochastic kernel, per
    graph and draw, with what they were drawn from.  Immutable: selecting a
    draw (:meth:`select`) returns a new object."""
    #: The points in use, :math:`(G, H', \text{sets}, R, D)` (:math:`R/2`
    #: for a :attr:`mirrored` sample): every draw
    #: stacked along the heads (:math:`H' = S H`, draw after draw), or one
    #: draw (:math:`H' = H`) after :meth:`select`.
    points: Tensor
    #: Every draw, :math:`(G, S H, \text{sets}, R, D)`, whichever draw
    #: :meth:`select` picked (the pair feature map takes them all).
    stacked: Tensor
    #: The graph index of the target and of the source nodes (or
    #: :obj:`None` for one graph), with which the points were drawn.
    batches: Tuple[Optional[Tensor], Optional[Tensor]]
    #: The density's mean and :math:`\log\sigma` per graph, head and latent
    #: coordinate, :math:`(G, H, L)`: the KL term of the pass.
    mean: Tensor
    log_std: Tensor
    #: The graph summary :math:`h_s` the density was inferred from,
    #: :math:`(G, H, 2C)` (or the full graph's, :math:`(1, H, 2C)`).
    summary: Tensor
    #: The kernel's number of heads :math:`H`.
    heads: int
    #: Whether the sample is symmetric, :math:`[w \,\|\, -w]` along the
    #: points, in which case :attr:`points` and :attr:`stacked` hold its
    #: distinct half :math:`w` (:math:`R/2` points): a pair :math:`\pm w`
    #: adds the same term twice to every random-feature estimate, so the
    #: estimate over the half with its own normaliser is the estimate over
    #: all :math:`R` (:class:`~ikgat.kernels.ImplicitSpectralKernel`).
    mirrored: bool = False

    @property
    def num_draws(self) -> int:
        r"""The number :math:`S` of draws held in :attr:`stacked`."""
        return self.stacked.size(1) // self.heads

    @property
    def num_graphs(self) -> int:
        r"""The number :math:`G` of graphs drawn for."""
        return self.stacked.size(0)

    def select(self, index: int) -> 'Draws':
        r"""These draws with draw :obj:`index` alone in use (:math:`H`
        heads), for a layer that evaluates the draws one after another."""
        if not 0 <= index < self.num_draws:
            raise IndexError(f'draw {index} out of range: there are '
                             f'{self.num_draws} draws')
        heads = self.heads
        return self._replace(
            points=self.stacked[:, index * heads:(index + 1) * heads])

    def spectral_points(self) -> List[Tensor]:
        r"""The point sets of the draw in use (the first if every draw is),
        each :math:`(G, H, R, D)`, both halves of a :attr:`mirrored`
        sample."""
        sets = self.distinct_sets()
        if self.mirrored:
            sets = [torch.cat([points, -points], dim=-2) for points in sets]
        return sets

    def distinct_sets(self) -> List[Tensor]:
        r"""The point sets that an estimate needs, each :math:`(G, H, R',
        D)`: those of :meth:`spectral_points`, or their distinct half
        (:math:`R' = R/2`) for a :attr:`mirrored` sample."""
        return list(self.points[:, :self.heads].unbind(dim=2))


__all__ = ['Draws']
