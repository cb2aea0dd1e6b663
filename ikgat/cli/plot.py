r"""``ikgat plot``: the figures of :mod:`ikgat.inspection.figures` drawn from
checkpoints written by ``ikgat train --save-checkpoint``, each checkpoint
first checked for what the figure draws."""
import argparse

import torch

from ikgat.atomic_writes import check_writable
from ikgat.cli.arguments import CommandError, user_input

#: The figures of ``ikgat plot --kind``, with what each shows.
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


#: What each plot kind draws from a model, the layers that have it and
#: the ``ikgat train`` options that make such a checkpoint.
PLOT_NEEDS = {
    'tsne': ('spectral points', 'MIKANConv, MIKANTransformerConv, or '
             'IKGATConv or IKTransformerConv with the kernel rff, rff_ns, '
             'direct or implicit', '--layer mikan'),
    'copula': ('a copula correlation', 'MIKANConv and '
               'MIKANTransformerConv', '--layer mikan'),
    'heads': ('attention weights', 'GATConv and every ikgat layer',
              '--layer ikgat'),
    'sparsity': ('attention weights', 'GATConv and every ikgat layer',
                 '--layer ikgat'),
    'terms': ('similarity and magnitude terms', 'IKGATConv, MIKANConv, '
              'IKTransformerConv and MIKANTransformerConv', '--layer ikgat'),
}


#: The transformer form of a ``PLOT_NEEDS`` command, suggested for a
#: checkpoint of a transformer layer.
TRANSFORMER_OPTIONS = {'--layer ikgat': '--layer transformer',
                       '--layer mikan': '--layer mikan-transformer'}
TRANSFORMER_LAYERS = ('IKTransformerConv', 'MIKANTransformerConv',
                      'TransformerConv')


def _has_what_it_draws(kind: str, model: torch.nn.Module) -> bool:
    r"""Whether :obj:`model` has a layer with what ``ikgat plot``
    :obj:`kind` draws (:data:`PLOT_NEEDS`), read from the kernels'
    declared capabilities."""
    from ikgat.inspection.capture import (
        COPULA_LAYERS,
        KERNEL_LAYERS,
        weighting_layers,
    )
    if kind in ('heads', 'sparsity'):
        return bool(weighting_layers(model))
    wanted = COPULA_LAYERS if kind == 'copula' else KERNEL_LAYERS
    return any(isinstance(module, wanted) and (
        kind != 'tsne' or module.kernel.has_spectral_points)
        for module in model.modules())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Add the options of ``ikgat plot`` to :obj:`parser`."""
    parser.description = 'Kinds: ' + '; '.join(
        f'{kind}: {text}' for kind, text in PLOT_KINDS.items())
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
    r"""``ikgat plot``: draw the figure of ``--kind`` from checkpoints
    into ``--out``."""
    with user_input('--out: '):
        check_writable(args.out)
    with user_input():
        _plot(args)


def _plot(args: argparse.Namespace) -> None:
    import os.path as osp

    from ikgat.inspection import figures as viz
    from ikgat.inspection.capture import attention_weights
    from ikgat.training.checkpoints import load_checkpoint

    kind, paths = args.kind, args.checkpoint
    if kind not in ('sparsity', 'heads') and len(paths) != 1:
        raise CommandError(f'ikgat plot {kind} takes one --checkpoint '
                           f'(got {len(paths)})')
    checkpoints = [load_checkpoint(path) for path in paths]
    for path, checkpoint in zip(paths, checkpoints):
        if not _has_what_it_draws(kind, checkpoint.model):
            what, layers, options = PLOT_NEEDS[kind]
            if checkpoint.layer in TRANSFORMER_LAYERS:  # same family
                options = TRANSFORMER_OPTIONS.get(options, options)
            held = checkpoint.layer + (
                f'(kernel={checkpoint.conv_kwargs["kernel"]})'
                if 'kernel' in checkpoint.conv_kwargs else '')
            raise CommandError(
                f'ikgat plot {kind} draws {what}, found in {layers}; the '
                f'{held} model of {path} has none; make a checkpoint with '
                f'`ikgat train {options} --save-checkpoint PATH`')
    first = checkpoints[0]
    if kind == 'terms':
        if not first.log:
            raise CommandError(f'{paths[0]} has no training log; write it '
                               f'with `ikgat train --save-checkpoint`')
        viz.plot_terms(first.log, path=args.out,
                       layers=None if args.layer is None else [args.layer])
    elif kind == 'copula':
        viz.plot_copula_correlation(first.model, layer=args.layer,
                                    path=args.out)
    else:
        graphs = {}

        def graph_of(checkpoint):
            key = (checkpoint.dataset, checkpoint.normalize_features)
            if key not in graphs:
                graphs[key] = checkpoint.load_dataset(args.root).data
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
                    _, alpha, edges = attention_weights(
                        checkpoint.model, data.x, data.edge_index,
                        args.layer)
                    attention[label] = (alpha, edges[1])
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
