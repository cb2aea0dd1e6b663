r"""Render ``benchmarks/results/planetoid.md`` (mean ± std, 95% CI, seeds,
the paper's numbers, and where each ikgat model beats our own GAT run) from
``benchmarks/results/planetoid.csv``; the same as ``ikgat bench summary``.

    python benchmarks/summary.py [--results CSV] [--tag final] [--output MD]
"""
import sys

from ikgat.benchmarking import main

if __name__ == '__main__':
    main(['summary'] + sys.argv[1:])
