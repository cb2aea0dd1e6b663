r"""Writes that a killed process cannot leave half done.

A file is written to a temporary file in the target's folder, flushed,
``fsync``-ed and renamed over the target with :func:`os.replace` (atomic on
POSIX and Windows): a reader sees the old file or the new one, never a
prefix of the new one.
"""
import os
import os.path as osp
import tempfile
from contextlib import contextmanager
from typing import IO, Iterator


def check_writable(path: str) -> str:
    r"""Return :obj:`path` as an absolute path, or raise an
    :class:`OSError` naming it if a file cannot be written there: its
    folder cannot be created, is not a folder, or is not writable, or the
    path is a folder.  Call it before long work whose result goes there."""
    path = osp.abspath(path)
    if osp.isdir(path):
        raise IsADirectoryError(f'{path} is a folder; give a file name')
    folder = osp.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as error:
        raise NotADirectoryError(
            f'cannot write {path}: a part of {folder} is a file, not a '
            f'folder; choose another path') from error
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f'cannot write {path}: the folder {folder} is '
                              f'not writable; choose another path')
    return path


@contextmanager
def atomic_open(path: str, mode: str = 'wb') -> Iterator[IO]:
    r"""Open a temporary file beside :obj:`path` for writing; when the
    block ends without an error, flush, fsync and rename it to
    :obj:`path`; otherwise remove it and leave :obj:`path` as it was."""
    if mode not in ('w', 'wb'):
        raise ValueError(f"atomic_open: mode must be 'w' or 'wb' "
                         f"(got {mode!r})")
    path = check_writable(path)
    handle, temporary = tempfile.mkstemp(
        dir=osp.dirname(path), prefix=f'.{osp.basename(path)}.',
        suffix='.tmp')
    try:
        with os.fdopen(handle, mode) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        if osp.exists(temporary):
            os.remove(temporary)
        raise
    _fsync_folder(osp.dirname(path))


def write_text_atomic(path: str, text: str) -> None:
    r"""Replace the file at :obj:`path` by :obj:`text`, atomically."""
    with atomic_open(path, 'w') as file:
        file.write(text)


def _fsync_folder(folder: str) -> None:
    # The rename itself is durable once the folder's entry is synced (not
    # possible on every platform: best effort).
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
