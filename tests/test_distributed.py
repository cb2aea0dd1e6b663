r"""DDP equality: 2 CPU processes (gloo) trained on full-neighbourhood
batches end with the parameters of one process trained on the same global
batches.  No sampler is needed for the layer cases: every rank runs the
model on the whole (small) graph and takes the loss on its own seeds.  The
``sampled_`` case runs the library's mini-batch loop instead
(``train_node_classifier`` with NeighborLoader batches of fan-out -1 and
rank 0's layer-wise evaluation), and needs pyg-lib or torch-sparse."""
import datetime
import faulthandler
import os
import signal
import time
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ikgat import (
    IKGATConv,
    IKTransformerConv,
    KEPGATConv,
    MIKANConv,
    MIKANTransformerConv,
)
from ikgat.data import toy_citation_graph
from ikgat.models import TwoLayerGAT
from ikgat.training import train_node_classifier
from ikgat.training.distributed import (
    data_parallel_loss,
    save_on_main,
    seed_nodes_for_rank,
)
from ikgat.training.sampling import has_sampler, minibatch_training

BATCH_SIZE, STEPS, BETA = 6, 4, 0.01
# A collective that waits longer than COLLECTIVE_TIMEOUT raises in the
# worker; the 2 processes, imports included, get TIMEOUT seconds in all.
COLLECTIVE_TIMEOUT, TIMEOUT = 30, 120
LAYERS = {
    'ikgat_direct': (IKGATConv, {'kernel': 'direct'}),
    'ikgat_implicit': (IKGATConv, {'kernel': 'implicit'}),
    'mikan': (MIKANConv, {}),
    'kep': (KEPGATConv, {}),
    'ikt_direct': (IKTransformerConv, {'kernel': 'direct'}),
    'mikan_transformer': (MIKANTransformerConv, {}),
    # Through train_node_classifier and NeighborLoader (a layer local to
    # in-neighbourhoods: a rank's subgraph gives its seeds the outputs of
    # the whole batch's subgraph):
    'sampled_ikgat_direct': (IKGATConv, {'kernel': 'direct'}),
}
SAMPLED = ('sampled_ikgat_direct', )


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
    # roundoff level into a step of size lr, so the two runs would differ
    # by their summation order, not by the method.  KEPGATConv's
    # output-layer att_dst gets one (~1e-9): its term a_t^T q_i is shared
    # by every edge into target i, so it cancels in the softmax whenever
    # all of them lie on one side of LeakyReLU's kink, as they do here on
    # most steps.
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


def train_sampled(model, data, rank, world_size, trained=None):
    # The library's own loop: global batches split across the ranks, each
    # rank's share sampled with every neighbour (fan-out -1, so the seeds'
    # outputs are the full graph's), rank 0 evaluating layer-wise.
    batches, inference = minibatch_training(model, data, BATCH_SIZE,
                                            [-1, -1], eval_batch_size=16)
    trained = model if trained is None else trained
    train_node_classifier(
        trained, data, epochs=2, patience=None, beta=BETA,
        optimizer=torch.optim.SGD(trained.parameters(), lr=0.5),
        batches=batches, inference=inference)


def train_data_parallel(rank, world_size, name, path):
    model, data = make_model(name)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, find_unused_parameters=False)
    if name in SAMPLED:
        train_sampled(model, data, rank, world_size, ddp)
    else:
        train(ddp, data, rank, world_size)
    save_on_main(model.state_dict(), path)


def worker(rank, world_size, store, name, path, stacks):
    with open(stacks[rank], 'w') as file:
        # The parent asks for every thread's stack at its timeout:
        faulthandler.register(signal.SIGUSR1, file=file, all_threads=True)
        torch.set_num_threads(1)
        # A file store rather than a TCP port: no port can be taken by
        # another process between choosing it and binding it.
        dist.init_process_group(
            'gloo', init_method=f'file://{store}', rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT))
        # DDP is freed (when train_data_parallel returns) before the
        # process group is destroyed (issue #17).  Each backward pass
        # (torch 2.13) stashes a contextvars.Context in the thread-local
        # state that every gloo work captures, and a gloo worker thread can
        # still hold the last reference to the last allreduce's work after
        # it completed.  Freed after destroy_process_group(), DDP's reducer
        # drops the group's last reference and runs its destructor with
        # the GIL held; the destructor joins that worker thread, which
        # waits for the GIL to free the Context: a deadlock, with no
        # timeout.  Freed first, DDP leaves the group alive, and
        # destroy_process_group() drops the last reference through the
        # ProcessGroup binding, which releases the GIL first.
        try:
            train_data_parallel(rank, world_size, name, path)
        except BaseException as error:
            # The traceback's frames would keep DDP alive:
            traceback.clear_frames(error.__traceback__)
            raise
        finally:
            dist.destroy_process_group()
        faulthandler.unregister(signal.SIGUSR1)


def test_seed_nodes_for_rank_split_the_batch():
    seeds = torch.arange(7)
    shares = [seed_nodes_for_rank(seeds, r, 3) for r in range(3)]
    assert torch.equal(torch.cat(shares).sort().values, seeds)
    with pytest.raises(ValueError, match='rank'):
        seed_nodes_for_rank(seeds, 3, 3)


@pytest.mark.parametrize('name', [
    pytest.param(name, marks=pytest.mark.slow) for name in LAYERS])
def test_two_processes_equal_one(name, tmp_path):
    if name in SAMPLED and not has_sampler():
        pytest.skip('needs pyg-lib or torch-sparse')
    path = str(tmp_path / 'state.pt')
    stacks = [tmp_path / f'stacks{rank}.txt' for rank in range(2)]
    context = mp.spawn(worker, nprocs=2, join=False,
                       args=(2, str(tmp_path / 'store'), name, path,
                             stacks))
    deadline = time.monotonic() + TIMEOUT
    while not context.join(timeout=1):
        if time.monotonic() > deadline:
            alive = [process.is_alive() for process in context.processes]
            for process, running in zip(context.processes, alive):
                if running:
                    os.kill(process.pid, signal.SIGUSR1)
            time.sleep(2)  # time to write the stacks
            for process in context.processes:
                process.kill()
            report = ''.join(
                f'\n--- rank {rank} ('
                f'{"hung" if running else "finished"}):\n'
                + (file.read_text() if file.exists() else '')
                for rank, (running, file) in enumerate(zip(alive, stacks)))
            pytest.fail(f'{name}: the 2 DDP processes did not finish in '
                        f'{TIMEOUT} s; stacks at the timeout (none for a '
                        f'rank that had not started worker()):'
                        f'{report}', pytrace=False)
    parallel = torch.load(path)

    model, data = make_model(name)
    (train_sampled if name in SAMPLED else train)(model, data, 0, 1)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(parallel[key], value, atol=1e-5,
                                   rtol=0, msg=key)
