r"""The edge-wise reference of kernel attention, written from the formula.

:func:`edge_wise_attention` evaluates the attention of
:class:`~ikgat.IKGATConv` (and :class:`~ikgat.MIKANConv`) edge by edge, on
full :math:`2C` vectors, with the kernel's reference
:meth:`~ikgat.kernels.Kernel.similarity` and nothing of the layers' node-wise
factorisation, edge softmax or aggregation:

.. math::
    \log \tilde\alpha_{i,j} = \log \mathrm{sim}(q_i, c_{ij} a)
    + \log \mathrm{sim}(c_{ij} a, k_j)
    + \|c_{ij} a\|_p^2 + \tfrac12\|q_i\|_p^2 + \tfrac12\|k_j\|_p^2
    + c_{ij}\, \mathbf{a}_e^{\top}\mathbf{\Theta}_e \mathbf{e}_{i,j},

with :math:`q_i = [\mathbf{\Theta}_t x_i \| 0]`,
:math:`k_j = [0 \| \mathbf{\Theta}_s x_j]`, :math:`a = [a_t \| a_s]` and
:math:`c_{ij} = 1` if :math:`a^\top(q_i + k_j) + a_e^\top\Theta_e e_{ij} > 0`,
else the negative slope; softmax over the incoming edges of :math:`i`, then
:math:`\mathrm{out}_i = \sum_j \alpha_{ij} \mathbf{\Theta}_s x_j`.

It forms :math:`E \times H \times 2C` tensors (and :math:`E \times H \times R`
ones inside the random-feature kernels' similarity): it is the independent
check that the tests and ``benchmarks/`` share, not a fast path.
"""
from typing import Tuple, Union

import torch
from torch import Tensor
from torch_geometric.typing import OptPairTensor, OptTensor
from torch_geometric.utils import scatter


def _lp_norm_squared(v: Tensor, p: float) -> Tensor:
    # ‖v‖_p² over the last dimension, from the definition:
    return (v.abs()**p).sum(-1)**(2 / p)


def edge_wise_attention(conv, x: Union[Tensor, OptPairTensor],
                        edge_index: Tensor,
                        edge_attr: OptTensor = None) -> Tuple[Tensor, Tensor]:
    r"""Return the output :math:`(N_t, H C)` (or :math:`(N_t, C)` without
    :obj:`concat`) and the attention weights :math:`(E, H)` of the kernel
    attention layer :obj:`conv`, evaluated edge by edge from the formula in
    the module docstring (no dropout; :obj:`conv`'s parameters are read, not
    changed).

    Args:
        conv (IKGATConv): The layer whose weights, kernel, :math:`p`,
            magnitude switch and negative slope are used.  A stochastic
            kernel is evaluated at its last draw (one graph).
        x (torch.Tensor or (torch.Tensor, torch.Tensor)): Node features, or
            source and target features of a bipartite graph.
        edge_index (torch.Tensor): Edge indices :math:`(2, E)`, which must
            already hold the self-loops the layer adds.
        edge_attr (torch.Tensor, optional): Edge features :math:`(E, D)`.
            (default: :obj:`None`)
    """
    H, C = conv.heads, conv.out_channels
    x_src, x_dst = (x, x) if torch.is_tensor(x) else x
    lin_src = conv.lin if conv.lin is not None else conv.lin_src
    lin_dst = conv.lin if conv.lin is not None else conv.lin_dst
    k_nodes = lin_src(x_src).view(-1, H, C)
    q_nodes = lin_dst(x_dst).view(-1, H, C)
    src, dst = edge_index
    zeros = torch.zeros(src.numel(), H, C, dtype=k_nodes.dtype,
                        device=k_nodes.device)
    q = torch.cat([q_nodes[dst], zeros], -1)  # [E, H, 2C]  [q_i ‖ 0]
    k = torch.cat([zeros, k_nodes[src]], -1)  # [E, H, 2C]  [0 ‖ k_j]
    a = torch.cat([conv.att_dst, conv.att_src], -1)  # [1, H, 2C]
    e = (a * (q + k)).sum(-1)  # GAT's e_ij
    edge_term = torch.zeros_like(e)
    if edge_attr is not None:
        w_e = conv.lin_edge(edge_attr.view(src.numel(), -1)).view(-1, H, C)
        edge_term = (w_e * conv.att_edge).sum(-1)
        e = e + edge_term
    c = torch.where(e > 0, 1.0, conv.negative_slope).unsqueeze(-1)
    ca = c * a  # the anchor c_ij a of each edge
    kernel = conv.kernel
    # log(sim + eps): the kernels that clamp the logarithm declare eps.
    logit = ((kernel.similarity(q, ca) + kernel.eps).log() +
             (kernel.similarity(ca, k) + kernel.eps).log() +
             c[..., 0] * edge_term)
    if conv.magnitude:
        logit = logit + (_lp_norm_squared(ca, conv.p) +
                         _lp_norm_squared(q, conv.p) / 2 +
                         _lp_norm_squared(k, conv.p) / 2)
    num_dst = q_nodes.size(0)
    logit = logit - scatter(logit, dst, 0, dim_size=num_dst,
                            reduce='max')[dst]
    weight = logit.exp()
    alpha = weight / scatter(weight, dst, 0, dim_size=num_dst)[dst]
    out = scatter(alpha.unsqueeze(-1) * k_nodes[src], dst, 0,
                  dim_size=num_dst)
    out = out.reshape(-1, H * C) if conv.concat else out.mean(1)
    return (out + conv.bias if conv.bias is not None else out), alpha


__all__ = ['edge_wise_attention']
