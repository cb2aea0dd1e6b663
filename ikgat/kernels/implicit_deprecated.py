r"""The deprecated ways of setting :class:`~ikgat.kernels.ImplicitSpectralKernel`'s
draw state on the kernel (``prepare``, ``select_draw``, ``fixed_summary``),
kept for one release: the draws are an object the layer passes as
``draws=`` (:mod:`ikgat.kernels.draws`)."""
import warnings
from typing import Optional

import torch
from torch import Tensor


class DeprecatedDrawState:
    r"""Mixin of :class:`~ikgat.kernels.ImplicitSpectralKernel`: its
    deprecated draw-state methods (the kernel sets :obj:`_fixed_summary`
    and :obj:`last_draws`)."""
    _fixed_summary: Optional[Tensor]

    def prepare(self, x_src: Tensor, x_dst: Optional[Tensor],
                batch_src: Optional[Tensor], batch_dst: Optional[Tensor],
                num_graphs: int, sample: bool,
                generator: Optional[torch.Generator] = None,
                num_draws: int = 1) -> None:
        r"""Deprecated: :meth:`Kernel.prepare
        <ikgat.kernels.base.Kernel.prepare>`, which this kernel took with
        :obj:`generator` before :obj:`num_draws`."""
        self._deprecated_prepare(x_src, x_dst, batch_src, batch_dst,
                                 num_graphs, sample, num_draws,
                                 generator=generator)

    def select_draw(self, index: int) -> None:
        r"""Deprecated: make draw :obj:`index` of :attr:`last_draws` the one
        in use; pass ``draws=draws.select(index)`` instead
        (:meth:`Draws.select <ikgat.kernels.draws.Draws.select>`)."""
        warnings.warn(f'{type(self).__name__}.select_draw is deprecated; '
                      f'pass draws=draws.select(index) to the similarities',
                      DeprecationWarning, stacklevel=2)
        self.last_draws = self._given_draws(None).select(index)

    @property
    def fixed_summary(self) -> Optional[Tensor]:
        r"""The :math:`h_s` :math:`(1, H, 2C)` that :meth:`ImplicitSpectralKernel.draw
        <ikgat.kernels.ImplicitSpectralKernel.draw>` uses when
        given no :obj:`summary` (deprecated: pass it as :obj:`summary`, or
        use the layer's ``full_graph_summary``)."""
        warnings.warn(f'{type(self).__name__}.fixed_summary is deprecated; '
                      f'pass summary= to draw(), or use the layer\'s '
                      f'full_graph_summary', DeprecationWarning, stacklevel=2)
        return self._fixed_summary

    @fixed_summary.setter
    def fixed_summary(self, summary: Optional[Tensor]) -> None:
        warnings.warn(f'{type(self).__name__}.fixed_summary is deprecated; '
                      f'pass summary= to draw(), or use the layer\'s '
                      f'full_graph_summary', DeprecationWarning, stacklevel=2)
        self._fixed_summary = summary
