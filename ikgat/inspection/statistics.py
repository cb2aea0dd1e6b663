r"""What kernel attention computed and learned, as tensors and numbers
(no matplotlib): the inputs and statistics behind the figures of
:mod:`ikgat.inspection.figures`.

* :func:`spectral_tsne_inputs` — a layer's spectral points and reference
  samples of GAT's implicit spectral density (IKA, Fig. 5a/b).
* :func:`head_attention_std` — the attention weights' standard deviation
  across heads, per edge (Fig. 5d).
* :func:`sparsity_statistics` — how concentrated the attention is (Fig. 4).

The layers and their attention are captured by
:mod:`ikgat.inspection.capture`, the terms over training by
:mod:`ikgat.inspection.terms`.
"""
import math
from typing import Any, NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor

from ikgat.inspection.capture import (
    COPULA_LAYERS,
    LayerSelector,
    attention_layers,
)
from ikgat.nn.conv.ikgat_conv import AttentionDecomposition

__all__ = [
    'SpectralTSNEInputs',
    'SparsityStatistics',
    'spectral_tsne_inputs',
    'sparsity_statistics',
    'head_attention_std',
]

# --------------------------------------------------------------------------
# Spectral points (Fig. 5a/b)
# --------------------------------------------------------------------------


class SpectralTSNEInputs(NamedTuple):
    r"""The points that :func:`plot_spectral_tsne` embeds.

    Attributes:
        points: :math:`(M, D)` (:math:`D = 2C` for the GAT form,
            :math:`C` for the transformer form, the kernel's
            :attr:`~ikgat.kernels.Kernel.dimension`); first the learned
            spectral points, head by
            head (within a head, set by set), then the reference samples.
        head: :math:`(M,)`, the head of each point, :obj:`-1` for the
            reference samples.
        point_set: :math:`(M,)`, the spectral point set (:math:`w_1, w_2`)
            of each point, :obj:`-1` for the reference samples.
        lengthscale: :math:`l` of the reference density
            :math:`\mathcal{N}(0, I/(2l^2))`.
        layer: The name of the layer the points come from.
    """
    points: Tensor
    head: Tensor
    point_set: Tensor
    lengthscale: float
    layer: str


def spectral_layer(model: torch.nn.Module,
                    layer: LayerSelector) -> Tuple[str, Any]:
    candidates = attention_layers(model, layer)
    for name, module in candidates:
        if module.kernel.has_spectral_points:
            return name, module
    kinds = sorted({type(module.kernel).__name__ for _, module in candidates})
    raise ValueError(f'No layer with spectral points (kernels: {kinds}); '
                     f"use a random-feature kernel ('rff', 'rff_ns', "
                     f"'direct', 'implicit') or MIKANConv or "
                     f"MIKANTransformerConv")


@torch.no_grad()
def spectral_tsne_inputs(model: torch.nn.Module, layer: LayerSelector = None,
                         x: Any = None, edge_index: Any = None,
                         graph: int = 0,
                         num_reference: Optional[int] = None,
                         generator: Optional[torch.Generator] = None
                         ) -> SpectralTSNEInputs:
    r"""Collect a layer's spectral points and reference samples of GAT's
    implicit Gaussian spectral density :math:`\mathcal{N}(0, I/(2l^2))`.

    Args:
        model: A model or a layer with a random-feature kernel.
        layer: Which layer (see :func:`attention_layers`); by default the
            first one that has spectral points.
        x, edge_index: If given, :obj:`model` runs once on them in
            evaluation mode first.  Needed for the variational kernels
            (IKAN, MIKAN), whose spectral points are those of the last
            forward pass (their mean, :math:`\tilde z = \mu`, in
            evaluation).
        graph: For a mini-batch of graphs, whose graph's points.
            (default: :obj:`0`)
        num_reference: Reference samples; by default as many as one head
            has spectral points.
        generator: The random generator of the reference samples (default:
            seeded with 0, so figures are reproducible).
    """
    name, module = spectral_layer(model, layer)
    if x is not None or edge_index is not None:
        if x is None or edge_index is None:
            raise ValueError("Give both 'x' and 'edge_index' (or neither)")
        was_training = model.training
        model.eval()
        try:
            model(x, edge_index)
        finally:
            model.train(was_training)
    try:
        sets = module.spectral_points()  # each [G, H, R, D]
    except RuntimeError as error:
        raise RuntimeError(
            f'{error}. The {type(module).__name__} draws its spectral points '
            f'from the graph: pass x= and edge_index= (or run the model once '
            f'in evaluation mode) before plotting') from None
    if not 0 <= graph < sets[0].size(0):
        raise ValueError(f"'graph' must lie in [0, {sets[0].size(0)}) "
                         f"(got {graph})")
    heads = sets[0].size(1)
    learned, head_ids, set_ids = [], [], []
    for h in range(heads):
        for s, points in enumerate(sets):
            block = points[graph, h].detach().cpu()  # [R, D]
            learned.append(block)
            head_ids.append(torch.full((block.size(0), ), h))
            set_ids.append(torch.full((block.size(0), ), s))
    learned_points = torch.cat(learned)
    # Kernels with spectral points declare their length-scale l:
    lengthscale = float(module.kernel.lengthscale)
    if num_reference is None:
        num_reference = len(sets) * sets[0].size(2)
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    reference = torch.randn(num_reference, learned_points.size(1),
                            generator=generator, dtype=learned_points.dtype)
    reference = reference / (math.sqrt(2.0) * lengthscale)
    points = torch.cat([learned_points, reference])
    head = torch.cat(head_ids + [torch.full((num_reference, ), -1)])
    point_set = torch.cat(set_ids + [torch.full((num_reference, ), -1)])
    return SpectralTSNEInputs(points, head.long(), point_set.long(),
                              lengthscale, name)


# --------------------------------------------------------------------------
# Copula correlation and head diversity (Fig. 5c/d)
# --------------------------------------------------------------------------


def copula_layer(model: torch.nn.Module, layer: LayerSelector) -> Tuple[
        str, Any]:
    for name, module in attention_layers(model, layer):
        if isinstance(module, COPULA_LAYERS):
            return name, module
    raise ValueError(f'{type(model).__name__} has no MIKANConv or '
                     f'MIKANTransformerConv layer: only MIKAN learns a copula '
                     f'correlation across heads')


def head_attention_std(alpha: Tensor) -> Tensor:
    r"""The standard deviation of each edge's attention weight across
    heads (population std, :math:`\sqrt{\frac1H\sum_h(\alpha_{ij,h} -
    \bar\alpha_{ij})^2}`), shape :math:`(E,)`, for weights of shape
    :math:`(E, H)`."""
    if alpha.dim() != 2:
        raise ValueError(f'Attention weights must have shape [E, H] (got '
                         f'{list(alpha.shape)})')
    return alpha.detach().std(dim=1, unbiased=False)


# --------------------------------------------------------------------------
# Sparsity against p (Fig. 4)
# --------------------------------------------------------------------------


class SparsityStatistics(NamedTuple):
    r"""Sparsity of attention weights (see :func:`sparsity_statistics`)."""
    entropy: float
    share_above: float
    share_below: float
    high: float
    low: float
    num_weights: int
    uniform_entropy: float


def sparsity_statistics(alpha: Tensor, index: Tensor,
                        num_nodes: Optional[int] = None, high: float = 0.9,
                        low: float = 0.01) -> SparsityStatistics:
    r"""Sparsity statistics of attention weights normalised over the
    incoming edges of each target node.

    * ``entropy``: the mean over target nodes with at least one incoming
      edge (and over heads) of :math:`-\sum_j \alpha_{ij}\log\alpha_{ij}`,
      in nats (:math:`0 \log 0 = 0`): :math:`0` for one-hot attention,
      :math:`\log d_i` for uniform attention over :math:`d_i` neighbours.
    * ``share_above``: the share of all weights (edges × heads) with
      :math:`\alpha > \text{high}`.
    * ``share_below``: the share with :math:`\alpha < \text{low}`.
    * ``uniform_entropy``: the entropy of uniform attention on the same
      edges, the mean of :math:`\log d_i` over those nodes (the upper
      bound of ``entropy``).

    Args:
        alpha: Weights of shape :math:`(E,)` or :math:`(E, H)`.
        index: The target node of each edge, :math:`(E,)` (the second row
            of the edge index that :meth:`~ikgat.IKGATConv.forward` returns).
        num_nodes: Number of target nodes (default: ``index.max() + 1``).
        high, low: The thresholds. (default: :obj:`0.9`, :obj:`0.01`)
    """
    from torch_geometric.utils import scatter

    alpha = alpha.detach()
    if alpha.dim() == 1:
        alpha = alpha.unsqueeze(-1)
    if alpha.dim() != 2:
        raise ValueError(f"'alpha' must have shape [E] or [E, H] (got "
                         f"{list(alpha.shape)})")
    if index.dim() != 1 or index.numel() != alpha.size(0):
        raise ValueError(f"'index' must have shape [E] = [{alpha.size(0)}] "
                         f"(got {list(index.shape)})")
    if alpha.numel() == 0:
        raise ValueError('No attention weights: the graph has no edges')
    if bool((alpha < 0).any()) or bool((alpha > 1 + 1e-6).any()):
        raise ValueError('Attention weights must lie in [0, 1]')
    alpha = alpha.double()
    index = index.long()
    if num_nodes is None:
        num_nodes = int(index.max()) + 1
    safe = alpha.clamp_min(torch.finfo(alpha.dtype).tiny)
    p_log_p = torch.where(alpha > 0, alpha * safe.log(),
                          torch.zeros_like(alpha))
    entropy = -scatter(p_log_p, index, dim=0, dim_size=num_nodes,
                       reduce='sum')  # [N, H]
    in_degree = torch.bincount(index, minlength=num_nodes)
    has_edges = in_degree > 0
    return SparsityStatistics(
        entropy=float(entropy[has_edges].mean()),
        share_above=float((alpha > high).double().mean()),
        share_below=float((alpha < low).double().mean()), high=float(high),
        low=float(low), num_weights=int(alpha.numel()),
        uniform_entropy=float(in_degree[has_edges].double().log().mean()))


AttentionLike = Union[AttentionDecomposition, Tuple[Tensor, Tensor]]


def alpha_and_index(value: AttentionLike) -> Tuple[Tensor, Tensor]:
    if isinstance(value, AttentionDecomposition):
        return value.alpha, value.edge_index[1]
    if isinstance(value, (tuple, list)) and len(value) == 2:
        alpha, index = value
        return alpha, index
    raise TypeError('Each attention entry must be an AttentionDecomposition '
                    'or a pair (alpha, index)')
