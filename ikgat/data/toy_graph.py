r"""A small synthetic citation-like graph for smoke runs and tests."""
import torch
from torch_geometric.data import Data


def toy_citation_graph(num_nodes: int = 48, num_classes: int = 3,
                       channels: int = 12, num_train: int = 12,
                       num_val: int = 18, seed: int = 0):
    r"""A small synthetic graph shaped like a Planetoid split, for smoke
    runs and tests: node :math:`n` has class :math:`n \bmod K`, features
    :math:`|c_{y_n} + 0.8\,\varepsilon_n|` (row-normalised) around random
    class centres :math:`c_k`, and :math:`8N` directed edges, each
    joining a random node to a node of its class (homophily, as in
    citation graphs), in both directions.  The first :obj:`num_train`
    nodes train, the next :obj:`num_val` validate, the rest test; every
    class is in every split when the splits hold at least :math:`K`
    nodes."""
    generator = torch.Generator().manual_seed(seed)
    y = torch.arange(num_nodes) % num_classes
    centers = torch.randn(num_classes, channels, generator=generator)
    x = (centers[y] + 0.8 * torch.randn(num_nodes, channels,
                                        generator=generator)).abs()
    src = torch.randint(0, num_nodes, (4 * num_nodes, ), generator=generator)
    shift = torch.randint(0, num_nodes // num_classes, src.shape,
                          generator=generator) * num_classes
    dst = (src + shift) % num_nodes
    edge_index = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])],
                           dim=1)
    index = torch.arange(num_nodes)
    return Data(x=x / x.sum(-1, keepdim=True), edge_index=edge_index, y=y,
                train_mask=index < num_train,
                val_mask=(index >= num_train) & (index < num_train + num_val),
                test_mask=index >= num_train + num_val)
