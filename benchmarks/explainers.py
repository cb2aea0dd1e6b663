r"""PyG's explainers on every layer: the edge masks' support against the
receptive field, for node and graph tasks.

    python -m benchmarks.explainers --threads 1

Node task: a two-layer :class:`~ikgat.models.TwoLayerGAT` (4 channels x 2
heads, dropout 0, evaluation mode) on 3 random graphs of 40 nodes and 160
edges explains node 0.  Its receptive field is the edges :math:`j \to i`
whose target :math:`i` is node 0 or one of its in-neighbours.  Graph
task: the same two layers, then a mean pool per graph, on a batch of two
random graphs of 20 nodes and 80 edges, with the batch supplied to the
layers by :func:`ikgat.nn.graph_batch`; it explains graph 0, whose
receptive field is its own edges (self-loops of the input left out: the
layers replace them by their own).  Explainers: GNNExplainer (30 epochs),
AttentionExplainer, and CaptumExplainer with integrated gradients where
captum is installed, all with ``edge_mask_type='object'``.  KEPGATConv is
explained at its posterior mean (``num_samples=0``): with draws, each
forward pass of an explainer would see other noise.

A cell gives the edges with a non-zero mask inside the receptive field /
its size, and outside it / the edges outside it, summed over the graphs.

Writes ``benchmarks/results/explainers.md``.
"""
import os.path as osp
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data
from torch_geometric.nn import global_mean_pool

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, table_study_main
from ikgat.models import TwoLayerGAT
from ikgat.nn import graph_batch

DEFAULT_OUTPUT = osp.join(RESULTS_DIR, 'explainers.md')

IN_CHANNELS, CHANNELS, HEADS, CLASSES = 8, 4, 2, 3


def layers() -> Dict[str, Tuple[type, dict]]:
    r"""Each layer with its arguments, as explained."""
    from torch_geometric.nn import GATConv, TransformerConv

    from ikgat.nn import (
        IKGATConv,
        IKTransformerConv,
        KEPGATConv,
        MIKANConv,
        MIKANTransformerConv,
    )
    return {
        'GATConv': (GATConv, {}),
        'IKGATConv rbf': (IKGATConv, dict(kernel='rbf')),
        'IKGATConv direct': (IKGATConv, dict(kernel='direct')),
        'IKGATConv implicit': (IKGATConv, dict(kernel='implicit')),
        'MIKANConv': (MIKANConv, {}),
        'KEPGATConv': (KEPGATConv, dict(num_samples=0)),
        'TransformerConv': (TransformerConv, {}),
        'IKTransformerConv rbf': (IKTransformerConv, dict(kernel='rbf')),
        'IKTransformerConv direct': (IKTransformerConv,
                                     dict(kernel='direct')),
        'IKTransformerConv implicit': (IKTransformerConv,
                                       dict(kernel='implicit')),
        'MIKANTransformerConv': (MIKANTransformerConv, {}),
    }


def explainers() -> Dict[str, Callable[[], object]]:
    r"""The explainers, CaptumExplainer only where captum is installed."""
    from torch_geometric.explain import (
        AttentionExplainer,
        CaptumExplainer,
        GNNExplainer,
    )
    found = {'GNNExplainer': lambda: GNNExplainer(epochs=30),
             'AttentionExplainer': lambda: AttentionExplainer()}
    try:
        import captum  # noqa: F401
    except ImportError:
        return found
    found['CaptumExplainer'] = lambda: CaptumExplainer('IntegratedGradients')
    return found


class GraphClassifier(torch.nn.Module):
    r"""Two attention layers and a mean pool per graph; the ikgat layers
    get :obj:`batch` through :func:`ikgat.nn.graph_batch`."""
    def __init__(self, conv: type, conv_kwargs: dict):
        super().__init__()
        self.body = TwoLayerGAT(IN_CHANNELS, CHANNELS, CLASSES, conv,
                                heads=HEADS, dropout=0.0,
                                conv_kwargs=conv_kwargs)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        with graph_batch(self, batch):
            return global_mean_pool(self.body(x, edge_index), batch)


def random_graph(num_nodes: int, generator: torch.Generator) -> Data:
    return Data(x=torch.randn(num_nodes, IN_CHANNELS, generator=generator),
                edge_index=torch.randint(num_nodes, (2, 4 * num_nodes),
                                         generator=generator))


def node_receptive_field(edge_index: Tensor, node: int) -> Tensor:
    r"""The edges :math:`j \to i` of a two-layer model's receptive field at
    :obj:`node`: :math:`i` is the node or one of its in-neighbours, and
    :math:`j \ne i` (the layers replace the self-loops of the input by
    their own, which no mask reaches)."""
    targets = torch.zeros(int(edge_index.max()) + 1, dtype=torch.bool)
    targets[node] = True
    targets[edge_index[0, edge_index[1] == node]] = True
    return targets[edge_index[1]] & (edge_index[0] != edge_index[1])


def explain(model: torch.nn.Module, algorithm, task: str, x: Tensor,
            edge_index: Tensor, index: int, **kwargs) -> Tensor:
    r"""The edge mask of :obj:`algorithm` for output :obj:`index`."""
    from torch_geometric.explain import Explainer
    explainer = Explainer(
        model, algorithm, explanation_type='model', edge_mask_type='object',
        model_config=dict(mode='multiclass_classification', task_level=task,
                          return_type='raw'))
    return explainer(x, edge_index, index=index, **kwargs).edge_mask


def task_graph(task: str, seed: int) -> Data:
    r"""The graph of the node task (40 nodes), or the batch of two graphs of
    the graph task (20 nodes each), of :obj:`seed`."""
    generator = torch.Generator().manual_seed(seed)
    if task == 'node':
        return random_graph(40, generator)
    return Batch.from_data_list([random_graph(20, generator),
                                 random_graph(20, generator)])


def support(name: str, explainer: str, task: str,
            seed: int) -> Tuple[int, int, int, int]:
    r"""Edges with a non-zero mask inside the receptive field, its size,
    edges with a non-zero mask outside it, and the edges outside it (input
    self-loops left out), on the graph(s) of :obj:`seed`."""
    conv, kwargs = layers()[name]
    data = task_graph(task, seed)
    torch.manual_seed(seed)
    if task == 'node':
        model = TwoLayerGAT(IN_CHANNELS, CHANNELS, CLASSES, conv, heads=HEADS,
                            dropout=0.0, conv_kwargs=kwargs).eval()
        field = node_receptive_field(data.edge_index, 0)
        mask = explain(model, explainers()[explainer](), 'node', data.x,
                       data.edge_index, 0)
    else:
        model = GraphClassifier(conv, kwargs).eval()
        field = ((data.batch[data.edge_index[1]] == 0)
                 & (data.edge_index[0] != data.edge_index[1]))
        mask = explain(model, explainers()[explainer](), 'graph', data.x,
                       data.edge_index, 0, batch=data.batch)
    found = mask != 0
    rest = ~field & (data.edge_index[0] != data.edge_index[1])
    return (int((found & field).sum()), int(field.sum()),
            int((found & rest).sum()), int(rest.sum()))


def measure(seeds=(0, 1, 2)) -> List[Dict[str, str]]:
    rows = []
    for task in ('node', 'graph'):
        for name in layers():
            row = dict(task=task, layer=name)
            for explainer in explainers():
                counts = [support(name, explainer, task, seed)
                          for seed in seeds]
                inside, size, outside, rest = map(sum, zip(*counts))
                row[explainer] = f'{inside}/{size}; {outside}/{rest}'
            rows.append(row)
    return rows


def report(rows: List[Dict[str, str]], command: str) -> str:
    names = list(explainers())
    lines = [
        '# PyG\'s explainers on every layer: edge masks against the '
        'receptive field (CPU, random graphs)', '',
        f'Measured at ikgat commit {git_commit()} with torch '
        f'{torch.__version__}:', '', '```', command, '```', '',
        'Each cell: edges with a non-zero mask inside the receptive field / '
        'its size; edges with a non-zero mask outside it / the edges outside '
        'it (self-loops of the input left out: the layers replace them), '
        'over 3 '
        'random graphs (node task: 40 nodes and 160 edges, node 0 '
        'explained; graph task: batches of two graphs of 20 nodes and 80 '
        'edges, graph 0 explained).', '',
        '| task | layer | ' + ' | '.join(names) + ' |',
        '|---|---|' + '---|' * len(names)]
    for row in rows:
        lines.append(f"| {row['task']} | {row['layer']} | "
                     + ' | '.join(row[name] for name in names) + ' |')
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> None:
    table_study_main(argv, 'explainers', __doc__.split('\n\n')[0],
                     DEFAULT_OUTPUT, measure, report)


if __name__ == '__main__':
    main()
