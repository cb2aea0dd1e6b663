r"""The Planetoid data of a benchmark run."""
from typing import Any, NamedTuple, Optional

import torch_geometric.transforms as T

from benchmarks.harness.registry import canonical_dataset
from ikgat.data import load_planetoid


class BenchData(NamedTuple):
    r"""What a run needs of a dataset: a graph with ``x``, ``edge_index``,
    ``y`` and the three masks, and its sizes."""
    name: str
    data: Any
    num_features: int
    num_classes: int


def load_planetoid_data(name: str, root: Optional[str] = None) -> BenchData:
    r"""The public split of a Planetoid dataset with row-normalised
    features (GAT protocol)."""
    dataset = load_planetoid(name, root, transform=T.NormalizeFeatures())
    return BenchData(canonical_dataset(name), dataset[0],
                     dataset.num_features, dataset.num_classes)
