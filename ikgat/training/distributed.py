r"""Data-parallel node classification with :mod:`torch.distributed`.

Each global batch of seed nodes is split across the ranks
(:func:`seed_nodes_for_rank`); every rank runs the model on its batch's
neighbourhood and takes the loss on its own seeds only.  The loss is scaled
so that the gradients :class:`~torch.nn.parallel.DistributedDataParallel`
averages equal those of one process on the whole global batch
(:func:`data_parallel_loss`):

.. math::
    \mathcal{L}_r = W \cdot \frac{1}{B} \sum_{i \in S_r} \ell_i
    + \frac{\beta}{N_{\mathrm{train}}} \mathrm{KL},
    \qquad
    \frac{1}{W} \sum_r \nabla \mathcal{L}_r
    = \nabla \Big(\frac{1}{B} \sum_{i \in S} \ell_i
    + \frac{\beta}{N_{\mathrm{train}}} \mathrm{KL}\Big),

with :math:`W` ranks, :math:`B = |S|` seeds in the global batch and
:math:`S_r` those of rank :math:`r`.  The KL term depends on the parameters
(and, for per-batch densities, on the batch) and is added whole on every
rank, so DDP's average counts it once.  Only rank 0 writes checkpoints and
results (:func:`save_on_main`), atomically (:mod:`ikgat.atomic_writes`).
"""
import os
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from ikgat.atomic_writes import atomic_open
from ikgat.nn.losses import kl_divergence


def world() -> tuple:
    r"""Return ``(rank, world_size)``: ``(0, 1)`` without an initialised
    process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_environment(device: str = 'cpu') -> torch.device:
    r"""Join the process group that ``torchrun`` describes in the
    environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``,
    ``MASTER_PORT``) and return this process's device: ``cuda:LOCAL_RANK``
    with the NCCL backend for :obj:`device` ``'cuda'``, the CPU with gloo
    otherwise.  Without ``torchrun`` (no ``WORLD_SIZE``, or 1) nothing is
    initialised and :obj:`device` is returned."""
    world_size = int(os.environ.get('WORLD_SIZE', '1'))
    if device not in ('cpu', 'cuda'):
        raise ValueError(f"device must be 'cpu' or 'cuda' (got {device!r})")
    if device == 'cuda' and not torch.cuda.is_available():
        raise ValueError("device 'cuda': this torch sees no CUDA device; "
                         "use --device cpu")
    if world_size == 1 or (dist.is_available() and dist.is_initialized()):
        return torch.device(device)
    local_rank = int(os.environ.get('LOCAL_RANK', '0'))
    if device == 'cuda':
        torch.cuda.set_device(local_rank)
        dist.init_process_group('nccl')
        return torch.device('cuda', local_rank)
    dist.init_process_group('gloo')
    return torch.device('cpu')


def is_main_process() -> bool:
    r"""Whether this process is rank 0 (or the only process)."""
    return world()[0] == 0


def seed_nodes_for_rank(seeds: Tensor, rank: int, world_size: int) -> Tensor:
    r"""Return the seeds of :obj:`rank`: every :obj:`world_size`-th node of
    the global batch :obj:`seeds`, starting at :obj:`rank`.  The ranks'
    shares are disjoint and cover the batch; a rank may get none when the
    batch holds fewer seeds than ranks."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f'seed_nodes_for_rank: need 0 <= rank < world_size '
                         f'(got rank={rank}, world_size={world_size})')
    return seeds[rank::world_size]


def data_parallel_loss(out: Tensor, y: Tensor, global_batch_size: int,
                       world_size: int, model: Optional[torch.nn.Module]
                       = None, beta: float = 0.0,
                       num_train: Optional[int] = None) -> Tensor:
    r"""Return this rank's loss :math:`\mathcal{L}_r` (module docstring).

    Args:
        out: Logits of this rank's seed nodes.
        y: Their labels.
        global_batch_size: :math:`B`, the seeds of the batch over all ranks.
        world_size: :math:`W`.
        model: The model whose :func:`~ikgat.nn.kl_divergence` is added
            when :obj:`beta` is non-zero (the module DDP wraps, or DDP).
        beta: Weight of the KL term, divided by :obj:`num_train` as in
            :func:`ikgat.training.train_node_classifier`.
        num_train: :math:`N_{\mathrm{train}}`.
    """
    loss = F.cross_entropy(out, y, reduction='sum') * (world_size /
                                                       global_batch_size)
    if beta:
        if model is None or not num_train:
            raise ValueError('data_parallel_loss: beta needs the model and '
                             'num_train')
        loss = loss + beta * kl_divergence(model) / num_train
    return loss


def save_on_main(obj, path: str) -> None:
    r"""Save :obj:`obj` with :func:`torch.save` to :obj:`path` on rank 0
    only, atomically (a temporary file, fsync, rename); other ranks return
    at once."""
    if not is_main_process():
        return
    with atomic_open(path, 'wb') as file:
        torch.save(obj, file)


def broadcast_from_main(values: list) -> list:
    r"""Return rank 0's :obj:`values` (a list of picklable objects) on
    every rank; :obj:`values` itself without a process group."""
    if world()[1] == 1:
        return values
    values = list(values)
    dist.broadcast_object_list(values, src=0)
    return values
