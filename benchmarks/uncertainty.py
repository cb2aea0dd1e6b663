r"""Uncertainty benchmark on Cora, CiteSeer and PubMed (public split): GAT +
max-softmax, GAT + temperature scaling, GAT + MC dropout, MIKAN (Monte Carlo
over spectral samples) and KEPGATConv (the Bayesian layer), by
misclassification detection, calibration and OOD detection with held-out
classes.  A thin script over :mod:`ikgat.uncertainty`.

    # rows appended to benchmarks/results/uncertainty.csv, resumable:
    python benchmarks/uncertainty.py --datasets Cora --seeds 0-9 --resume
    # benchmarks/results/uncertainty.md from the CSV only:
    python benchmarks/uncertainty.py --summary-only
    # seconds, on a tiny synthetic graph (results in a temporary folder):
    python benchmarks/uncertainty.py --smoke
"""
import argparse
import os
import os.path as osp
import shlex
import sys
import tempfile
from typing import List, Optional

_here = osp.dirname(osp.abspath(__file__))
sys.path[:] = [p for p in sys.path if osp.abspath(p or '.') != _here]

import torch  # noqa: E402

from ikgat.kernels.random_features import NODE_PATHS  # noqa: E402
from ikgat.uncertainty import (  # noqa: E402
    DEFAULT_RESULTS, DEFAULT_SUMMARY, METHODS, SETTINGS, UncertaintyConfig,
    read_rows, render_summary, run_uncertainty)


def tiny_loader(name: str):
    from ikgat.benchmarking import BenchData
    from ikgat.datasets import toy_citation_graph
    data = toy_citation_graph(num_nodes=60, num_classes=4, num_train=16,
                              num_val=16)
    return BenchData(name, data, data.num_features, 4)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    from ikgat.benchmarking import parse_seeds
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--datasets', nargs='+',
                        default=['Cora', 'CiteSeer', 'PubMed'])
    parser.add_argument('--methods', nargs='+', default=list(METHODS),
                        choices=METHODS)
    parser.add_argument('--settings', nargs='+', default=list(SETTINGS),
                        choices=SETTINGS)
    parser.add_argument('--seeds', type=parse_seeds, default='0-9',
                        help="e.g. '0-9' or '0,3,5'")
    parser.add_argument('--results', default=None,
                        help=f'CSV of rows (default: {DEFAULT_RESULTS}; '
                        f'a temporary folder with --smoke)')
    parser.add_argument('--summary', default=None,
                        help=f'Markdown summary (default: {DEFAULT_SUMMARY})')
    parser.add_argument('--resume', action='store_true',
                        help='skip the rows already in --results')
    parser.add_argument('--summary-only', action='store_true',
                        help='only rewrite the summary from --results')
    parser.add_argument('--smoke', action='store_true',
                        help='a tiny synthetic graph, a few epochs: seconds')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch CPU threads')
    parser.add_argument('--device', default='auto',
                        help="'cpu', 'cuda' or 'auto' (CUDA when available)")
    parser.add_argument('--node-path', default='eager', choices=NODE_PATHS,
                        help="how MIKAN's random features evaluate their "
                        "node-wise term: speed only (compile: torch.compile,"
                        " fastest on CPU)")
    parser.add_argument('--epochs', type=int, default=None,
                        help="override the protocol's maximum epochs")
    parser.add_argument('--patience', type=int, default=None,
                        help="override the protocol's patience")
    defaults = UncertaintyConfig()
    for name in ('mc_dropout_passes', 'mikan_num_samples',
                 'mikan_num_features', 'mikan_beta', 'kep_passes',
                 'kep_eta_ksvd', 'kep_beta'):
        value = getattr(defaults, name)
        parser.add_argument('--' + name.replace('_', '-'), type=type(value),
                            default=value)
    parser.add_argument('--mikan-output-magnitude', action='store_true',
                        help="keep MIKAN's magnitude term in the output "
                        "layer (the paper's model; under-confident)")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> List[dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    command = 'python benchmarks/uncertainty.py ' + ' '.join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
        if a != '--summary-only')
    load_dataset = None
    if args.smoke:
        folder = tempfile.mkdtemp(prefix='ikgat-uncertainty-')
        results = args.results or osp.join(folder, 'uncertainty.csv')
        summary = args.summary or osp.join(folder, 'uncertainty.md')
        datasets = ['Tiny']
        load_dataset = tiny_loader
        epochs = args.epochs or 8
        patience = args.patience or 4
        seeds = args.seeds if args.seeds != list(range(10)) else [0]
        config_kwargs = dict(mc_dropout_passes=3, mikan_num_samples=2,
                             mikan_num_features=8, kep_passes=2)
    else:
        results = args.results or DEFAULT_RESULTS
        summary = args.summary or DEFAULT_SUMMARY
        datasets, seeds = args.datasets, args.seeds
        epochs, patience = args.epochs, args.patience
        config_kwargs = dict(mc_dropout_passes=args.mc_dropout_passes,
                             mikan_num_samples=args.mikan_num_samples,
                             mikan_num_features=args.mikan_num_features,
                             kep_passes=args.kep_passes)
    config = UncertaintyConfig(
        mikan_beta=args.mikan_beta,
        mikan_output_magnitude=args.mikan_output_magnitude,
        kep_eta_ksvd=args.kep_eta_ksvd, kep_beta=args.kep_beta,
        epochs=epochs, patience=patience, node_path=args.node_path,
        **config_kwargs)
    rows: List[dict] = []
    if not args.summary_only:
        rows = run_uncertainty(datasets, args.methods, args.settings, seeds,
                               results=results, config=config,
                               resume=args.resume,
                               load_dataset=load_dataset,
                               ood_classes={'Tiny': 1} if args.smoke else
                               None, device=args.device)
    text = render_summary(read_rows(results), command=command)
    directory = osp.dirname(summary)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(summary, 'w') as f:
        f.write(text + '\n')
    print(f'{len(rows)} new rows in {results}; summary in {summary}')
    return rows


if __name__ == '__main__':
    main()
