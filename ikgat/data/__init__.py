r"""The graphs ikgat trains on: :func:`load_dataset` by name (Planetoid,
heterophilous and OGB graphs, read offline from a data root), each a
:class:`NodeDataset` that carries its splits, its score and its output
heads."""
from ikgat.data.catalog import DATASET_NAMES, dataset_name, load_dataset
from ikgat.data.folders import cache_dir, data_root
from ikgat.data.heterophilous import load_heterophilous
from ikgat.data.node_dataset import NodeDataset
from ikgat.data.ogb import load_ogbn
from ikgat.data.planetoid import (
    PLANETOID_NAMES,
    RAW_PARTS,
    load_planetoid,
    planetoid_name,
    unreadable_raw_file,
)
from ikgat.data.scores import ROCAUC, Accuracy, OGBEvaluator
from ikgat.data.toy_graph import toy_citation_graph

__all__ = [
    'DATASET_NAMES', 'NodeDataset', 'load_dataset', 'dataset_name',
    'load_planetoid', 'load_heterophilous', 'load_ogbn', 'planetoid_name',
    'unreadable_raw_file', 'PLANETOID_NAMES', 'RAW_PARTS', 'cache_dir',
    'data_root', 'Accuracy', 'ROCAUC', 'OGBEvaluator', 'toy_citation_graph'
]
