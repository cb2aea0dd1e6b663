r"""The ``ikgat`` command line: ``ikgat train``, ``ikgat bench ...`` (and more
subcommands)."""
import argparse
from typing import List, Optional

import torch
import torch_geometric.transforms as T

from ikgat.benchmarking import add_bench_parser
from ikgat.datasets import load_planetoid
from ikgat.kernels import KERNELS
from ikgat.models import TwoLayerGAT
from ikgat.nn import IKGATConv
from ikgat.training import train_node_classifier


def add_train_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        'train', help='train a 2-layer IKGAT on a Planetoid dataset and '
        'print its test accuracy')
    parser.add_argument('--dataset', default='Cora')
    parser.add_argument('--root', default=None,
                        help='folder holding Planetoid/<Name>/raw/ '
                        '(default: $IKGAT_DATA)')
    parser.add_argument('--kernel', default='direct', choices=sorted(KERNELS))
    parser.add_argument('--p', type=float, default=2.0)
    parser.add_argument('--num-features', type=int, default=64)
    parser.add_argument('--hidden', type=int, default=8)
    parser.add_argument('--heads', type=int, default=8)
    parser.add_argument('--dropout', type=float, default=0.6)
    parser.add_argument('--lr', type=float, default=0.005)
    parser.add_argument('--weight-decay', type=float, default=5e-4)
    parser.add_argument('--epochs', type=int, default=1000)
    parser.add_argument('--patience', type=int, default=100)
    parser.add_argument('--seed', type=int, default=0)
    parser.set_defaults(run=run_train)


def run_train(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    dataset = load_planetoid(args.dataset, args.root,
                             transform=T.NormalizeFeatures())
    data = dataset[0]
    model = TwoLayerGAT(
        dataset.num_features, args.hidden, dataset.num_classes, IKGATConv,
        heads=args.heads, dropout=args.dropout, conv_kwargs=dict(
            kernel=args.kernel, p=args.p, num_features=args.num_features))
    result = train_node_classifier(model, data, lr=args.lr,
                                   weight_decay=args.weight_decay,
                                   epochs=args.epochs, patience=args.patience)
    print(f'{dataset.name} IKGAT(kernel={args.kernel}, p={args.p}) '
          f'seed={args.seed}: val acc {result.val_acc:.4f}, '
          f'test acc {result.test_acc:.4f} (best epoch {result.best_epoch} '
          f'of {result.epochs}, {result.seconds:.1f} s)')


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='ikgat', description=__doc__)
    subparsers = parser.add_subparsers(required=True, dest='command')
    add_train_parser(subparsers)
    add_bench_parser(subparsers)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == '__main__':
    main()
