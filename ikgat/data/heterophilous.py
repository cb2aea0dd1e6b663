r"""PyG's heterophilous graphs (Platonov et al., 2023), offline: a data root
(:mod:`ikgat.data.folders`) holds
``HeterophilousGraphDataset/<name>/raw/<name>.npz``; the file is linked into
the cache folder, where PyG writes its ``processed/`` file.  Each graph
comes with its 10 fixed splits (masks of shape ``(N, 10)``)."""
import os.path as osp
from typing import Optional

from torch_geometric.datasets import HeterophilousGraphDataset

from ikgat.data.folders import cache_dir, data_root, given_root, link_files

#: The heterophilous graphs ikgat loads, each scored by ROC-AUC (two
#: classes).
HETEROPHILOUS_NAMES = ('minesweeper', 'tolokers')
#: Where the graphs are published.
HETEROPHILOUS_URL = ('https://github.com/yandex-research/'
                     'heterophilous-graphs/raw/main/data')


def load_heterophilous(name: str, root: Optional[str] = None
                       ) -> HeterophilousGraphDataset:
    r"""Load ``minesweeper`` or ``tolokers`` through PyG's
    :class:`~torch_geometric.datasets.HeterophilousGraphDataset`, without
    downloading when a data root is given.

    Args:
        name (str): ``'minesweeper'`` or ``'tolokers'``.
        root (str, optional): A folder holding
            ``HeterophilousGraphDataset/<name>/raw/<name>.npz``.
            (default: ``IKGAT_DATA``, then the user cache folder, the only
            case in which the file is downloaded)

    Raises:
        ValueError: For an unknown name, or a data root without the file
            (the error names the folder to create and where the file is
            published).
    """
    if name not in HETEROPHILOUS_NAMES:
        raise ValueError(f'Unknown heterophilous dataset {name!r}; choose '
                         f'one of {list(HETEROPHILOUS_NAMES)}')
    file = f'{name}.npz'
    source_raw = osp.join(data_root(root), 'HeterophilousGraphDataset', name,
                          'raw')
    work_root = osp.join(cache_dir(), 'HeterophilousGraphDataset')
    if osp.isfile(osp.join(source_raw, file)):
        link_files(source_raw, osp.join(work_root, name, 'raw'), [file])
    elif given_root(root):
        raise ValueError(f'{osp.join(source_raw, file)} is missing; create '
                         f'the folder {source_raw} and put in it {file} '
                         f'from {HETEROPHILOUS_URL}/{file}')
    return HeterophilousGraphDataset(work_root, name)
