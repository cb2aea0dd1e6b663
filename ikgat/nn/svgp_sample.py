r"""The sample of :class:`~ikgat.KEPGATConv`'s sparse variational GP pair in
one autograd function with a hand-written backward pass.

For each branch :math:`b \in \{e, r\}` (targets and sources), head
:math:`h`, node :math:`n` and output channel :math:`d`, with the branch's
scores :math:`v = b(x_n)^\top \Lambda_h^{-1}` of length :math:`s`,

.. math::
    F_{b,d}(x_n) = v^\top m_{b,h,d} + \sigma\, \big\|L_{b,h,d}^\top v\big\|
    \, \varepsilon_{n,h,d}, \qquad
    L_{b,h,d} = \operatorname{tril}(O_{b,h,d}, -1)
    + \operatorname{diag}\big(e^{\ell_{b,h,d}}\big),

a draw of :math:`\mathcal{N}(v^\top m_d, \|L_d^\top v\|^2)` scaled by
:math:`\sigma` (:math:`1/\sqrt{S}` for the average of :math:`S` draws), or
the mean alone without noise.  Both terms are one product per branch: the
weights :math:`W_{b,h} = \Lambda_h^{-1}[M_{b,h} \,|\, \tilde L_{b,h}]` of
shape :math:`(s, C + Cs)`, with :math:`\tilde L_{b,h}[a, (d, c)] =
L_{b,h,d}[a, c]`, give :math:`y = b(x_n)^\top W_{b,h}`, whose first
:math:`C` columns are the means and whose remaining :math:`Cs` are the
spreads :math:`u_d = L_d^\top v`.

**Backward.**  With :math:`G = \partial\mathcal{L}/\partial F`,
:math:`\partial\mathcal{L}/\partial u_d = \sigma G_d \varepsilon_d\,
u_d / \|u_d\|` (zero where :math:`u_d = 0`), so :math:`\partial
\mathcal{L}/\partial y = [G \,|\, \partial\mathcal{L}/\partial u]` and

.. math::
    \frac{\partial\mathcal{L}}{\partial b(x_n)} = W\,
    \frac{\partial\mathcal{L}}{\partial y_n}, \qquad
    \frac{\partial\mathcal{L}}{\partial W} = \sum_n b(x_n)
    \frac{\partial\mathcal{L}}{\partial y_n}^\top,

from which :math:`\partial\mathcal{L}/\partial[M | \tilde L] = \Lambda^{-1}
\odot \partial\mathcal{L}/\partial W`, :math:`\partial\mathcal{L}/\partial
\log\lambda_a = -\lambda_a^{-1} \sum_{b,k} [M | \tilde L]_{b,a,k}\,
(\partial\mathcal{L}/\partial W)_{b,a,k}`, the strict lower triangle of
:math:`\partial\mathcal{L}/\partial L` for :math:`O` and its diagonal
times :math:`e^{\ell}` for :math:`\ell`.  The spreads (:math:`N H C s`
numbers) are not saved: the backward pass computes them again, one product
per branch.  By autograd, the two branches' einsums and norms and their
backward passes are many small operations per step, each a kernel launch on
a GPU; here each branch is one product, one norm and one multiply-add
forward, and three products backward.  The backward pass is itself
differentiable (it computes the weights again from the parameters when a
double backward records it).

On CPU both passes walk the nodes in chunks of about
:data:`CHUNK_ELEMENTS` numbers of :math:`y`, so that the products' outputs,
the spreads and their gradients stay in cache instead of going out to
memory as :math:`N H (C + Cs)` numbers: at PubMed's size (19,717 nodes, 8
heads, :math:`C = s = 8`, one thread) both branches' forward and backward
pass took 0.34-0.38 s whole and 0.26 s in chunks of :math:`2^{18}`, the
forward pass alone 95-98 against 63-70 ms (two runs; chunks of
:math:`2^{16}` and :math:`2^{19}` were slower).  On other devices the
nodes go in one chunk, so that a step's kernel launches do not grow with
the graph.

On CPU in float32 (where the machine builds them) each branch's sample and
its backward pass run the C kernels of
:mod:`ikgat.ops.svgp_sample_native` instead, which keep a block of nodes'
:math:`y` in registers (both branches' forward and backward pass at
PubMed's size, as above: 42 ms against the chunks' 0.26 s): an epoch of
the GAT recipe with KEPGATConv took
1.57 instead of 1.91 times GATConv's on PubMed and 1.27 instead of 1.46 on
Cora (one thread, one process, interleaved).  A double backward takes the
chunks.
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

import ikgat.ops.svgp_sample_native as svgp_sample_native

#: Numbers of :math:`y = b(x_n)^\top W` (:math:`N H (C + Cs)` in all) in one
#: node chunk on CPU (float32: 1 MiB).
CHUNK_ELEMENTS = 1 << 18


def _node_chunks(scores: Tensor, width: int) -> List[Optional[slice]]:
    r"""The node ranges of the chunks of :obj:`scores` :math:`(N, H, s)`
    for outputs :math:`(H, n, \text{width})`, or ``[None]`` for all nodes
    in one chunk (always off the CPU: the operations are then those of one
    pass, with no slices and no concatenation)."""
    num_nodes, heads = scores.size(0), scores.size(1)
    size = max(1, CHUNK_ELEMENTS // max(1, heads * width))
    if scores.device.type != 'cpu' or num_nodes <= size:
        return [None]
    return [slice(start, min(start + size, num_nodes))
            for start in range(0, num_nodes, size)]


def _rows(tensor: Tensor, rows: Optional[slice]) -> Tensor:
    return tensor if rows is None else tensor[rows]


def svgp_pair_sample(
    scores: Tuple[Tensor, Tensor],
    log_singular_values: Tensor,
    inducing_mean: Tensor,
    inducing_scale_offdiag: Tensor,
    inducing_log_scale_diag: Tensor,
    noise: Optional[Tuple[Tensor, Tensor]] = None,
) -> Tuple[Tensor, Tensor]:
    r"""The samples :math:`(F_e, F_r)` of shapes :math:`(N_t, H, C)` and
    :math:`(N_s, H, C)` (see the module docstring).

    Args:
        scores ((torch.Tensor, torch.Tensor)): :math:`b(x)` of each branch,
            :math:`(N_t, H, s)` and :math:`(N_s, H, s)`, before
            :math:`\Lambda^{-1}`.
        log_singular_values (torch.Tensor): :math:`\log\Lambda`,
            :math:`(H, s)`.
        inducing_mean (torch.Tensor): :math:`m`, :math:`(2, H, s, C)`.
        inducing_scale_offdiag (torch.Tensor): :math:`O`,
            :math:`(2, H, C, s, s)`; its strict lower triangle counts.
        inducing_log_scale_diag (torch.Tensor): :math:`\ell`,
            :math:`(2, H, C, s)`.
        noise ((torch.Tensor, torch.Tensor), optional): :math:`\sigma
            \varepsilon` of each branch, shaped as the samples; the
            posterior means without it. (default: :obj:`None`)
    """
    if noise is None:
        return _SVGPMean.apply(*scores, log_singular_values, inducing_mean)
    return _SVGPSample.apply(*scores, log_singular_values, inducing_mean,
                             inducing_scale_offdiag, inducing_log_scale_diag,
                             *noise)


def scale_tril(inducing_scale_offdiag: Tensor,
               inducing_log_scale_diag: Tensor) -> Tensor:
    r""":math:`L = \operatorname{tril}(O, -1) + \operatorname{diag}(
    e^{\ell})`, shape :math:`(\dots, s, s)`."""
    lower = torch.tril(inducing_scale_offdiag, diagonal=-1)
    lower.diagonal(dim1=-2, dim2=-1).copy_(inducing_log_scale_diag.exp())
    return lower


def _weights(log_singular_values: Tensor, inducing_mean: Tensor,
             inducing_scale_offdiag: Optional[Tensor] = None,
             inducing_log_scale_diag: Optional[Tensor] = None
             ) -> Tuple[Tensor, Tensor, Tensor]:
    r""":math:`\Lambda^{-1}` :math:`(H, s, 1)`, the read-outs :math:`[M |
    \tilde L]` :math:`(2, H, s, K)` and :math:`W = \Lambda^{-1}[M |
    \tilde L]`, with :math:`K = C` for the means alone, :math:`C + Cs`
    with the spreads."""
    inverse = (-log_singular_values).exp().unsqueeze(-1)
    read_out = inducing_mean
    if inducing_scale_offdiag is not None:
        lower = scale_tril(inducing_scale_offdiag, inducing_log_scale_diag)
        # L[b, h, d, a, c] -> [b, h, a, (d, c)]:
        spread = lower.transpose(2, 3).flatten(-2)
        read_out = torch.cat([inducing_mean, spread], dim=-1)
    return inverse, read_out, inverse * read_out


def _read_out_gradients(grad_weights: Tensor, inverse: Tensor,
                        read_out: Tensor) -> Tuple[Tensor, Tensor]:
    r"""The gradients of :math:`\log\Lambda` and of :math:`[M | \tilde L]`
    from that of :math:`W = \Lambda^{-1}[M | \tilde L]`."""
    grad_inverse = (grad_weights * read_out).sum((0, -1))  # [H, s]
    return (grad_inverse * inverse.squeeze(-1)).neg(), grad_weights * inverse


class _SVGPMean(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores_e: Tensor, scores_r: Tensor,
                log_singular_values: Tensor, inducing_mean: Tensor):
        inverse, read_out, weights = _weights(log_singular_values,
                                              inducing_mean)
        ctx.save_for_backward(scores_e, scores_r, log_singular_values,
                              inducing_mean, inverse, read_out, weights)
        return tuple(
            torch.bmm(scores.transpose(0, 1), weights[branch]).transpose(0, 1)
            for branch, scores in enumerate((scores_e, scores_r)))

    @staticmethod
    def backward(ctx, grad_e: Tensor, grad_r: Tensor):
        (scores_e, scores_r, log_singular_values, inducing_mean, inverse,
         read_out, weights) = ctx.saved_tensors
        if torch.is_grad_enabled():  # a double backward: follow every term
            inverse, read_out, weights = _weights(log_singular_values,
                                                  inducing_mean)
        grad_scores, grad_weights = _branch_gradients(
            (scores_e, scores_r), (grad_e, grad_r), weights,
            lambda branch, scores, grad, rows: grad)
        grad_log, grad_read_out = _read_out_gradients(grad_weights, inverse,
                                                      read_out)
        return (*grad_scores, grad_log, grad_read_out)


class _SVGPSample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores_e: Tensor, scores_r: Tensor,
                log_singular_values: Tensor, inducing_mean: Tensor,
                inducing_scale_offdiag: Tensor,
                inducing_log_scale_diag: Tensor, noise_e: Tensor,
                noise_r: Tensor):
        inverse, read_out, weights = _weights(
            log_singular_values, inducing_mean, inducing_scale_offdiag,
            inducing_log_scale_diag)
        ctx.save_for_backward(scores_e, scores_r, log_singular_values,
                              inducing_mean, inducing_scale_offdiag,
                              inducing_log_scale_diag, noise_e, noise_r,
                              inverse, read_out, weights)
        channels, width = inducing_mean.size(-1), weights.size(-1)
        samples = []
        for branch, (scores, noise) in enumerate(
                ((scores_e, noise_e), (scores_r, noise_r))):
            if svgp_sample_native.applies(scores, channels):
                samples.append(svgp_sample_native.sample(
                    scores, weights[branch], noise))
                continue
            sample: Optional[Tensor] = None
            for rows in _node_chunks(scores, width):
                both = torch.bmm(_rows(scores, rows).transpose(0, 1),
                                 weights[branch])
                mean, spread = both.split([channels, width - channels],
                                          dim=-1)
                std = torch.linalg.vector_norm(
                    spread.unflatten(-1, (channels, -1)), dim=-1)
                part = torch.addcmul(mean, std,
                                     _rows(noise, rows).transpose(0, 1)
                                     ).transpose(0, 1)
                if rows is None:
                    sample = part
                    continue
                # Each chunk's sample written into its rows (no
                # concatenation of the chunks):
                if sample is None:
                    sample = part.new_empty(scores.size(0), scores.size(1),
                                            channels)
                sample[rows] = part
            samples.append(sample)
        return tuple(samples)

    @staticmethod
    def backward(ctx, grad_e: Tensor, grad_r: Tensor):
        (scores_e, scores_r, log_singular_values, inducing_mean,
         inducing_scale_offdiag, inducing_log_scale_diag, noise_e, noise_r,
         inverse, read_out, weights) = ctx.saved_tensors
        if torch.is_grad_enabled():  # a double backward: follow every term
            inverse, read_out, weights = _weights(
                log_singular_values, inducing_mean, inducing_scale_offdiag,
                inducing_log_scale_diag)
        channels = inducing_mean.size(-1)
        noises = (noise_e, noise_r)
        if (not torch.is_grad_enabled() and all(
                svgp_sample_native.applies(scores, channels)
                for scores in (scores_e, scores_r))):
            grad_scores, grad_weights = zip(*(
                svgp_sample_native.sample_backward(grad, scores,
                                                   weights[branch], noise)
                for branch, (grad, scores, noise) in enumerate(
                    ((grad_e, scores_e, noise_e),
                     (grad_r, scores_r, noise_r)))))
            grad_weights = torch.stack(grad_weights)
        else:
            grad_scores, grad_weights = _branch_gradients(
                (scores_e, scores_r), (grad_e, grad_r), weights,
                _spread_gradient(weights, noises, channels))
        grad_log, grad_read_out = _read_out_gradients(grad_weights, inverse,
                                                      read_out)
        grad_mean, grad_spread = grad_read_out.split(
            [channels, grad_read_out.size(-1) - channels], dim=-1)
        # [b, h, a, (d, c)] -> [b, h, d, a, c]:
        grad_lower = grad_spread.unflatten(-1, (channels, -1)).transpose(2, 3)
        grad_offdiag = grad_lower.tril(-1)
        grad_log_diag = grad_lower.diagonal(dim1=-2, dim2=-1) * (
            inducing_log_scale_diag.exp())
        return (*grad_scores, grad_log, grad_mean, grad_offdiag,
                grad_log_diag, None, None)


def _spread_gradient(weights: Tensor, noises: Tuple[Tensor, Tensor],
                     channels: int):
    r"""The :obj:`grad_both` of :func:`_branch_gradients` for the sample:
    :math:`\partial\mathcal{L}/\partial y = [G \,|\, G \varepsilon u /
    \|u\|]` of a node chunk, its spreads :math:`u` computed again."""
    def grad_both(branch: int, scores: Tensor, grad: Tensor,
                  rows: slice) -> Tensor:
        spread = torch.bmm(scores, weights[branch, :, :, channels:]
                           ).unflatten(-1, (channels, -1))
        std = torch.linalg.vector_norm(spread, dim=-1, keepdim=True)
        tiny = torch.finfo(std.dtype).tiny
        noise = _rows(noises[branch], rows).transpose(0, 1)
        # G eps / |u| first: one pass over the spreads, not two:
        scale = grad.mul(noise).unsqueeze(-1) / std.clamp(min=tiny)
        return torch.cat([grad, (spread * scale).flatten(-2)], dim=-1)

    return grad_both


def _branch_gradients(scores: Tuple[Tensor, Tensor],
                      grads: Tuple[Tensor, Tensor], weights: Tensor,
                      grad_both) -> Tuple[Tuple[Tensor, Tensor], Tensor]:
    r"""Per branch and node chunk, :math:`\partial\mathcal{L}/\partial y`
    from :obj:`grad_both`, then the gradients of the scores and of
    :math:`W` (stacked over the branches)."""
    grad_scores, grad_weights = [], []
    for branch, (score, grad) in enumerate(zip(scores, grads)):
        parts, grad_weight = [], None
        for rows in _node_chunks(score, weights.size(-1)):
            chunk = _rows(score, rows).transpose(0, 1)  # [H, n, s]
            grad_y = grad_both(branch, chunk,
                               _rows(grad, rows).transpose(0, 1), rows)
            parts.append(torch.bmm(grad_y, weights[branch].transpose(1, 2)
                                   ).transpose(0, 1))
            grad_weight = (
                torch.bmm(chunk.transpose(1, 2), grad_y) if grad_weight is None
                else grad_weight.baddbmm(chunk.transpose(1, 2), grad_y))
        grad_scores.append(parts[0] if len(parts) == 1 else torch.cat(parts))
        grad_weights.append(grad_weight)
    return tuple(grad_scores), torch.stack(grad_weights)
