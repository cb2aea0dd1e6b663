r"""What :meth:`ikgat.IKGATConv.attention_decomposition` reports: the
per-edge similarity, magnitude and edge terms of kernel attention, each
computed from its own formula (for inspection; the forward pass adds only
what does not cancel in the softmax)."""
from typing import NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.typing import Adj, OptPairTensor, OptTensor, Size
from torch_geometric.utils import softmax

from ikgat.kernels.draws import Draws
from ikgat.nn.conv.gat_base import adjacency_edges, without_autocast
from ikgat.nn.norms import lp_norm_squared
from ikgat.ops.edge_softmax import edge_logit


class AttentionDecomposition(NamedTuple):
    r"""Per-edge terms of kernel attention, all of shape :math:`(E, H)`
    except :obj:`edge_index`; :math:`\log\tilde\alpha_{ij} =`
    :obj:`log_similarity` + :obj:`log_magnitude` + :obj:`edge_term`."""
    edge_index: Tensor
    log_similarity: Tensor
    log_magnitude: Tensor
    edge_term: Tensor
    alpha: Tensor


class NodeTerms(NamedTuple):
    r"""Node-wise parts of the attention logits, for both LeakyReLU slopes
    :math:`c_t` (last dimension :math:`T = 2`)."""
    log_sim_src: Tensor  # [N_src, H, T]  log sim(c_t a, k_j)
    log_sim_dst: Tensor  # [N_dst, H, T]  log sim(q_i, c_t a)
    half_norm_src: Tensor  # [N_src, H]  ½‖k_j‖_p²
    half_norm_dst: Tensor  # [N_dst, H]  ½‖q_i‖_p²
    anchor_norm: Tensor  # [H, T]  ‖c_t a‖_p²
    gat_logit_src: Tensor  # [N_src, H]  a_src·x_j, GAT's logit part
    gat_logit_dst: Tensor  # [N_dst, H]  a_dst·x_i (their sum e_ij picks c)


@torch.no_grad()
def attention_decomposition(
    conv: torch.nn.Module,
    x: Union[Tensor, OptPairTensor],
    edge_index: Adj,
    edge_attr: OptTensor = None,
    size: Size = None,
    batch: Union[OptTensor, Tuple[Tensor, Tensor]] = None,
    batch_size: Optional[int] = None,
) -> AttentionDecomposition:
    r"""Return the per-edge similarity, magnitude and edge terms of the
    attention logits of the layer :obj:`conv`, and the attention weights
    without dropout; also the layer's method,
    ``conv.attention_decomposition(x, edge_index)``.

    Takes the same inputs as :meth:`~ikgat.IKGATConv.forward`; the edges
    are those the forward pass attends over (self-loops included).  The
    magnitude term includes :math:`\tfrac12\|q_i\|_p^2`, which cancels
    in the softmax.  The terms and weights are float32 for a float16 or
    bfloat16 model.
    """
    conv._check_inputs(x, edge_index, edge_attr, size, batch)
    x_src, x_dst, _, _ = conv._project(x)
    edge_index, edge_attr = conv._add_self_loops(edge_index, edge_attr,
                                                 x_src, x_dst, size)
    edge_index = adjacency_edges(edge_index)
    src, dst = edge_index[0], edge_index[1]
    dst_rows = dst if x_dst is not None else torch.zeros_like(dst)
    with without_autocast(x_src.device):
        draws = conv._prepare_kernel(x_src, x_dst, batch, sample=False,
                                     batch_size=batch_size)
        terms = node_terms(conv, x_src, x_dst, draws)
        score_src, score_dst = conv._node_scores(x_src, x_dst,
                                                 kernel_draws=draws)
        edge_gate = conv._edge_gate(edge_attr)
    if edge_gate is not None:
        edge_gate = edge_gate.to(terms.gat_logit_src.dtype)

    # The weights come from the forward pass's node scores (the same
    # logits up to terms that cancel in the softmax), not from the sum
    # of the reported terms, which loses digits when they are huge:
    logit, positive = edge_logit(score_src[src], score_dst[dst_rows],
                                 edge_gate, conv.negative_slope)
    slope_index = (~positive).long().unsqueeze(-1)  # t_ij

    def pick(values: Tensor) -> Tensor:  # [E, H, T] -> [E, H] at t_ij
        return values.gather(-1, slope_index).squeeze(-1)

    log_similarity = (pick(terms.log_sim_src[src]) +
                      pick(terms.log_sim_dst[dst_rows]))
    anchor_norm = terms.anchor_norm.unsqueeze(0).expand(
        src.numel(), -1, -1)
    log_magnitude = (pick(anchor_norm) + terms.half_norm_src[src] +
                     terms.half_norm_dst[dst_rows])
    edge_term = torch.zeros_like(log_similarity)
    if edge_gate is not None:
        edge_term = torch.where(positive, edge_gate,
                                conv.negative_slope * edge_gate)
    num_dst = size[1] if size is not None else (
        x_dst.size(0) if x_dst is not None else None)
    alpha = softmax(logit, dst, num_nodes=num_dst)
    return AttentionDecomposition(edge_index, log_similarity,
                                  log_magnitude, edge_term, alpha)


def node_terms(conv: torch.nn.Module, x_src: Tensor, x_dst: OptTensor,
               draws: Optional[Draws] = None) -> NodeTerms:
    r"""The reported terms of :func:`attention_decomposition`, each as
    its formula defines it (at the :obj:`draws` of a stochastic kernel)."""
    H = conv.heads
    x_src, q, anchor, slopes = conv._accumulation_inputs(x_src, x_dst)
    C = conv.out_channels
    log_sim_src = conv.kernel.log_similarity(x_src, anchor, True, slopes,
                                             draws=draws)
    log_sim_dst = conv.kernel.log_similarity(q, anchor, False, slopes,
                                             draws=draws)
    gat_logit_src = (x_src * anchor[:, C:]).sum(-1)
    gat_logit_dst = (q * anchor[:, :C]).sum(-1)
    if conv.magnitude:
        half_norm_src = 0.5 * lp_norm_squared(x_src, conv.p)
        half_norm_dst = 0.5 * lp_norm_squared(q, conv.p)
        anchor_norm = conv._anchor_norm(anchor, slopes)
    else:
        half_norm_src = gat_logit_src.new_zeros(gat_logit_src.shape)
        half_norm_dst = gat_logit_dst.new_zeros(gat_logit_dst.shape)
        anchor_norm = gat_logit_src.new_zeros(H, 2)
    return NodeTerms(log_sim_src, log_sim_dst, half_norm_src,
                     half_norm_dst, anchor_norm, gat_logit_src,
                     gat_logit_dst)

