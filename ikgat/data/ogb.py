r"""OGB's ``ogbn-arxiv`` and ``ogbn-products`` through ``ogb``'s own
:class:`~ogb.nodeproppred.PygNodePropPredDataset`, offline.

A data root (:mod:`ikgat.data.folders`) holds each dataset in OGB's layout,
as its zip file unpacks: ``ogbn_arxiv/`` with ``raw/``, ``split/`` and
``RELEASE_v<version>.txt``.  Nothing is downloaded: those entries are linked
into ``<cache>/ogb/ogbn_arxiv/``, where OGB writes ``processed/``.  ``ogb``
is the ``ogb`` extra (``pip install 'ikgat[ogb]'``), imported inside the
functions.
"""
import contextlib
import os
import os.path as osp
import sys
from typing import Optional, Tuple

import torch
from torch_geometric.data import Data

from ikgat.data.folders import cache_dir, data_root, link_files

#: The OGB node-classification datasets ikgat loads.
OGB_NAMES = ('ogbn-arxiv', 'ogbn-products')
#: Datasets stored as directed graphs, made undirected (as in OGB's and
#: PyG's examples).
MAKE_UNDIRECTED = ('ogbn-arxiv', )


def ogb_meta(name: str) -> dict:
    r"""The row of ``ogb``'s ``master.csv`` for :obj:`name` (its folder,
    version, split, download address, ...)."""
    try:
        import ogb.nodeproppred
    except ImportError as error:
        raise ImportError(f"{name} needs the 'ogb' package: pip install "
                          f"'ikgat[ogb]'") from error
    import pandas as pd
    master = pd.read_csv(
        osp.join(osp.dirname(ogb.nodeproppred.__file__), 'master.csv'),
        index_col=0, keep_default_na=False)
    return {key: str(value) for key, value in master[name].items()}


def load_ogbn(name: str, root: Optional[str] = None) -> Tuple[Data, int]:
    r"""Load an ``ogbn`` dataset with its official split, as a graph with
    ``train_mask``, ``val_mask`` and ``test_mask``, float features and one
    label per node, and its number of classes.

    Args:
        name (str): ``'ogbn-arxiv'`` or ``'ogbn-products'``.
        root (str, optional): The data root holding the dataset's folder in
            OGB's layout. (default: ``IKGAT_DATA``, then the user cache)

    Raises:
        ValueError: For an unknown name, or a data root without the dataset
            (the error names the folder to create and where OGB publishes
            it).
    """
    if name not in OGB_NAMES:
        raise ValueError(f'Unknown OGB dataset {name!r}; choose one of '
                         f'{list(OGB_NAMES)}')
    meta = ogb_meta(name)
    folder = '_'.join(name.split('-'))
    source = osp.join(data_root(root), folder)
    entries = ['raw', 'split', f'RELEASE_v{meta["version"]}.txt']
    missing = [entry for entry in entries
               if not osp.exists(osp.join(source, entry))]
    if missing:
        raise ValueError(f'{name} is not in {source} (missing {missing}); '
                         f'create that folder from OGB\'s {meta["url"]} '
                         f'(unpacked, it holds {", ".join(entries)})')
    work_root = osp.join(cache_dir(), 'ogb')
    link_files(source, osp.join(work_root, folder), entries)
    dataset = _read(name, work_root)
    data = dataset[0]
    split = dataset.get_idx_split()
    if name in MAKE_UNDIRECTED:
        from torch_geometric.utils import to_undirected
        data.edge_index = to_undirected(data.edge_index,
                                        num_nodes=data.num_nodes)
    data.y = data.y.view(-1)
    data.x = data.x.float()
    for key, part in (('train_mask', 'train'), ('val_mask', 'valid'),
                      ('test_mask', 'test')):
        mask = torch.zeros(data.num_nodes, dtype=torch.bool)
        mask[split[part]] = True
        data[key] = mask
    return data, dataset.num_classes


def _read(name: str, root: str):
    from ogb.nodeproppred import PygNodePropPredDataset
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    # ogb 1.3.6 reads its processed file with a bare torch.load, which is
    # weights_only since torch 2.6; allow the PyG classes that file holds.
    # ogb prints its progress when it processes: to stderr, so that
    # stdout holds the results only.
    os.makedirs(root, exist_ok=True)
    with torch.serialization.safe_globals(
            [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]), \
            contextlib.redirect_stdout(sys.stderr):
        return PygNodePropPredDataset(name, root=root)
