r"""Thread contention: how much slower a training step gets with two threads
when another process keeps one of the two cores busy, against one thread.

OpenMP runs every parallel operator as a region that ends at a barrier; when
one of its threads shares a core with a busy process, each region waits for
that thread's next time slice.  A step that runs many small regions pays
this wait many times, so the ratio
:math:`t(\text{2 threads, one core busy}) / t(\text{1 thread, one core
busy})` measures how well a layer copes with a loaded machine.

The model is the GAT recipe's two-layer network on Cora (8 heads x 8, then
one output head; dropout 0.6), trained with Adam for ``--epochs`` epochs
(forward, loss, backward, step).  One busy process (single-threaded
GATConv training steps on Cora, like a benchmark run with ``--threads 1``)
is started for the whole run; each model runs with 1 and then 2
threads in this process, in interleaved rounds, and the median over rounds
is reported::

    IKGAT_DATA=../shared/data python -m benchmarks.contention \
        --epochs 30 --rounds 3 --output benchmarks/results/contention.md
"""
import argparse
import multiprocessing
import platform
import statistics
import sys
import time
from typing import Callable, Dict, List

import torch
import torch.nn.functional as F
import torch_geometric
import torch_geometric.transforms as T
from torch_geometric.nn import GATConv

from ikgat import IKGATConv
from ikgat.data import load_planetoid
from ikgat.models import TwoLayerGAT

MODELS: Dict[str, Callable[[int, int], torch.nn.Module]] = {
    'GATConv': lambda i, o: TwoLayerGAT(i, 8, o, GATConv),
    'IKGATConv rbf': lambda i, o: TwoLayerGAT(
        i, 8, o, IKGATConv, conv_kwargs=dict(kernel='rbf')),
    'IKGATConv direct': lambda i, o: TwoLayerGAT(
        i, 8, o, IKGATConv, conv_kwargs=dict(kernel='direct')),
}


def _busy(stop) -> None:
    r"""Keep one core busy as another single-threaded job would: GATConv
    training steps on Cora, as a benchmark run with ``--threads 1``."""
    torch.set_num_threads(1)
    dataset = load_planetoid('Cora', transform=T.NormalizeFeatures())
    model = MODELS['GATConv'](dataset.num_features, dataset.num_classes)
    while not stop.is_set():
        train_seconds(model, dataset[0], 1)


def train_seconds(model: torch.nn.Module, data, epochs: int) -> float:
    r"""Seconds for :obj:`epochs` training steps."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005,
                                 weight_decay=5e-4)
    model.train()
    start = time.perf_counter()
    for _ in range(epochs):
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        F.cross_entropy(out[data.train_mask],
                        data.y[data.train_mask]).backward()
        optimizer.step()
    return time.perf_counter() - start


def main(argv: List[str] = None) -> str:
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--epochs', type=int, default=30)
    parser.add_argument('--rounds', type=int, default=3)
    parser.add_argument('--models', nargs='+', default=list(MODELS),
                        choices=list(MODELS))
    parser.add_argument('--output', default=None,
                        help='write the Markdown table here')
    args = parser.parse_args(argv)

    dataset = load_planetoid('Cora', transform=T.NormalizeFeatures())
    data = dataset[0]
    times = {(name, threads): [] for name in args.models
             for threads in (1, 2)}
    context = multiprocessing.get_context('spawn')
    stop = context.Event()
    busy = context.Process(target=_busy, args=(stop, ), daemon=True)
    busy.start()
    try:
        for _ in range(args.rounds):
            for name in args.models:
                for threads in (1, 2):
                    torch.set_num_threads(threads)
                    torch.manual_seed(0)
                    model = MODELS[name](dataset.num_features,
                                         dataset.num_classes)
                    train_seconds(model, data, 2)  # warm-up
                    times[name, threads].append(
                        train_seconds(model, data, args.epochs))
    finally:
        stop.set()
        busy.join()

    command = ' '.join(['python -m benchmarks.contention'] + (
        argv if argv is not None else sys.argv[1:]))
    lines = [
        '# Thread contention', '', f'Command: `{command}`', '',
        f'Cora, {args.epochs} training epochs of the 2-layer GAT recipe, '
        f'one single-threaded GATConv training busy on one of the '
        f'{multiprocessing.cpu_count()} cores; median of {args.rounds} '
        f'interleaved rounds '
        f'(torch {torch.__version__}, PyG {torch_geometric.__version__}, '
        f'{platform.processor() or platform.machine()}).', '',
        '| model | 1 thread (s) | 2 threads (s) | ratio 2/1 |',
        '|---|---|---|---|'
    ]
    for name in args.models:
        one = statistics.median(times[name, 1])
        two = statistics.median(times[name, 2])
        lines.append(f'| {name} | {one:.2f} | {two:.2f} | {two / one:.1f}x |')
    text = '\n'.join(lines)
    print(text)
    if args.output:
        from ikgat.atomic_writes import write_text_atomic
        write_text_atomic(args.output, text + '\n')
    return text


if __name__ == '__main__':
    main()
