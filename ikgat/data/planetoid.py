r"""Cora, CiteSeer and PubMed through PyG's Planetoid, offline.

A data root (:mod:`ikgat.data.folders`) holds ``Planetoid/<Name>/raw/`` with
the original Planetoid files; when a data root is given (argument or
``IKGAT_DATA``) nothing is downloaded.  The raw files are linked into the
cache folder and PyG writes its ``processed/`` files there.
"""
import os
import os.path as osp
import pickle
import shutil
import warnings
from typing import Any, List, Optional, Tuple

from torch_geometric.datasets import Planetoid

from ikgat.data.folders import cache_dir, data_root, link_files

#: The Planetoid datasets, by the lower-case name the CLI accepts.
PLANETOID_NAMES = {'cora': 'Cora', 'citeseer': 'CiteSeer', 'pubmed': 'PubMed'}
RAW_PARTS = ('x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index')


def load_planetoid(name: str, root: Optional[str] = None,
                   **kwargs: Any) -> Planetoid:
    r"""Load Cora, CiteSeer or PubMed through PyG's
    :class:`~torch_geometric.datasets.Planetoid`, without downloading when
    the raw files are present.

    Args:
        name (str): ``'Cora'``, ``'CiteSeer'`` or ``'PubMed'`` (any case).
        root (str, optional): A folder holding ``Planetoid/<Name>/raw/``;
            defaults to ``IKGAT_DATA``, then the user cache folder (the only
            case in which the files are downloaded).
        **kwargs (optional): Passed to Planetoid (``split``, ``transform``,
            ``pre_transform``, ...).

    Raises:
        ValueError: For an unknown name, a data folder without the raw
            files, or a raw file that cannot be read (the error names it).
        RuntimeError: When the files are not present and downloading them
            failed.
    """
    name = planetoid_name(name)
    key = name.lower()
    given_root = root or os.environ.get('IKGAT_DATA')
    source_raw = osp.join(data_root(root), 'Planetoid', name, 'raw')
    work_root = osp.join(cache_dir(), 'Planetoid')
    work_raw = osp.join(work_root, name, 'raw')
    files = [f'ind.{key}.{part}' for part in RAW_PARTS]
    missing = [f for f in files if not osp.isfile(osp.join(source_raw, f))]
    if given_root and missing:
        origin = 'root' if root else 'IKGAT_DATA'
        raise ValueError(
            f"{source_raw} lacks the {name} raw files {missing} (data "
            f"folder {origin}={given_root}); point {origin} at a folder "
            f"that holds Planetoid/{name}/raw/")
    if not missing:
        link_files(source_raw, work_raw, files)
    try:
        return _read_planetoid(work_root, name, files, **kwargs)
    except ValueError:
        raise
    except Exception as error:  # PyG raises URLError & co. when offline
        if all(osp.isfile(osp.join(work_raw, f)) for f in files):
            raise
        raise RuntimeError(
            f"The {name} raw files are not in {source_raw} and downloading "
            f"them failed ({type(error).__name__}: {error}); set IKGAT_DATA "
            f"(or pass root=) to a folder that holds "
            f"Planetoid/{name}/raw/ with the files {files}") from error


def planetoid_name(name: str) -> str:
    r"""The canonical spelling of a Planetoid dataset name (any case), or a
    :class:`ValueError` naming the choices."""
    key = str(name).lower()
    if key not in PLANETOID_NAMES:
        raise ValueError(f"Unknown Planetoid dataset {name!r}; choose one of "
                         f"{sorted(PLANETOID_NAMES.values())}")
    return PLANETOID_NAMES[key]


def _read_planetoid(work_root: str, name: str, files: List[str],
                    **kwargs: Any) -> Planetoid:
    r"""Planetoid from the cache folder.  A processed file that does not
    load (a process killed while PyG wrote it) is rebuilt from the raw
    files; a raw file that cannot be read is named in a ValueError."""
    raw = osp.join(work_root, name, 'raw')
    processed = osp.join(work_root, name, 'processed')
    try:
        return Planetoid(work_root, name, **kwargs)
    except Exception as error:
        if not all(osp.isfile(osp.join(raw, f)) for f in files):
            raise
        damaged = unreadable_raw_file(raw, files)
        if damaged is not None:
            path, reason = damaged
            raise ValueError(
                f"{osp.realpath(path)} is damaged or truncated ({reason}); "
                f"replace it with the original Planetoid file") from error
        if not osp.isdir(processed):
            raise
    shutil.rmtree(processed)  # damaged processed files: build them again
    return Planetoid(work_root, name, **kwargs)


def unreadable_raw_file(folder: str, files: List[str]
                        ) -> Optional[Tuple[str, str]]:
    r"""The first of the Planetoid raw :obj:`files` in :obj:`folder` that
    does not read as PyG reads it, with the reason, or :obj:`None`."""
    for f in files:
        path = osp.join(folder, f)
        try:
            if f.endswith('.test.index'):
                with open(path) as handle:
                    [int(line) for line in handle if line.strip()]
            else:
                with open(path, 'rb') as handle, warnings.catch_warnings():
                    warnings.simplefilter('ignore')
                    pickle.load(handle, encoding='latin1')
        except Exception as error:
            return path, f'{type(error).__name__}: {error}'
    return None
