r"""Batches of graphs: how much a graph's outputs change when other graphs
share its mini-batch, per layer, with and without the ``batch`` vector.

    python -m benchmarks.batch_dependence --threads 1

A graph A of 12 nodes and 36 random edges is run alone, then as the first
graph of a :class:`~torch_geometric.data.Batch` with a graph B of 9 nodes
and 27 edges, from the same seed; the table gives the largest absolute
change of A's outputs.  Modes: evaluation (MIKANConv and IKGATConv
``implicit`` at the mean of their spectral density, KEPGATConv with one
draw of its noise), evaluation averaging 4 draws, and training with
attention dropout 0 (the draws of the stochastic layers; GATConv's dropout
is as batch-dependent in every layer and is left out).  Without ``batch``
the layers see one graph; with it (passed to ``forward``, or supplied by
:func:`ikgat.nn.graph_batch`) each graph is summarised and drawn apart.

Writes ``benchmarks/results/batch_dependence.md``.
"""
import os.path as osp
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, table_study_main

DEFAULT_OUTPUT = osp.join(RESULTS_DIR, 'batch_dependence.md')

IN_CHANNELS, CHANNELS, HEADS = 6, 4, 2

#: The modes: (label, training, draws averaged in evaluation).
MODES: List[Tuple[str, bool, int]] = [
    ('evaluation', False, 1),
    ('evaluation, 4 draws', False, 4),
    ('training draws', True, 1),
]


def layers() -> Dict[str, Callable[[int], torch.nn.Module]]:
    r"""Each layer, built with :obj:`draws` evaluation draws (attention
    dropout 0)."""
    from torch_geometric.nn import GATConv

    from ikgat.nn import IKGATConv, KEPGATConv, MIKANConv
    sizes = (IN_CHANNELS, CHANNELS)
    return {
        'GATConv': lambda draws: GATConv(*sizes, heads=HEADS),
        'IKGATConv direct': lambda draws: IKGATConv(*sizes, heads=HEADS),
        'IKGATConv implicit': lambda draws: IKGATConv(
            *sizes, heads=HEADS, kernel='implicit',
            kernel_kwargs=dict(num_samples=draws)),
        'MIKANConv': lambda draws: MIKANConv(*sizes, heads=HEADS,
                                             num_samples=draws),
        'KEPGATConv': lambda draws: KEPGATConv(*sizes, heads=HEADS,
                                               num_samples=draws),
    }


def two_graphs(seed: int = 0) -> Tuple[Data, Batch]:
    r"""Graph A (12 nodes, 36 edges) and the batch of A and B (9 nodes,
    27 edges), random features and edges from :obj:`seed`."""
    generator = torch.Generator().manual_seed(seed)

    def graph(num_nodes: int) -> Data:
        return Data(x=torch.randn(num_nodes, IN_CHANNELS,
                                  generator=generator),
                    edge_index=torch.randint(num_nodes, (2, 3 * num_nodes),
                                             generator=generator))

    a, b = graph(12), graph(9)
    return a, Batch.from_data_list([a, b])


def change(layer: torch.nn.Module, a: Data, ab: Batch, training: bool,
           batch: Optional[Tensor], seed: int = 1) -> float:
    r"""The largest absolute change of A's outputs from alone to first in
    :obj:`ab`, both from :obj:`seed` (:obj:`batch` passed to the layer in
    the batch if given)."""
    layer.train(training)
    kwargs = {} if batch is None else dict(batch=batch, batch_size=2)
    with torch.no_grad():
        torch.manual_seed(seed)
        alone = layer(a.x, a.edge_index)
        torch.manual_seed(seed)
        together = layer(ab.x, ab.edge_index, **kwargs)
    return float((alone - together[:a.num_nodes]).abs().max())


def measure() -> List[Dict[str, str]]:
    r"""One row per layer and mode: A's change without and with
    ``batch``."""
    a, ab = two_graphs()
    rows = []
    for name, build in layers().items():
        for label, training, draws in MODES:
            torch.manual_seed(0)
            layer = build(draws)
            row = dict(layer=name, mode=label,
                       without=f'{change(layer, a, ab, training, None):.1e}')
            try:
                row['with'] = f'{change(layer, a, ab, training, ab.batch):.1e}'
            except TypeError:  # a layer without a batch argument
                row['with'] = 'no batch argument'
            rows.append(row)
    return rows


def report(rows: List[Dict[str, str]], command: str) -> str:
    lines = [
        '# Batches of graphs: a graph\'s outputs alone and in a batch '
        '(CPU, every layer)', '',
        f'Measured at ikgat commit {git_commit()} with torch '
        f'{torch.__version__}:', '', '```', command, '```', '',
        'Largest absolute change of graph A\'s outputs (12 nodes) between '
        'A alone and A first in a batch with graph B (9 nodes), from the '
        'same seed; "without batch" calls `layer(x, edge_index)`, "with '
        'batch" passes `batch=data.batch, batch_size=2` (what '
        '`ikgat.nn.graph_batch` supplies to containers that do not pass '
        'it).', '',
        '| layer | mode | without batch | with batch |',
        '|---|---|---:|---:|']
    for row in rows:
        lines.append(f"| {row['layer']} | {row['mode']} | {row['without']} "
                     f"| {row['with']} |")
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> None:
    table_study_main(argv, 'batch_dependence', __doc__.split('\n\n')[0],
                     DEFAULT_OUTPUT, measure, report)


if __name__ == '__main__':
    main()
