r"""The CUDA memory of the GPU study's steps (issue #16), predicted on the
``meta`` device: what :mod:`benchmarks.gpu_speed` will measure with
``torch.cuda.max_memory_allocated``, counted without a GPU.

**Why the meta device predicts it.**  Off the CPU, the ikgat layers take
their CUDA path on ``meta`` tensors too.  They read no value, and the fused
attention allocates its outputs and gradients without launching a kernel
(see :mod:`ikgat.ops.gat_attention`).  A meta operation returns tensors
of the shapes and dtypes its CUDA kernel returns.
:class:`~benchmarks.harness.live_tensors.LiveTensorBytes` counts each
storage from its creation until it is freed, rounded up to 512 bytes as
the caching allocator rounds requests (``torch.cuda.memory_allocated``
sums its blocks, which can be up to about 1 MiB larger for large
tensors).

**What it leaves out,** so a measured peak can be higher:

* buffers that CUDA kernels allocate for themselves, such as the temporary
  storage of ``torch.sort`` (the CSR of the fused path, built in the first
  step) and cuBLAS workspaces;
* autocast, which the meta device does not have: float32 only;
* the CUDA context, which ``max_memory_allocated`` does not count either.

**Self-loops.**  Every layer removes the self-loops a graph has and adds
one per node.  The fused path of the ikgat layers does it in its CSR sort,
reading no value, so it runs here as it is.  The other paths select the
edges with a boolean mask, which needs values.  Those layers are therefore
built with ``add_self_loops=False`` and receive the graph with one
self-loop per node appended (a random graph of this size already holds
about :math:`E/N` self-loops, a negligible number), created where each
layer creates its own:

* GATConv: in every forward pass of every layer;
* the unfused ikgat layers on CUDA: once per graph, kept with the graph
  together with the positions of the kept edges and shared by the layers
  (:mod:`ikgat.nn.graph_cache`).

**Steps,** as in :mod:`benchmarks.gpu_speed` (same models, same step
functions):

* *layer*: one layer, 8 heads :math:`\times` 8, forward and backward;
* *training*: the two-layer full-batch training step of item 5, with Adam.

One warm-up step fills the caches, the optimizer state and the gradients.
The next step is measured:

* *peak*: the live tensors at its peak (graph, parameters, caches and
  activations);
* *step*: the peak less what was alive before the step.

The fused variants run their fused path on meta (``fused_attention =
'always'``).  The ``-unfused`` variants run the chunked path::

    python -m benchmarks.gpu_memory \
        --output benchmarks/results/gpu_memory.md
    python -m benchmarks.gpu_memory --graphs arxiv --models GATConv \
        IKGATConv-direct --training-graphs --output /tmp/arxiv.md
"""
import argparse
import sys
from typing import Dict, List, Optional

import torch

from benchmarks import gpu_speed
from benchmarks.harness.live_tensors import LiveTensorBytes
from benchmarks.harness.measurement import machine_info
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import write_text

META = torch.device('meta')
#: The CUDA caching allocator's block: every allocation is a multiple.
CUDA_BLOCK = 512
#: The GPU memory of the device machine's H100, as its tool describes it.
H100_GIB = 78


def with_self_loops(edge_index: torch.Tensor,
                    num_nodes: int) -> torch.Tensor:
    """The edges followed by one self-loop per node (values irrelevant on
    meta: the shapes are those of PyG's ``add_self_loops``)."""
    loops = torch.arange(num_nodes, device=edge_index.device)
    return torch.cat([edge_index, loops.expand(2, -1)], dim=1)


def emulate_self_loops(model: torch.nn.Module) -> None:
    """Give every attention layer of :obj:`model` (built with
    ``add_self_loops=False``) the graph with self-loops, where the layer
    itself creates it on CUDA: in each forward pass for GATConv; once per
    graph for the unfused ikgat layers, with the kept edges' positions
    (int64, one per edge), as :mod:`ikgat.nn.graph_cache` holds them.  The
    fused ikgat layers add their own, in their CSR sort."""
    from torch_geometric.nn import GATConv

    from ikgat import IKGATConv
    from ikgat.nn.conv.gat_base import GATConvBase

    def each_forward(module, args):
        x, edge_index = args[:2]
        return (x, with_self_loops(edge_index, x.size(0)), *args[2:])

    def cached(module, args):
        x, edge_index = args[:2]
        if id(edge_index) not in cache:  # the graph lives through predict()
            kept = torch.empty(edge_index.size(1), dtype=torch.long,
                               device=edge_index.device)
            cache[id(edge_index)] = (with_self_loops(edge_index, x.size(0)),
                                     kept)
        return (x, cache[id(edge_index)][0], *args[2:])

    cache: Dict[int, tuple] = {}
    for module in model.modules():
        if isinstance(module, GATConv):
            module.register_forward_pre_hook(each_forward)
        elif isinstance(module, IKGATConv) and module.fused_attention:
            module.fused_attention = 'always'  # True means "on CUDA"
            module.add_self_loops = True
        elif isinstance(module, GATConvBase):
            module.register_forward_pre_hook(cached)


def predict(name: str, size, training: bool,
            device: torch.device = META) -> Dict[str, int]:
    """Predicted peak and step bytes of one step of :obj:`name` on a graph
    of :obj:`size` (nodes, edges, features, classes).  On another
    :obj:`device` (CPU, for the tests) the same step runs on random values
    and is counted the same way."""
    num_nodes, num_edges, num_features, num_classes = size
    torch.manual_seed(0)
    tracker = LiveTensorBytes(block=CUDA_BLOCK)
    with tracker:  # built inside, so that the parameters count everywhere
        model = gpu_speed.build_model(name, num_features,
                                      num_classes if training else None,
                                      add_self_loops=False)
        x = torch.randn(num_nodes, num_features, device=device)
        edge_index = torch.randint(0, num_nodes, (2, num_edges),
                                   device=device)
        model = model.to(device).train()
        emulate_self_loops(model)
        if training:
            labels = torch.randint(0, num_classes, (num_nodes, ),
                                   device=device)
            optimizer = torch.optim.Adam(model.parameters(), lr=0.005)
            step = gpu_speed.training_step(model, optimizer, x, edge_index,
                                           labels)
        else:
            step = gpu_speed.layer_step(model, x, edge_index, device,
                                        'float32')
        step()  # warm-up: caches, optimizer state, gradients
        before = tracker.now
        tracker.reset_peak()
        step()
    return dict(peak_bytes=tracker.peak, step_bytes=tracker.peak - before)


def rows_for(graphs: List[str], models: List[str], training: bool,
             progress: str) -> List[dict]:
    rows = []
    for graph in graphs:
        size = gpu_speed.GRAPHS[graph]
        for name in models:
            print(f'{progress}: {graph} {name}', file=sys.stderr, flush=True)
            rows.append(dict(graph=graph, nodes=size[0], edges=size[1],
                             model=name, **predict(name, size, training)))
    return rows


def gib(value: int) -> str:
    return f'{value / 2**30:.2f}'


def table(rows: List[dict], title: str) -> List[str]:
    lines = [title, '',
             ('| graph | nodes | edges | model | peak GiB | step GiB | '
              'peak / GATConv | fits in 78 GiB |'),
             '|---|---:|---:|---|---:|---:|---:|---|']
    reference = {r['graph']: r['peak_bytes'] for r in rows
                 if r['model'] == 'GATConv'}
    for r in rows:
        base = reference.get(r['graph'])
        ratio = f"{r['peak_bytes'] / base:.2f}" if base else '-'
        fits = 'yes' if r['peak_bytes'] < H100_GIB * 2**30 else '**no**'
        lines.append(f"| {r['graph']} | {r['nodes']:,} | {r['edges']:,} | "
                     f"{r['model']} | {gib(r['peak_bytes'])} | "
                     f"{gib(r['step_bytes'])} | {ratio} | {fits} |")
    return lines + ['']


def markdown(command: str, layers: List[dict],
             training: List[dict]) -> str:
    lines = ['# Predicted CUDA memory of the GPU study (issue #16)', '',
             ('Counted on the meta device by `benchmarks/gpu_memory.py` '
              '(see its docstring for the method and what it leaves out): '
              'a prediction of `torch.cuda.max_memory_allocated`, not a '
              'measurement. Float32. Edges without the self-loops the '
              'layers add.'), '',
             f'- command: `{command}`', f'- git commit: {git_commit()}']
    lines += [line for line in machine_info() if 'load average' not in line]
    lines += ['']
    if layers:
        lines += table(layers, '## One layer, forward + backward '
                       '(8 heads x 8)')
    if training:
        lines += table(training, '## Two-layer full-batch training step '
                       '(8 heads x 8, then 1 head x classes; Adam)')
    return '\n'.join(lines)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Predict the CUDA memory of the GPU study\'s steps on '
        'the meta device (no GPU needed).')
    parser.add_argument('--output', required=True,
                        help='Markdown file to write')
    parser.add_argument('--graphs', nargs='*', default=list(gpu_speed.GRAPHS),
                        choices=list(gpu_speed.GRAPHS), metavar='GRAPH',
                        help='graphs of the one-layer step (default: all of '
                        f'{list(gpu_speed.GRAPHS)})')
    # The eager models: a compiled step's memory is Inductor's plan, which
    # the meta device does not run.
    eager = [name for name in gpu_speed.MODELS
             if not name.endswith('-compiled')]
    parser.add_argument('--models', nargs='+', default=eager,
                        choices=eager, metavar='MODEL',
                        help=f'models (default: all of {eager})')
    parser.add_argument('--training-graphs', nargs='*',
                        default=['arxiv', 'products'],
                        choices=list(gpu_speed.GRAPHS), metavar='GRAPH',
                        help='graphs of the two-layer training step '
                        '(default: arxiv products)')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    command = ' '.join(['python -m benchmarks.gpu_memory']
                       + (sys.argv[1:] if argv is None else argv))
    layers = rows_for(args.graphs, args.models, False, 'layer')
    training = rows_for(args.training_graphs, args.models, True, 'training')
    write_text(args.output, markdown(command, layers, training))
    print(f'wrote {args.output}', file=sys.stderr)


if __name__ == '__main__':
    main()
