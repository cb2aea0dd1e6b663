r"""Planetoid benchmark (Cora, CiteSeer, PubMed; public split), in the style
of PyG's ``benchmark/citation``.  A thin script over
:mod:`ikgat.benchmarking`; ``ikgat bench ...`` is the same command.

    # final runs, hyperparameters from the validation search, resumable:
    python benchmarks/planetoid.py --datasets Cora CiteSeer --models gat \
        ikan-direct mikan --seeds 0-19 --from-search \
        benchmarks/results/search.csv --resume
    # the validation-only grid over p, R, beta:
    python benchmarks/planetoid.py search --datasets Cora --models ikan-direct
    # benchmarks/results/planetoid.md from benchmarks/results/planetoid.csv:
    python benchmarks/planetoid.py summary

Every flag: ``python benchmarks/planetoid.py planetoid --help``.
"""
import os.path as osp
import sys

# Run as a script, this folder comes first on sys.path, where benchmarks/ogb.py
# would shadow the ``ogb`` package (``... planetoid.py ogb``): drop it.
_here = osp.dirname(osp.abspath(__file__))
sys.path[:] = [p for p in sys.path if osp.abspath(p or '.') != _here]

from ikgat.benchmarking import main  # noqa: E402

if __name__ == '__main__':
    main()
