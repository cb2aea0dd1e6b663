r"""The variational part of :class:`~ikgat.KEPGATConv`: the KSVD singular
values :math:`\Lambda`, the posteriors :math:`q(u_d) = \mathcal{N}(m_d,
L_d L_d^\top)` of the two branches' sparse variational GPs, their KL
divergence to the prior, the KSVD loss of the last forward pass, and the
noise of the samples (the formulas: the class docstring of
:class:`~ikgat.KEPGATConv`)."""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn import Parameter

from ikgat.nn.svgp_sample import scale_tril
from ikgat.ops.dtypes import accumulation_dtype


class KEPPosterior:
    r"""Mixin of :class:`~ikgat.KEPGATConv` (before its
    :class:`~ikgat.nn.conv.gat_base.GATConvBase`): the parameters of rank
    :math:`s = C` per head (:obj:`log_singular_values`,
    :obj:`inducing_mean`, :obj:`inducing_scale_offdiag`,
    :obj:`inducing_log_scale_diag`), and what is read from them."""

    def _init_posterior(self, num_samples: int, init_scale: float) -> None:
        r"""Check and set :obj:`num_samples` and :obj:`init_scale`, and
        create the parameters for the layer's heads and channels (reset
        by :meth:`reset_parameters`)."""
        name = type(self).__name__
        self.num_samples = num_samples  # validated by the property setter
        if isinstance(init_scale, bool) or not isinstance(
                init_scale, (int, float)) or not 0.0 < init_scale < math.inf:
            raise ValueError(f"{name}: 'init_scale' must be a positive "
                             f"number (got {init_scale!r})")

        self.rank = self.out_channels  # s: the dual vectors are the values
        self.init_scale = float(init_scale)

        # KSVD: log singular values; the SVGP pair, branch 0 = e, 1 = r.
        s, C, H = self.rank, self.out_channels, self.heads
        self.log_singular_values = Parameter(torch.empty(H, s))
        self.inducing_mean = Parameter(torch.empty(2, H, s, C))
        self.inducing_scale_offdiag = Parameter(torch.empty(2, H, C, s, s))
        self.inducing_log_scale_diag = Parameter(torch.empty(2, H, C, s))

        self._ksvd_loss: Optional[Tensor] = None

    @property
    def num_samples(self) -> int:
        r"""Monte-Carlo draws averaged in evaluation; :obj:`0` gives the
        posterior mean."""
        return self._num_samples

    @num_samples.setter
    def num_samples(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{type(self).__name__}: 'num_samples' must be a "
                             f"non-negative integer, 0 for the posterior "
                             f"mean (got {value!r})")
        self._num_samples = value

    def reset_parameters(self):
        super().reset_parameters()
        with torch.no_grad():
            self.log_singular_values.zero_()  # Lambda = I
            # m = Lambda: the mean read-out b^T Lambda^-1 m starts as b.
            self.inducing_mean.copy_(torch.eye(self.rank).expand_as(
                self.inducing_mean))
            self.inducing_scale_offdiag.zero_()
            # L_d = init_scale * Lambda:
            self.inducing_log_scale_diag.copy_(
                math.log(self.init_scale) +
                self.log_singular_values.view(1, self.heads, 1, self.rank))
        self._ksvd_loss = None

    def __getstate__(self):
        # The last forward's KSVD loss is part of an autograd graph: copies
        # and pickles of the module start without it (ksvd_loss() is zero
        # until their first forward pass).
        state = super().__getstate__()
        state['_ksvd_loss'] = None
        return state

    @property
    def singular_values(self) -> Tensor:
        r"""The singular values :math:`\Lambda`, shape :math:`(H, s)`."""
        return self.log_singular_values.exp()

    def inducing_scale_tril(self) -> Tensor:
        r"""The Cholesky factors :math:`L_d` of the posterior covariances
        :math:`S_d = L_d L_d^\top`, shape :math:`(2, H, C, s, s)` (branch
        :math:`e` first)."""
        return scale_tril(self.inducing_scale_offdiag,
                          self.inducing_log_scale_diag)

    def kl_divergence(self) -> Tensor:
        r"""The KL divergence :math:`\sum_{b,h,d}\mathrm{KL}(q(u_d) \,\|\,
        \mathcal{N}(0, \Lambda^2))` of both branches, summed over heads and
        channels.  It depends on the parameters only, so it is the same
        for every forward pass (and available before any).  It accumulates
        in at least float32 (a sum over :math:`2HCs^2` terms)."""
        s = self.rank
        dtype = accumulation_dtype(self.log_singular_values.dtype)
        log_singular_values = self.log_singular_values.to(dtype)
        inv = (-log_singular_values).exp()  # [H, s]
        scale = self.inducing_scale_tril().to(dtype)  # [2, H, C, s, s]
        trace = (inv.view(1, self.heads, 1, s, 1) * scale).square().sum()
        mahalanobis = (inv.view(1, self.heads, s, 1) *
                       self.inducing_mean.to(dtype)).square().sum()
        count = 2 * self.heads * self.out_channels
        # log|Lambda^2| for each of the 2 * C GPs of a head:
        log_det_prior = 2 * self.out_channels * 2 * (
            log_singular_values.sum())
        log_det_posterior = 2 * self.inducing_log_scale_diag.to(dtype).sum()
        return 0.5 * (trace + mahalanobis - count * s + log_det_prior -
                      log_det_posterior)

    def ksvd_loss(self) -> Tensor:
        r"""The KSVD loss :math:`\sum_h (J_h / N_t)^2` of the last forward
        pass (a zero scalar before the first one).  It carries the graph of
        that pass, so call the forward pass first in each training step."""
        if self._ksvd_loss is None:
            return self.log_singular_values.new_zeros(())
        return self._ksvd_loss

    def _noise(self, num_dst: int, num_src: int, like: Tensor,
               generator: Optional[torch.Generator]
               ) -> Optional[Tuple[Tensor, Tensor]]:
        r"""The noise :math:`\varepsilon / \sqrt{S}` of both branches for
        the average of :math:`S` draws (one in training; :obj:`None` for the
        posterior mean): one standard normal per node, head and channel.
        The average of :math:`S` draws of the output, which is linear in
        the noise, has exactly that distribution.

        The noise is drawn node by node, both branches of node :math:`n`
        side by side (:math:`(N, 2, H, C)`), so that node :math:`n` gets
        the same numbers from the same seed whatever follows it: the first
        graph of a mini-batch gets the draws it gets alone."""
        draws = 1 if self.training else self.num_samples
        if draws == 0:
            return None
        num_nodes = max(num_dst, num_src)
        noise = torch.randn(num_nodes, 2, self.heads, self.out_channels,
                            generator=generator, dtype=like.dtype,
                            device=like.device)
        if draws > 1:
            noise = noise.mul_(1.0 / math.sqrt(draws))
        noise_e, noise_r = noise.unbind(1)
        if num_dst < num_nodes:  # bipartite: fewer targets than sources
            noise_e = noise_e[:num_dst]
        if num_src < num_nodes:
            noise_r = noise_r[:num_src]
        return noise_e, noise_r
