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
