r"""The standard normal noise :math:`\epsilon` of the implicit density's
reparameterised sample :math:`\tilde z = \mu + \sigma \odot (L\epsilon)`
(:class:`~ikgat.kernels.ImplicitSpectralKernel`), drawn so that seeds mean
the same numbers however graphs are batched."""
from typing import Optional

import torch
from torch import Tensor


def latent_noise(num_graphs: int, num_draws: int, heads: int,
                 latent_dim: int, like: Tensor,
                 generator: Optional[torch.Generator] = None) -> Tensor:
    r"""Noise of shape :math:`(H, G, D)`, or :math:`(H, S, G, D)` for
    :obj:`num_draws` :math:`S > 1`, on the device and in the dtype of
    :obj:`like`.

    Drawn graph by graph and draw by draw, :math:`(G, [S,] H, D)`, so that a
    graph gets the same numbers from the same seed whatever graphs follow it
    (the first graph of a mini-batch gets the draws it gets alone), and
    :math:`S` draws at once the numbers of :math:`S` draws one after
    another; then laid out head-major, so that the copula's :math:`L
    \epsilon` over the heads is one matrix product.  PyTorch's CPU sampler
    fills blocks of 16 numbers (and fewer than 16 another way), so a
    graph's numbers are those it gets alone only if each graph's share is a
    whole number of blocks; otherwise each graph draws a padded row, cut
    back to its share."""
    draw_dims = () if num_draws == 1 else (num_draws, )
    shape = (num_graphs, *draw_dims, heads, latent_dim)
    share = num_draws * heads * latent_dim
    if share % 16 == 0:
        noise = torch.randn(*shape, generator=generator, device=like.device,
                            dtype=like.dtype)
    else:
        noise = torch.randn(num_graphs, share + 16 - share % 16,
                            generator=generator, device=like.device,
                            dtype=like.dtype)
        noise = noise[:, :share].reshape(shape)
    return noise.permute(2, 1, 0, 3) if draw_dims else noise.transpose(0, 1)
