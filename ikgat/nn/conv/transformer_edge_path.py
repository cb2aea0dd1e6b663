r"""The attention of :class:`~ikgat.IKTransformerConv` off PyG's message
passing, the parts that do not depend on the kernel's draws: the terms the
logit adds on the key side (per edge on the edge path, per node for the
fused kernels) and the aggregation of the values in edge chunks."""
import torch
from torch import Tensor
from torch_geometric.typing import OptTensor
from torch_geometric.utils import scatter

from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.aggregation import attention_aggregate


class TransformerEdgePath:
    r"""Mixin of :class:`~ikgat.IKTransformerConv`: the key-side terms of
    the logit (from the layer's kernel, :math:`p` and magnitude switch)
    and the edge-chunked aggregation."""

    def _source_terms(self, key: Tensor, edge_key: OptTensor,
                      src: Tensor) -> OptTensor:
        r"""What the logit adds on the key side, :math:`(E, H)` or
        :obj:`None`: the magnitude :math:`\tfrac12\|\tilde k\|_p^2` and the
        kernel's :math:`\gamma\|\tilde k\|_2^2` that
        :meth:`~ikgat.kernels.Kernel.reduced_pair_log_similarity` leaves
        out (for the RBF kernel with :math:`l = 1` and :math:`p = 2` the
        two cancel exactly).  The query's terms are constant over a
        softmax group and are left out."""
        if edge_key is not None:  # per edge, as the keys are
            return self._key_terms(key.index_select(0, src) + edge_key)
        terms = self._key_terms(key)
        return None if terms is None else terms.index_select(0, src)

    def _key_terms(self, keys: Tensor) -> OptTensor:
        r"""The source terms of :meth:`_source_terms` of keys
        :math:`(*, H, C)`, :math:`(*, H)`, or :obj:`None` where none
        remain."""
        gamma = self.kernel.node_norm_coefficient
        squared = 0.0
        if self.magnitude and self.p == 2.0:
            squared = gamma + 0.5
        elif gamma != 0.0:
            squared = gamma
        lp = self.magnitude and self.p != 2.0
        if squared == 0.0 and not lp:
            return None
        terms: OptTensor = None
        if squared != 0.0:
            terms = squared * (keys * keys).sum(-1)
        if lp:
            norm = 0.5 * lp_norm_squared(keys, self.p)
            terms = norm if terms is None else terms + norm
        return terms

    def _aggregate(self, alpha: Tensor, value: Tensor, edge_key: OptTensor,
                   src: Tensor, dst: Tensor, ptr: OptTensor,
                   num_dst: int) -> Tensor:
        r""":math:`\sum_j \alpha_{ij}(v_j + e_{ij})`, :math:`(N_t, H, C)`:
        the values in edge chunks that keep only :math:`\alpha` for
        backward (a plain scatter under :func:`torch.compile`)."""
        if torch.compiler.is_compiling():
            message = value.index_select(0, src)
            if edge_key is not None:
                message = message + edge_key
            return scatter(alpha.unsqueeze(-1) * message, dst, 0, num_dst,
                           reduce='sum')
        out = attention_aggregate(alpha, value, torch.stack([src, dst]),
                                  num_dst)
        if edge_key is not None:
            out = out + scatter(alpha.unsqueeze(-1) * edge_key, dst, 0,
                                num_dst, reduce='sum')
        return out
