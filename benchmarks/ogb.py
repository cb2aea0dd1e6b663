r"""Full-batch GAT-style runs on ogbn-arxiv / ogbn-products through ``ogb``'s
PygNodePropPredDataset and Evaluator; the same as ``ikgat bench ogb``.
Needs ``pip install 'ikgat[ogb]'`` and internet on first use (OGB downloads
the dataset into --root):

    python benchmarks/ogb.py --dataset ogbn-arxiv --models gat ikan-direct \
        --seeds 0-4 --device cuda --resume
"""
import os.path as osp
import sys

# Run as a script, this file's folder comes first on sys.path, where this
# file would shadow the ``ogb`` package itself: drop that entry.
_here = osp.dirname(osp.abspath(__file__))
sys.path[:] = [p for p in sys.path if osp.abspath(p or '.') != _here]

from ikgat.ogb import main  # noqa: E402

if __name__ == '__main__':
    main()
