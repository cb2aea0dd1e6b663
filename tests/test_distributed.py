r"""DDP equality: 2 CPU processes (gloo) trained on full-neighbourhood
batches end with the parameters of one process trained on the same global
batches.  No sampler is needed: every rank runs the model on the whole
(small) graph and takes the loss on its own seeds."""
import datetime
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ikgat import IKGATConv, KEPGATConv, MIKANConv
from ikgat.datasets import toy_citation_graph
from ikgat.distributed import (data_parallel_loss, save_on_main,
                               seed_nodes_for_rank)
from ikgat.models import TwoLayerGAT

BATCH_SIZE, STEPS, BETA = 6, 4, 0.01
LAYERS = {
    'ikgat_direct': (IKGATConv, {'kernel': 'direct'}),
    'ikgat_implicit': (IKGATConv, {'kernel': 'implicit'}),
    'mikan': (MIKANConv, {}),
    'kep': (KEPGATConv, {}),
}


def make_model(name):
    conv, kwargs = LAYERS[name]
    torch.manual_seed(0)
    data = toy_citation_graph()
    model = TwoLayerGAT(data.num_features, 4, 3, conv, heads=2, dropout=0.0,
                        conv_kwargs=kwargs)
    return model, data


def global_batches(data):
    seeds = data.train_mask.nonzero().view(-1)
    generator = torch.Generator().manual_seed(1)
    batches = []
    while len(batches) < STEPS:
        order = seeds[torch.randperm(seeds.numel(), generator=generator)]
        batches += list(order.split(BATCH_SIZE))
    return batches[:STEPS]


def train(model, data, rank, world_size):
    # SGD, not Adam: Adam divides by sqrt(v), which turns a gradient at
    # roundoff level (KEPGATConv's output-layer att_dst: ~4e-10, the term
    # that every edge of a target shares) into a step of size lr, so the two
    # runs would differ by their summation order, not by the method.
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    num_train = int(data.train_mask.sum())
    for batch in global_batches(data):
        local = seed_nodes_for_rank(batch, rank, world_size)
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        loss = data_parallel_loss(out[local], data.y[local], batch.numel(),
                                  world_size, model, BETA, num_train)
        loss.backward()
        optimizer.step()


def worker(rank, world_size, store, name, path):
    torch.set_num_threads(1)
    # A file store rather than a TCP port: no port can be taken by another
    # process between choosing it and binding it.
    dist.init_process_group('gloo', init_method=f'file://{store}',
                            rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=60))
    try:
        model, data = make_model(name)
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, find_unused_parameters=False)
        train(ddp, data, rank, world_size)
        save_on_main(model.state_dict(), path)
    finally:
        dist.destroy_process_group()


def test_seed_nodes_for_rank_split_the_batch():
    seeds = torch.arange(7)
    shares = [seed_nodes_for_rank(seeds, r, 3) for r in range(3)]
    assert torch.equal(torch.cat(shares).sort().values, seeds)
    with pytest.raises(ValueError, match='rank'):
        seed_nodes_for_rank(seeds, 3, 3)


@pytest.mark.parametrize('name', list(LAYERS))
def test_two_processes_equal_one(name, tmp_path):
    path = str(tmp_path / 'state.pt')
    # The 2 processes have hung now and then on this 2-core machine (cause
    # not found yet, issue #17): a run that does not finish in 90 s is
    # killed and started once more; a second hang fails the test.
    for attempt in range(2):
        store = str(tmp_path / f'store{attempt}')
        context = mp.spawn(worker, args=(2, store, name, path), nprocs=2,
                           join=False)
        deadline = time.monotonic() + 90
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                break
        else:
            break
    else:
        pytest.fail(f'{name}: the 2 DDP processes hung twice (90 s each)')
    parallel = torch.load(path)

    model, data = make_model(name)
    train(model, data, 0, 1)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(parallel[key], value, atol=1e-5,
                                   rtol=0, msg=key)
