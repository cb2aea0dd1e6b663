r"""Speed and memory of IKGATConv, MIKANConv and a naive edge-wise
evaluation against GATConv, in one process.  A thin script over
:mod:`ikgat.speed`; ``ikgat bench speed`` is the same command.

    # the full run, writes benchmarks/results/speed.md:
    IKGAT_DATA=../shared/data python -m benchmarks.speed --threads 1
    # seconds, tiny synthetic graphs (what the test suite runs):
    python -m benchmarks.speed --smoke --out /tmp/speed.md

Every flag: ``python -m benchmarks.speed --help``.
"""
import os.path as osp
import sys

# Run as a script, this folder comes first on sys.path, where benchmarks/ogb.py
# would shadow the ``ogb`` package: drop it.
_here = osp.dirname(osp.abspath(__file__))
sys.path[:] = [p for p in sys.path if osp.abspath(p or '.') != _here]

from ikgat.speed import main  # noqa: E402

if __name__ == '__main__':
    main()
