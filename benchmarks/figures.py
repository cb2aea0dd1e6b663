r"""The committed figures of ``benchmarks/results/figures/``, from models
trained on Cora here (the IKA paper's Figs. 3, 4 and 5).

Trains, with the GAT protocol of :mod:`benchmarks.harness.registry`
(8 heads × 8,
dropout 0.6, Adam lr 0.005, weight decay 5e-4, patience 100, row-normalised
features, public split) but fewer epochs than the benchmark:

* IKAN-direct (``kernel='direct'``) for every :math:`p` of ``--ps``, each
  with an :class:`~ikgat.inspection.AttentionTermsRecorder`;
* MIKAN at :math:`p = 2` with KL weight :math:`\beta` = ``--beta``;

keeps each run's best-validation weights, saves them as checkpoints that
``ikgat plot`` reads, and writes

* ``spectral_tsne.png`` (Fig. 5a/b), ``copula_correlation.png`` (5c),
  ``head_attention_std.png`` (5d), ``sparsity_vs_p.png`` (Fig. 4),
  ``terms.png`` (Fig. 3),
* ``README.md``: captions with the settings, accuracies and the command.

Run from the repository root (about 12 minutes on one CPU thread)::

    IKGAT_DATA=../shared/data python -m benchmarks.figures
"""
import argparse
import os
import os.path as osp
import platform
import sys
import time
from typing import Any, Dict, List, Optional

import torch

from benchmarks.harness.data import load_planetoid_data
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.registry import (
    build_model,
    conv_factory,
    model_hyperparameters,
    protocol_for,
)
from benchmarks.harness.results import RESULTS_DIR
from benchmarks.harness.runtime import seed_everything
from ikgat import inspection as viz
from ikgat.training import train_node_classifier
from ikgat.training.checkpoints import load_checkpoint, save_checkpoint

OUT_DIR = osp.join(RESULTS_DIR, 'figures')
CHECKPOINT_DIR = osp.join('checkpoints', 'figures')
LABELS = {'ikan-direct': 'IKAN-direct', 'mikan': 'MIKAN'}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--dataset', default='Cora')
    parser.add_argument('--root', default=None,
                        help='folder holding Planetoid/<Name>/raw/ '
                        '(default: $IKGAT_DATA)')
    parser.add_argument('--epochs', type=int, default=200)
    parser.add_argument('--patience', type=int, default=100)
    parser.add_argument('--R', type=int, default=64,
                        help='spectral points per head')
    parser.add_argument('--ps', type=float, nargs='+',
                        default=[1.0, 1.5, 2.0, 3.0],
                        help='the p of the IKAN-direct sweep (2 is needed '
                        'for the t-SNE, heads and terms figures)')
    parser.add_argument('--beta', type=float, default=0.1,
                        help="MIKAN's KL weight")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--out', default=OUT_DIR)
    parser.add_argument('--checkpoints', default=CHECKPOINT_DIR,
                        help='where the trained models are saved (git '
                        'ignores checkpoints/)')
    parser.add_argument('--reuse-checkpoints', action='store_true',
                        help='load the models from --checkpoints instead of '
                        'training (to redraw the figures)')
    args = parser.parse_args(argv)
    if 2.0 not in args.ps:
        parser.error('--ps must contain 2.0 (the t-SNE, heads and terms '
                     'figures use the p = 2 model)')
    return args


def checkpoint_path(args, model: str, p: float) -> str:
    return osp.join(args.checkpoints, f'{args.dataset.lower()}_{model}_'
                    f'p{p:g}_R{args.R}_seed{args.seed}.pt')


def train_or_load(args, bench, model: str, p: float) -> Dict[str, Any]:
    r"""Train :obj:`model` (or load its checkpoint) and return the model in
    evaluation mode, its terms log and its accuracies."""
    path = checkpoint_path(args, model, p)
    if args.reuse_checkpoints and osp.isfile(path):
        checkpoint = load_checkpoint(path)
        print(f'loaded {path}', flush=True)
        return dict(model=checkpoint.model, log=checkpoint.log,
                    path=path, **checkpoint.info)
    protocol = protocol_for(bench.name, epochs=args.epochs,
                            patience=args.patience)
    hyper = model_hyperparameters(model, p=p, R=args.R, beta=args.beta)
    seed_everything(args.seed)
    net = build_model(model, bench.num_features, bench.num_classes,
                      protocol, p=hyper['p'], R=hyper['R'])
    data = bench.data
    recorder = viz.AttentionTermsRecorder(net, data.x, data.edge_index)
    result = train_node_classifier(
        net, data, lr=protocol['lr'], weight_decay=protocol['weight_decay'],
        epochs=protocol['epochs'], patience=protocol['patience'],
        beta=float(hyper['beta'] or 0.0), keep_best_state=True,
        on_epoch=recorder)
    net.load_state_dict(result.state_dict)
    net.eval()
    info = dict(val_acc=result.val_acc, test_acc=result.test_acc,
                best_epoch=result.best_epoch, epochs=result.epochs,
                seconds=result.seconds, seed=args.seed,
                git_commit=git_commit(),
                beta=hyper['beta'], lr=protocol['lr'],
                weight_decay=protocol['weight_decay'])
    _, conv_kwargs = conv_factory(model, p=hyper['p'], R=hyper['R'])
    save_checkpoint(path, net, bench.name, conv_kwargs=conv_kwargs,
                    log=recorder.log, info=info)
    print(f'{LABELS[model]} p={p:g}: val {result.val_acc:.4f}, test '
          f'{result.test_acc:.4f}, best epoch {result.best_epoch} of '
          f'{result.epochs}, {result.seconds:.0f} s -> {path}', flush=True)
    return dict(model=net, log=recorder.log, path=path, **info)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    bench = load_planetoid_data(args.dataset, args.root)
    data = bench.data

    direct = {p: train_or_load(args, bench, 'ikan-direct', p)
              for p in sorted(args.ps)}
    mikan = train_or_load(args, bench, 'mikan', 2.0)

    os.makedirs(args.out, exist_ok=True)
    out = lambda name: osp.join(args.out, name)  # noqa: E731
    pair = {'IKAN-direct': direct[2.0]['model'], 'MIKAN': mikan['model']}

    # Fig. 5a/b: both models side by side.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(13.0, 5.6), layout='constrained')
    FigureCanvasAgg(fig)
    for ax, (label, model) in zip(fig.subplots(1, 2), pair.items()):
        viz.plot_spectral_tsne(model, 'conv1', x=data.x,
                               edge_index=data.edge_index, ax=ax,
                               seed=args.seed,
                               title=f'{label}: spectral points of conv1')
    fig.suptitle(f'{bench.name}: t-SNE of the learned spectral points per '
                 f'head against N(0, I/2) (GAT)')
    fig.savefig(out('spectral_tsne.png'), dpi=150)

    viz.plot_copula_correlation(
        mikan['model'], 'conv1', path=out('copula_correlation.png'),
        title=f'MIKAN on {bench.name}: copula correlation (conv1)')
    viz.plot_head_attention_std(
        pair, data.x, data.edge_index, 'conv1',
        path=out('head_attention_std.png'),
        title=f'{bench.name}, conv1: std of attention weights across heads')
    attention = {
        p: viz.layer_decompositions(run['model'], data.x, data.edge_index,
                                    'conv1')['conv1']
        for p, run in direct.items()
    }
    viz.plot_sparsity(attention, path=out('sparsity_vs_p.png'),
                      title=f'IKAN-direct on {bench.name}: attention weights '
                      f'of conv1 against p')
    viz.plot_terms({'IKAN-direct': direct[2.0]['log'],
                    'MIKAN': mikan['log']}, path=out('terms.png'),
                   title=f'{bench.name}, p = 2: similarity and magnitude '
                   f'terms during training')
    stats = {p: viz.sparsity_statistics(a.alpha, a.edge_index[1])
             for p, a in attention.items()}
    with torch.no_grad():
        correlation = mikan['model'].conv1.copula_correlation()
        off_diagonal = float((correlation - torch.eye(
            correlation.size(0))).abs().max())
    train_seconds = sum(float(run.get('seconds', 0.0)) for run in
                        list(direct.values()) + [mikan])
    total = None if args.reuse_checkpoints else time.perf_counter() - start
    write_readme(args, bench.name, direct, mikan, stats, off_diagonal,
                 train_seconds, total, argv)
    print(f'figures in {args.out} ({time.perf_counter() - start:.0f} s)')


def _command(argv) -> str:
    arguments = sys.argv[1:] if argv is None else list(argv)
    arguments = [a for a in arguments if a != '--reuse-checkpoints']
    return ' '.join(['IKGAT_DATA=../shared/data', 'python', '-m',
                     'benchmarks.figures'] + arguments)


def write_readme(args, dataset: str, direct: Dict[float, Dict[str, Any]],
                 mikan: Dict[str, Any], stats, off_diagonal: float,
                 train_seconds: float,
                 total_seconds: Optional[float], argv) -> None:
    rows: List[str] = []
    for p, run in direct.items():
        s = stats[p]
        rows.append(f'| IKAN-direct | {p:g} | {run["val_acc"]:.3f} | '
                    f'{run["test_acc"]:.3f} | {run["best_epoch"]} / '
                    f'{run["epochs"]} | {s.entropy:.3f} | '
                    f'{100 * s.share_above:.1f}% | '
                    f'{100 * s.share_below:.1f}% |')
    rows.append(f'| MIKAN (β = {args.beta:g}) | 2 | {mikan["val_acc"]:.3f} '
                f'| {mikan["test_acc"]:.3f} | {mikan["best_epoch"]} / '
                f'{mikan["epochs"]} | | | |')
    settings = (f'{dataset} public split, GAT protocol (8 heads × 8, dropout '
                f'0.6, Adam lr 0.005, weight decay 5e-4, row-normalised '
                f'features) with at most {args.epochs} epochs (patience '
                f'{args.patience}), R = {args.R} spectral points per head, '
                f'seed {args.seed}, best-validation weights')
    runs = list(direct.values()) + [mikan]
    trained_at = sorted({str(run.get('git_commit', 'not recorded'))
                         for run in runs})
    timing = (f'the {len(direct) + 1} trainings took '
              f'{train_seconds / 60:.1f} min')
    if total_seconds is not None:
        timing += f', the whole script {total_seconds / 60:.1f} min'
    else:
        timing += (' (the figures were then redrawn from the saved '
                   'checkpoints with `--reuse-checkpoints`)')
    header = ('| model | p | val acc | test acc | best epoch / epochs '
              '| entropy (conv1) | α > 0.9 | α < 0.01 |')
    text = f'''# Figures from trained models

Written by `benchmarks/figures.py`; every figure comes from models trained on
{dataset} by that script. Command (from the repository root, {args.threads}
CPU thread(s); {timing}):

```bash
{_command(argv)}
```

Settings: {settings}. These are short trainings, a single seed each: the
accuracies below describe the plotted models, they are not the benchmark
(see `python -m benchmarks.planetoid`). Machine: {platform.machine()},
torch {torch.__version__};
models trained at ikgat commit {', '.join(trained_at)}, figures drawn at
{git_commit()}.

{header}
|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}

Uniform attention over the same edges (self-loops included) has entropy
{stats[min(stats)].uniform_entropy:.3f} nats, the mean log in-degree.

The models are saved in `{args.checkpoints}/` (not committed); each figure can
be redrawn from them with `ikgat plot`, e.g.
`ikgat plot tsne --checkpoint {checkpoint_path(args, 'mikan', 2.0)} --out tsne.png`.
Without this script, `ikgat train --layer mikan --save-checkpoint mikan.pt`
makes such a model, and `ikgat plot copula --checkpoint mikan.pt --out
copula.png` (or `tsne`, `heads`, `sparsity`, `terms`) draws its figures.

## `spectral_tsne.png` — spectral points (IKA paper, Fig. 5a/b)

![t-SNE of spectral points](spectral_tsne.png)

t-SNE of the first layer's spectral points ($w_1$ and $w_2$ sets, {args.R}
each per head), coloured by head, against {2 * args.R} samples of GAT's
implicit spectral density N(0, I/2) (grey crosses): IKAN-direct (p = 2, left)
and MIKAN (p = 2, evaluation mode, z = μ, right).

## `copula_correlation.png` — MIKAN's copula (Fig. 5c)

![copula correlation](copula_correlation.png)

The learned correlation matrix LLᵀ across the 8 heads of MIKAN's first layer
(largest off-diagonal magnitude: {off_diagonal:.3g}).

## `head_attention_std.png` — heads (Fig. 5d)

![std of attention across heads](head_attention_std.png)

Per edge of {dataset} (self-loops included), the standard deviation of the
first layer's attention weights across its 8 heads, for IKAN-direct and MIKAN
(p = 2); the legend gives the mean over edges.

## `sparsity_vs_p.png` — sparsity against p (Fig. 4)

![sparsity against p](sparsity_vs_p.png)

Histograms (log counts) of the first layer's attention weights (edges × heads)
of IKAN-direct trained with p ∈ {{{', '.join(f'{p:g}' for p in direct)}}},
with the mean entropy of each node's attention (nats) and the shares of
weights above 0.9 and below 0.01; the last panel plots them against p.

## `terms.png` — similarity against magnitude (Fig. 3)

![similarity and magnitude terms](terms.png)

Recorded after every training epoch by `AttentionTermsRecorder` (evaluation
mode, full graph), for both layers of IKAN-direct and MIKAN (p = 2). Top: the
mean of the log-similarity and log-magnitude terms over edges and heads (the
magnitude includes ½‖q_i‖ₚ², constant over each node's edges). Bottom: their
standard deviation within each node's incoming edges, averaged over nodes and
heads, i.e. how much each term moves the attention weights.
'''
    with open(osp.join(args.out, 'README.md'), 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
