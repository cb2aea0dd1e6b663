r"""Offline-friendly loaders for the benchmark datasets.

Data is looked up in this order: the :obj:`root` argument, the environment
variable ``IKGAT_DATA``, then a user cache folder (``$XDG_CACHE_HOME/ikgat``
or ``~/.cache/ikgat``).  A data root holds ``Planetoid/<Name>/raw/`` with the
original Planetoid files.  Data roots are treated as read-only: the raw files
are linked into the cache folder (``IKGAT_CACHE`` overrides it) and PyG
writes its ``processed/`` files there, never beside the originals.
"""
import os
import os.path as osp
from typing import Any, Optional

from torch_geometric.datasets import Planetoid

PLANETOID_NAMES = {'cora': 'Cora', 'citeseer': 'CiteSeer', 'pubmed': 'PubMed'}
RAW_PARTS = ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index')


def cache_dir() -> str:
    r"""The writable folder for processed datasets."""
    if os.environ.get('IKGAT_CACHE'):
        return os.environ['IKGAT_CACHE']
    base = os.environ.get('XDG_CACHE_HOME') or osp.join(
        osp.expanduser('~'), '.cache')
    return osp.join(base, 'ikgat')


def data_root(root: Optional[str] = None) -> str:
    r"""The data root: :obj:`root`, else ``IKGAT_DATA``, else the cache."""
    return root or os.environ.get('IKGAT_DATA') or cache_dir()


def load_planetoid(name: str, root: Optional[str] = None,
                   **kwargs: Any) -> Planetoid:
    r"""Load Cora, CiteSeer or PubMed through PyG's
    :class:`~torch_geometric.datasets.Planetoid`, without downloading when
    the raw files are present.

    Args:
        name (str): ``'Cora'``, ``'CiteSeer'`` or ``'PubMed'`` (any case).
        root (str, optional): A folder holding ``Planetoid/<Name>/raw/``;
            defaults to ``IKGAT_DATA``, then the user cache folder.
        **kwargs (optional): Passed to Planetoid (``split``, ``transform``,
            ``pre_transform``, ...).
    """
    key = str(name).lower()
    if key not in PLANETOID_NAMES:
        raise ValueError(f"Unknown Planetoid dataset {name!r}; choose one of "
                         f"{sorted(PLANETOID_NAMES.values())}")
    name = PLANETOID_NAMES[key]
    source_raw = osp.join(data_root(root), 'Planetoid', name, 'raw')
    work_root = osp.join(cache_dir(), 'Planetoid')
    work_raw = osp.join(work_root, name, 'raw')
    files = [f'ind.{key}.{part}' for part in RAW_PARTS]
    if all(osp.isfile(osp.join(source_raw, f)) for f in files):
        os.makedirs(work_raw, exist_ok=True)
        for f in files:
            source, link = osp.join(source_raw, f), osp.join(work_raw, f)
            if osp.realpath(link) != osp.realpath(source):
                if osp.lexists(link):
                    os.remove(link)
                os.symlink(osp.abspath(source), link)
    try:
        return Planetoid(work_root, name, **kwargs)
    except Exception as error:  # PyG raises URLError & co. when offline
        if all(osp.isfile(osp.join(work_raw, f)) for f in files):
            raise
        raise RuntimeError(
            f"The {name} raw files are not in {source_raw} and downloading "
            f"them failed ({type(error).__name__}: {error}). Set IKGAT_DATA "
            f"(or pass root=) to a folder that holds "
            f"Planetoid/{name}/raw/ with the files {files}") from error


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
    import torch
    from torch_geometric.data import Data
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
