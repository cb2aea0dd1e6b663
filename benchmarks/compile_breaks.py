r"""Graph breaks and recompilations of each layer under :func:`torch.compile`:
``python -m benchmarks.compile_breaks``.

    TRITON_INTERPRET=1 python -m benchmarks.compile_breaks \
        --output benchmarks/results/compile_breaks.md

Ten training steps (forward and backward) of one layer on one graph
(2,000 nodes, 10,000 edges, 32 features, 8 heads x 8), compiled with the
``aot_eager`` backend (dynamo and AOTAutograd, which decide the breaks and
recompilations; no code generation): the graph breaks dynamo counted, the
graphs it compiled, and the frames it captured.  Each layer runs with its
default switch (on CPU: the registered operators' PyTorch implementation
while compiling) and on its CUDA path (``fused_attention='always'``: the
Triton kernels, on CPU through the interpreter, on a 200-node graph).
"""
import argparse
import os
import sys
from typing import Callable, Iterator, List, Optional, Tuple

import torch

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import write_text

STEPS = 10


def layers() -> Iterator[Tuple[str, Callable[[], torch.nn.Module]]]:
    from torch_geometric.nn import GATConv

    from ikgat import IKGATConv, MIKANConv
    yield 'GATConv', lambda: GATConv(32, 8, heads=8)
    for kernel in ('rbf', 'direct', 'implicit'):
        yield f'IKGATConv {kernel}', (
            lambda kernel=kernel: IKGATConv(32, 8, heads=8, kernel=kernel))
    yield 'MIKANConv', lambda: MIKANConv(32, 8, heads=8)


def count(make: Callable[[], torch.nn.Module], switch, num_nodes: int
          ) -> Tuple[int, int, int]:
    r"""(graph breaks, graphs compiled, frames captured) of :data:`STEPS`
    compiled training steps."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    x = torch.randn(num_nodes, 32)
    edge_index = torch.randint(0, num_nodes, (2, 5 * num_nodes))
    layer = make().train()
    if switch is not None:
        layer.fused_attention = switch
    compiled = torch.compile(layer, backend='aot_eager')
    for _ in range(STEPS):
        compiled(x, edge_index).sum().backward()
    return (sum(counters['graph_break'].values()),
            counters['stats']['unique_graphs'],
            counters['stats']['calls_captured'])


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--output', default=None,
                        help='Markdown file to write (default: print)')
    args = parser.parse_args(argv)
    interpreted = os.environ.get('TRITON_INTERPRET') == '1'
    rows = []
    for name, make in layers():
        switches = [(None, 2000)]
        if name != 'GATConv' and (interpreted or torch.cuda.is_available()):
            switches.append(('always', 200))
        for switch, num_nodes in switches:
            breaks, graphs, frames = count(make, switch, num_nodes)
            path = ('default switch' if switch is None
                    else 'CUDA path (`always`)')
            rows.append(f'| {name} | {path} | {breaks} | {graphs} | '
                        f'{frames} |')
            print(rows[-1], file=sys.stderr, flush=True)
    command = ' '.join(['python -m benchmarks.compile_breaks']
                       + (sys.argv[1:] if argv is None else list(argv)))
    text = '\n'.join([
        '# Graph breaks and recompilations under torch.compile', '',
        f'Command: `{"TRITON_INTERPRET=1 " if interpreted else ""}'
        f'{command}`; git commit {git_commit()}; torch {torch.__version__}.',
        '', f'{STEPS} compiled training steps per row (backend `aot_eager`).',
        '', '| layer | path | graph breaks | graphs compiled | '
        'frames captured |', '|---|---|---:|---:|---:|', *rows]) + '\n'
    if args.output is None:
        print(text)
    else:
        write_text(args.output, text)
    return text


if __name__ == '__main__':
    main()
