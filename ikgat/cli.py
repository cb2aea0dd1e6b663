r"""The ``ikgat`` command line: ``ikgat train``, ``ikgat bench ...``,
``ikgat plot ...`` (and more subcommands)."""
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
    parser.add_argument('--save-checkpoint', metavar='PATH', default=None,
                        help='save the best-validation model, its settings '
                        'and a per-epoch log of the similarity and magnitude '
                        'terms (for `ikgat plot`) to PATH')
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
    recorder = None
    if args.save_checkpoint:
        from ikgat.visualization import AttentionTermsRecorder
        recorder = AttentionTermsRecorder(model, data.x, data.edge_index)
    result = train_node_classifier(model, data, lr=args.lr,
                                   weight_decay=args.weight_decay,
                                   epochs=args.epochs, patience=args.patience,
                                   keep_best_state=recorder is not None,
                                   on_epoch=recorder)
    print(f'{dataset.name} IKGAT(kernel={args.kernel}, p={args.p}) '
          f'seed={args.seed}: val acc {result.val_acc:.4f}, '
          f'test acc {result.test_acc:.4f} (best epoch {result.best_epoch} '
          f'of {result.epochs}, {result.seconds:.1f} s)')
    if recorder is not None:
        from ikgat.checkpoints import save_checkpoint
        save_checkpoint(
            args.save_checkpoint, model, dataset.name, conv_kwargs=dict(
                kernel=args.kernel, p=args.p,
                num_features=args.num_features), log=recorder.log,
            info=dict(val_acc=result.val_acc, test_acc=result.test_acc,
                      best_epoch=result.best_epoch, epochs=result.epochs,
                      seed=args.seed, lr=args.lr,
                      weight_decay=args.weight_decay),
            state_dict=result.state_dict)
        print(f'saved the best-validation model (epoch {result.best_epoch}) '
              f'to {args.save_checkpoint}')


PLOT_KINDS = {
    'tsne': 't-SNE of the spectral points per head against GAT\'s '
            'Gaussian spectral density',
    'copula': "MIKAN's copula correlation across heads",
    'heads': 'std of the attention weights across heads (one curve per '
             'checkpoint)',
    'sparsity': 'histograms and sparsity statistics of the attention '
                'weights (one panel per checkpoint, keyed by its p)',
    'terms': 'similarity and magnitude terms over the training epochs',
}


def add_plot_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        'plot', help='plot what a trained model learned, from checkpoints '
        'written by `ikgat train --save-checkpoint`',
        description='Kinds: ' + '; '.join(
            f'{kind}: {text}' for kind, text in PLOT_KINDS.items()))
    parser.add_argument('kind', choices=list(PLOT_KINDS))
    parser.add_argument('--checkpoint', action='append', required=True,
                        metavar='PATH',
                        help='a checkpoint; sparsity and heads take several '
                        '(repeat the option)')
    parser.add_argument('--out', required=True, metavar='FIG.png',
                        help='the PNG to write')
    parser.add_argument('--layer', default=None,
                        help='the layer to plot, e.g. conv1 (default: the '
                        'first one that applies)')
    parser.add_argument('--root', default=None,
                        help='folder holding Planetoid/<Name>/raw/ '
                        '(default: $IKGAT_DATA)')
    parser.set_defaults(run=run_plot)


def run_plot(args: argparse.Namespace) -> None:
    try:
        _plot(args)
    except (FileNotFoundError, TypeError, ValueError) as error:
        raise SystemExit(f'ikgat plot {args.kind}: {error}') from error


def _plot(args: argparse.Namespace) -> None:
    import os.path as osp

    from ikgat import visualization as viz
    from ikgat.checkpoints import load_checkpoint

    kind, paths = args.kind, args.checkpoint
    if kind not in ('sparsity', 'heads') and len(paths) != 1:
        raise SystemExit(f'ikgat plot {kind} takes one --checkpoint '
                         f'(got {len(paths)})')
    checkpoints = [load_checkpoint(path) for path in paths]
    first = checkpoints[0]
    if kind == 'terms':
        if not first.log:
            raise SystemExit(f'{paths[0]} has no training log; write it with '
                             f'`ikgat train --save-checkpoint`')
        viz.plot_terms(first.log, path=args.out,
                       layers=None if args.layer is None else [args.layer])
    elif kind == 'copula':
        if first.layer != 'MIKANConv':
            raise SystemExit(f'{paths[0]} holds a {first.layer} model; only '
                             f'MIKANConv learns a copula correlation')
        viz.plot_copula_correlation(first.model, layer=args.layer,
                                    path=args.out)
    else:
        graphs = {}

        def graph_of(checkpoint):
            key = (checkpoint.dataset, checkpoint.normalize_features)
            if key not in graphs:
                graphs[key] = checkpoint.load_dataset(args.root)[0]
            return graphs[key]

        if kind == 'tsne':
            data = graph_of(first)
            viz.plot_spectral_tsne(first.model, layer=args.layer, x=data.x,
                                   edge_index=data.edge_index, path=args.out)
        else:
            labels = _checkpoint_labels(paths, checkpoints,
                                        numeric=kind == 'sparsity')
            if kind == 'heads':
                models = {label: checkpoint.model for label, checkpoint in
                          zip(labels, checkpoints)}
                data = graph_of(first)
                viz.plot_head_attention_std(models, data.x, data.edge_index,
                                            layer=args.layer, path=args.out)
            else:
                attention = {}
                for label, checkpoint in zip(labels, checkpoints):
                    data = graph_of(checkpoint)
                    name = viz.attention_layers(checkpoint.model,
                                                args.layer)[0][0]
                    attention[label] = viz.layer_decompositions(
                        checkpoint.model, data.x, data.edge_index,
                        name)[name]
                viz.plot_sparsity(attention, path=args.out)
    print(f'wrote {osp.abspath(args.out)}')


def _checkpoint_labels(paths, checkpoints, numeric: bool) -> list:
    r"""One label per checkpoint: its p (a number if :obj:`numeric`) when
    every checkpoint has a distinct p, else its layer and kernel when those
    differ, else its file name."""
    import os.path as osp

    ps = [checkpoint.conv_kwargs.get('p') for checkpoint in checkpoints]
    names = []
    for checkpoint in checkpoints:
        kernel = checkpoint.conv_kwargs.get('kernel')
        names.append(checkpoint.layer + (f'({kernel})' if kernel else ''))
    distinct_p = None not in ps and len(set(ps)) == len(ps)
    if numeric and distinct_p:
        return [float(p) for p in ps]
    if len(set(names)) == len(names):
        return names
    if distinct_p:
        return [f'{name} p={float(p):g}' for name, p in zip(names, ps)]
    return [osp.basename(path) for path in paths]


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog='ikgat', description=__doc__)
    subparsers = parser.add_subparsers(required=True, dest='command')
    add_train_parser(subparsers)
    add_bench_parser(subparsers)
    add_plot_parser(subparsers)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == '__main__':
    main()
