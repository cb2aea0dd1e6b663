r"""Neighbour-sampled mini-batches for node classification, on one process
or split across data-parallel ranks.

An epoch shuffles the training seeds with a generator seeded by
``(seed, epoch)`` (the same order on every rank) and cuts them into global
batches of :obj:`batch_size` seeds.  Each rank takes its share of every
global batch (:func:`ikgat.training.distributed.seed_nodes_for_rank`) and samples
the subgraph around it with PyG's
:class:`~torch_geometric.loader.NeighborLoader`: :obj:`num_neighbors[l]`
in-neighbours per node at hop :math:`l` (:obj:`-1`: all of them).  The
subgraph's first ``batch.batch_size`` nodes are the rank's seeds.  A global
batch with fewer seeds than ranks (at most the epoch's last) is dropped, so
that every rank takes part in every step.

Sampling needs pyg-lib or torch-sparse (:func:`require_sampler`).
"""
import copy
import warnings
from typing import Callable, Iterable, Iterator, List, Sequence, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from ikgat.nn.conv.gat_base import GATConvBase
from ikgat.nn.conv.ik_transformer_conv import IKTransformerConv
from ikgat.training.distributed import seed_nodes_for_rank, world

#: How to get a neighbour sampler, named by the error of
#: :func:`require_sampler` and by the mini-batch guide (docs/guides/minibatch.md).
SAMPLER_HELP = (
    "install pyg-lib from PyG's wheel index (pip install pyg-lib -f "
    "https://data.pyg.org/whl/torch-<torch version>+<cpu or cuXYZ>.html) "
    "or torch-sparse (pip install torch-scatter torch-sparse builds them "
    "from source: about 35 minutes on 2 cores)")


def has_sampler() -> bool:
    r"""Whether pyg-lib or torch-sparse, either of which samples
    neighbours for PyG's NeighborLoader, is installed."""
    import torch_geometric.typing as pyg_typing
    return pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE


def require_sampler() -> None:
    r"""Raise a one-line :class:`RuntimeError` naming pyg-lib and
    torch-sparse when neither is installed."""
    if not has_sampler():
        raise RuntimeError(f'neighbour sampling needs pyg-lib or '
                           f'torch-sparse, and neither is installed: '
                           f'{SAMPLER_HELP}')


def check_num_neighbors(num_neighbors: Sequence[int]) -> List[int]:
    r"""Return :obj:`num_neighbors` as a list, checked: one entry per layer,
    each a positive count or :obj:`-1` (every neighbour)."""
    values = list(num_neighbors)
    if not values or any(not isinstance(value, int) or value == 0
                         or value < -1 for value in values):
        raise ValueError(f'num_neighbors must give each layer a positive '
                         f'count or -1 for all neighbours (got '
                         f'{num_neighbors!r})')
    return values


def neighbor_sampler(data: Data, num_neighbors: Sequence[int]):
    r"""A :class:`~torch_geometric.loader.NeighborLoader` over every node
    of :obj:`data`, used as ``sampler(seed_ids)``: the subgraph of
    :obj:`num_neighbors[l]` sampled in-neighbours per node at hop
    :math:`l`, its first ``batch_size`` nodes the seeds."""
    num_neighbors = check_num_neighbors(num_neighbors)
    require_sampler()
    from torch_geometric.loader import NeighborLoader
    with warnings.catch_warnings():
        # torch-sparse works; PyG only recommends pyg-lib over it:
        warnings.filterwarnings('ignore', message=".*without a 'pyg-lib'")
        return NeighborLoader(data, num_neighbors=num_neighbors,
                              batch_size=1)


def global_batches(seeds: Tensor, batch_size: int, epoch: int, seed: int,
                   world_size: int = 1) -> List[Tensor]:
    r"""The global batches of :obj:`epoch`: :obj:`seeds` shuffled by a
    generator seeded with ``seed * 1_000_003 + epoch`` (identical on every
    rank), cut into :obj:`batch_size` seeds, without a last batch that has
    fewer seeds than :obj:`world_size`."""
    if not isinstance(batch_size, int) or batch_size < world_size:
        raise ValueError(f'batch_size must be an integer of at least the '
                         f'number of processes, {world_size} (got '
                         f'{batch_size!r})')
    generator = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(seeds.numel(), generator=generator)
    batches = list(seeds[order.to(seeds.device)].split(batch_size))
    return [batch for batch in batches if batch.numel() >= world_size]


def sampled_batches(sampler, seeds: Tensor, batch_size: int, epoch: int,
                    seed: int, rank: int = 0, world_size: int = 1
                    ) -> Iterator[Tuple[Data, int]]:
    r"""Yield, for each global batch of :obj:`epoch`
    (:func:`global_batches`), this rank's sampled subgraph and the number of
    seeds in the global batch."""
    for batch in global_batches(seeds, batch_size, epoch, seed, world_size):
        local = seed_nodes_for_rank(batch, rank, world_size)
        yield sampler(local.cpu()), batch.numel()


def warn_sampling_caveats(model: torch.nn.Module) -> None:
    r"""Warn, once per layer type, about each layer of :obj:`model` whose
    outputs on sampled subgraphs differ from its full-graph outputs in more
    than the neighbours left out (its ``sampling_caveat``)."""
    for module in model.modules():
        if (isinstance(module, (GATConvBase, IKTransformerConv))
                and module.sampling_caveat):
            warnings.warn(module.sampling_caveat, UserWarning, stacklevel=2)


def minibatch_training(
    model: torch.nn.Module, data: Data, batch_size: int,
    num_neighbors: Sequence[int], eval_batch_size: int = 4096,
    seed: int = 0
) -> Tuple[Callable[[int], Iterable[Tuple[Data, int]]],
           Callable[[], Tensor]]:
    r"""The ``batches`` and ``inference`` arguments of
    :func:`ikgat.training.train_node_classifier` that train :obj:`model`
    on :obj:`data` in neighbour-sampled mini-batches of :obj:`batch_size`
    training seeds (this process's share under :mod:`torch.distributed`)
    and evaluate it layer-wise over the full graph with
    ``model.inference(x, edge_index, eval_batch_size)`` (e.g.
    :meth:`ikgat.models.TwoLayerGAT.inference`).

    The sampler works on a CPU copy of the graph; the batches move to the
    device of ``data.x``, where the inference runs."""
    device = data.x.device
    on_cpu = data if device.type == 'cpu' else copy.copy(data).cpu()
    sampler = neighbor_sampler(on_cpu, num_neighbors)
    seeds = on_cpu.train_mask.nonzero().view(-1)
    rank, world_size = world()

    def batches(epoch: int) -> Iterator[Tuple[Data, int]]:
        for batch, size in sampled_batches(sampler, seeds, batch_size, epoch,
                                           seed, rank, world_size):
            yield batch.to(device), size

    def inference() -> Tensor:
        return model.inference(data.x, data.edge_index, eval_batch_size)

    return batches, inference
