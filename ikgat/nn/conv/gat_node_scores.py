r"""The node-wise parts of :class:`~ikgat.IKGATConv`'s attention logits.

Every similarity term of the kernel form of GAT pairs a node with the
anchor :math:`c\,a`, and :math:`c` takes two values (:math:`1` and the
negative slope), so the terms are computed once per node, head and slope
and each edge only picks and adds them (the class docstring of
:class:`~ikgat.IKGATConv`).  :func:`~ikgat.nn.conv.decomposition.node_terms`
reports the same terms one formula at a time.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.typing import OptTensor

from ikgat.kernels.draws import Draws
from ikgat.kernels.rbf import RBFKernel
from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.dtypes import accumulation_dtype


class GATNodeScores:
    r"""Mixin of :class:`~ikgat.IKGATConv` (before its
    :class:`~ikgat.nn.conv.gat_base.GATConvBase`): the node scores that the
    edge softmax, the fused operator and the attention decomposition read,
    from GATConv's attention parameters, the kernel and the :math:`L^p`
    magnitude of the layer."""

    def _accumulation_inputs(self, x_src: Tensor, x_dst: OptTensor
                             ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""Source and target projections (a zero target row for
        :obj:`x_dst=None`), the anchors :math:`(H, 2C)` and the slopes
        :math:`c_t`, all in :func:`~ikgat.ops.dtypes.accumulation_dtype`
        (float32 for a float16 or bfloat16 model)."""
        H, C = self.heads, self.out_channels
        dtype = accumulation_dtype(x_src.dtype)
        anchor = torch.cat([self.att_dst, self.att_src],
                           dim=-1).view(H, 2 * C).to(dtype)
        # [1, negative_slope], made on the device: a host value written into
        # a device tensor (torch.tensor of a list, or slopes[0] = 1.0) is a
        # host-to-device copy, a synchronisation on CUDA.  One operation:
        # linspace computes its last point from the end (exactly the slope).
        slopes = torch.linspace(1.0, self.negative_slope, 2,
                                device=anchor.device, dtype=anchor.dtype)
        x_src = x_src.to(dtype)
        # A missing target projection is q_i = 0 for every target:
        q = x_src.new_zeros(1, H, C) if x_dst is None else x_dst.to(dtype)
        return x_src, q, anchor, slopes

    def _anchor_norm(self, anchor: Tensor, slopes: Tensor) -> Tensor:
        r""":math:`\|c_t a_h\|_p^2` of shape :math:`(H, T)`."""
        scaled_anchor = slopes.view(-1, 1, 1) * anchor  # [T, H, 2C]
        return lp_norm_squared(scaled_anchor, self.p).t()

    def _is_gat_function(self) -> bool:
        r"""Whether the layer's logit is GATConv's
        :math:`\mathrm{LeakyReLU}(a_s^\top x_j + a_d^\top x_i)` exactly in
        exact arithmetic: the RBF kernel of length-scale 1 with the
        :math:`L^2` magnitude, whose slope parts are :math:`c_t` times the
        gate plus constants that cancel over an edge (the comment in
        :meth:`_node_scores`)."""
        return (self.magnitude and self.p == 2.0
                and type(self.kernel) is RBFKernel
                and self.kernel.lengthscale == 1.0)

    def _gate_scores(self, x_src: Tensor, x_dst: OptTensor
                     ) -> Tuple[Tensor, Tensor]:
        r"""The gates alone, :math:`a_s^\top x_j` and :math:`a_d^\top q_i`
        as :math:`(N_s, H, 1)` and :math:`(N_t, H, 1)` (or :math:`(1, H,
        1)`): the scores of :func:`~ikgat.ops.edge_softmax.kernel_edge_softmax`
        in GATConv's form, for a layer of :meth:`_is_gat_function`."""
        x_src, q, anchor, _ = self._accumulation_inputs(x_src, x_dst)
        return self._gat_logits(x_src, q, anchor)

    def _gat_logits(self, x_src: Tensor, q: Tensor, anchor: Tensor
                    ) -> Tuple[Tensor, Tensor]:
        r"""GAT's logits :math:`a_s^\top x_j` and :math:`a_d^\top q_i` (the
        gates), :math:`(N_s, H, 1)` and :math:`(N_t, H, 1)`.  Off the CPU,
        where sources and targets share one projection, as one broadcast
        product :math:`(N, H, 2, C)` and one sum (launches fewer); on the CPU
        as GATConv computes them, one product and sum a side (bit for bit
        its values): the broadcast product took 2.4 times as long there,
        forward and backward (PubMed's 19,717 nodes, 8 heads x 8, one
        thread).  Each half of the anchors is made contiguous first (as
        GATConv's own vectors are): against the strided half, the product
        took 0.70 instead of 0.12 ms there."""
        C = self.out_channels
        if q is x_src and x_src.device.type != 'cpu':
            gat_logits = (x_src.unsqueeze(-2) * anchor.view(-1, 2, C)).sum(-1)
            gat_logit_dst, gat_logit_src = gat_logits.split(1, dim=-1)
            return gat_logit_src, gat_logit_dst
        return ((x_src * anchor[:, C:].contiguous()).sum(-1, keepdim=True),
                (q * anchor[:, :C].contiguous()).sum(-1, keepdim=True))

    def _node_scores(self, x_src: Tensor, x_dst: OptTensor,
                     draws: int = 1, kernel_draws: Optional[Draws] = None,
                     targets: Optional[int] = None
                     ) -> Tuple[Tensor, Tensor]:
        r"""Everything of the logit that depends on one endpoint, packed per
        node as [logit part for :math:`c = 1`, for :math:`c =`
        :obj:`negative_slope`, gate]: :math:`(N_s, H, 3)` and
        :math:`(N_t, H, 3)` (or :math:`(1, H, 3)` without target features),
        in :func:`~ikgat.ops.dtypes.accumulation_dtype`; with :obj:`draws`
        :math:`S > 1`, for the kernel's :math:`S` draws stacked along the
        heads (:math:`S H` heads, the projections and anchors repeated):
        those of :obj:`kernel_draws`, which a stochastic kernel takes as
        ``draws=``.  With :obj:`targets`, the kernel's target terms are
        computed for the first :obj:`targets` rows only (the rows that
        edges point to) and the other rows' are zero: no edge reads
        them."""
        x_src, q, anchor, slopes = self._accumulation_inputs(x_src, x_dst)
        if draws > 1:
            x_src, q = x_src.repeat(1, draws, 1), q.repeat(1, draws, 1)
            anchor = anchor.repeat(draws, 1)
        kernel = self.kernel
        # Targets: the kernel's gamma |q_i|^2 and the magnitude's ½‖q_i‖_p²
        # are the same for both slopes, hence constant over the softmax
        # group of i: they cancel and are left out.
        gamma = kernel.node_norm_coefficient
        # log sim(c a, k_j) + ½‖k_j‖² = r_j + (gamma + ½)‖k_j‖²: for the RBF
        # kernel of length-scale 1, gamma = -½ and the squared norms cancel
        # exactly, leaving c a_s^T x_j + ½‖c a‖² here and c a_d^T x_i -
        # ½‖c a‖² on the target side: the logit is GAT's c e_ij at any input
        # scale.
        reduced_source = self.magnitude and self.p == 2.0 and gamma != 0.0
        rows = q.size(0)
        q_terms = q if targets is None or targets >= rows else q[:targets]
        logit_dst, logit_src = kernel.node_log_similarities(
            q_terms, x_src, anchor, slopes, reduced_source,
            draws=kernel_draws)
        if logit_dst.size(0) < rows:
            logit_dst = torch.cat([
                logit_dst,
                logit_dst.new_zeros(rows - logit_dst.size(0),
                                    *logit_dst.shape[1:])
            ])
        if reduced_source:
            if gamma != -0.5:
                logit_src = logit_src + (
                    (gamma + 0.5) * (x_src * x_src).sum(-1)).unsqueeze(-1)
        elif self.magnitude:
            logit_src = logit_src + 0.5 * lp_norm_squared(
                x_src, self.p).unsqueeze(-1)
        if self.magnitude:
            logit_src = logit_src + self._anchor_norm(anchor, slopes)
        gat_logit_src, gat_logit_dst = self._gat_logits(x_src, q, anchor)
        return (torch.cat([logit_src, gat_logit_src], dim=-1),
                torch.cat([logit_dst, gat_logit_dst], dim=-1))
