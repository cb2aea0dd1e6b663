r"""Where datasets are read and where they are processed.

Data is looked up in this order: the :obj:`root` argument, the environment
variable ``IKGAT_DATA``, then a user cache folder (``$XDG_CACHE_HOME/ikgat``
or ``~/.cache/ikgat``).  Data roots are treated as read-only: the original
files are linked into the cache folder (``IKGAT_CACHE`` overrides it) and
the loaders write their ``processed/`` files there, never beside the
originals.
"""
import os
import os.path as osp
from typing import Iterable, Optional


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


def given_root(root: Optional[str] = None) -> Optional[str]:
    r"""The data root the user chose (:obj:`root`, else ``IKGAT_DATA``), or
    :obj:`None` when neither is set (then loaders may download)."""
    return root or os.environ.get('IKGAT_DATA') or None


def link_files(source: str, target: str, files: Iterable[str]) -> None:
    r"""Link each of :obj:`files` of the folder :obj:`source` into the
    folder :obj:`target` (created), replacing links that point elsewhere:
    a loader then reads the originals and writes beside the links."""
    os.makedirs(target, exist_ok=True)
    for name in files:
        original, link = osp.join(source, name), osp.join(target, name)
        if osp.realpath(link) != osp.realpath(original):
            if osp.lexists(link):
                os.remove(link)
            os.symlink(osp.abspath(original), link)
