r"""The datasets of ``--dataset``, by name: Planetoid's citation graphs,
PyG's heterophilous graphs and OGB's ``ogbn`` graphs, each loaded offline
into a :class:`~ikgat.data.node_dataset.NodeDataset`."""
from typing import Optional

from ikgat.data.heterophilous import HETEROPHILOUS_NAMES, load_heterophilous
from ikgat.data.node_dataset import NodeDataset
from ikgat.data.ogb import OGB_NAMES, load_ogbn
from ikgat.data.planetoid import PLANETOID_NAMES, load_planetoid
from ikgat.data.scores import ROCAUC, Accuracy, OGBEvaluator

#: Every name ``--dataset`` takes.
DATASET_NAMES = (tuple(PLANETOID_NAMES.values()) + HETEROPHILOUS_NAMES
                 + OGB_NAMES)
#: Output heads of the GAT paper's protocol, where not 1.
OUT_HEADS = {'PubMed': 8}
#: Mini-batches of PyG's ogbn-products example: (seeds, fan-out).
MINIBATCHES = {'ogbn-products': (1024, (15, 10))}


def dataset_name(name: str) -> str:
    r"""The spelling of :data:`DATASET_NAMES` that :obj:`name` gives in any
    case, or a :class:`ValueError` naming the choices."""
    spelling = {known.lower(): known for known in DATASET_NAMES}
    if str(name).lower() not in spelling:
        raise ValueError(f'unknown dataset {name!r}; choose one of '
                         f'{", ".join(DATASET_NAMES)}')
    return spelling[str(name).lower()]


def load_dataset(name: str, root: Optional[str] = None) -> NodeDataset:
    r"""Load the dataset :obj:`name` (any case) from the data root.

    Args:
        name (str): One of :data:`DATASET_NAMES`.
        root (str, optional): The data root (:mod:`ikgat.data.folders`).
            (default: ``IKGAT_DATA``, then the user cache folder)
    """
    name = dataset_name(name)
    if name in HETEROPHILOUS_NAMES:
        dataset = load_heterophilous(name, root)
        return NodeDataset(name, dataset[0], dataset.num_classes, ROCAUC())
    if name in OGB_NAMES:
        data, num_classes = load_ogbn(name, root)
        batch_size, fan_out = MINIBATCHES.get(name, (None, (10, 10)))
        return NodeDataset(name, data, num_classes, OGBEvaluator(name),
                           batch_size=batch_size, fan_out=fan_out)
    import torch_geometric.transforms as T
    dataset = load_planetoid(name, root, transform=T.NormalizeFeatures())
    return NodeDataset(name, dataset[0], dataset.num_classes, Accuracy(),
                       out_heads=OUT_HEADS.get(name, 1),
                       normalize_features=True)
