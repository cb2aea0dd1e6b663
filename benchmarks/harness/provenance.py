r"""Which code produced a result: the git commit of the checkout."""
import os
import os.path as osp
import subprocess
from typing import Optional

#: The checkout holding ``benchmarks/``.
REPOSITORY = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

_GIT_COMMIT: Optional[str] = None


def git_commit() -> str:
    r"""The short commit of the ikgat checkout, ``+dirty`` when tracked files
    other than the benchmark results (``benchmarks/results/``, which runs
    append to) differ from it, ``'unknown'`` outside a git checkout.  Only
    reads (no index refresh is written).  A copy of a checkout without its
    ``.git`` (e.g. on a remote machine) names its commit in the environment
    variable ``IKGAT_GIT_COMMIT``."""
    global _GIT_COMMIT
    if _GIT_COMMIT is None and os.environ.get('IKGAT_GIT_COMMIT'):
        _GIT_COMMIT = os.environ['IKGAT_GIT_COMMIT']
    if _GIT_COMMIT is None:
        folder = REPOSITORY
        env = dict(os.environ, GIT_OPTIONAL_LOCKS='0')
        try:
            commit = subprocess.run(
                ['git', '-C', folder, 'rev-parse', '--short=12', 'HEAD'],
                capture_output=True, text=True, check=True, env=env,
                timeout=10).stdout.strip()
            dirty = subprocess.run(
                ['git', '-C', folder, 'status', '--porcelain',
                 '--untracked-files=no', '--', '.',
                 ':(exclude)benchmarks/results'], capture_output=True,
                text=True, check=True, env=env, timeout=30).stdout.strip()
            _GIT_COMMIT = commit + ('+dirty' if dirty else '')
        except (OSError, subprocess.SubprocessError):
            _GIT_COMMIT = 'unknown'
    return _GIT_COMMIT


def row_commits(rows) -> str:
    r"""A sentence naming the commits that wrote :obj:`rows` (their
    ``git_commit`` column), for a summary rendered from a results CSV."""
    commits = sorted({row.get('git_commit') or 'not recorded'
                      for row in rows})
    return (f'Rows written at ikgat commit{"s" if len(commits) > 1 else ""} '
            f'{", ".join(commits)} (column `git_commit`).')
