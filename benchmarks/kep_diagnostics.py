r"""Where KEPGATConv's calibration comes from: how fast its logits grow and
how large its posterior noise is next to them (validation split only).

    IKGAT_DATA=../shared/data python -m benchmarks.kep_diagnostics \
        --dataset Cora --seeds 100 101

Part 1 trains GATConv, KEPGATConv, and KEPGATConv with its posterior-mean
read-out :math:`m` frozen at :math:`\Lambda` (its initial value), for a fixed
number of epochs (no early stopping), with the uncertainty benchmark's loss
and optimiser; every 25 epochs it records the validation NLL and accuracy and
the standard deviation of the logits over all nodes.

Part 2 trains GATConv and KEPGATConv as the uncertainty benchmark does (the
state of lowest validation NLL) and scores KEPGATConv's predictive rules on
the validation nodes: the posterior mean, logits averaged over 10 draws (the
benchmark's rule, the KEP-SVGP authors'), and probabilities averaged over 10
and over 50 draws, beside GATConv's max-softmax.  It also reports the
per-logit standard deviation of the draws against the spread of the mean
logits over nodes.

Writes ``benchmarks/results/kep_diagnostics_<dataset>.md``.
"""
import argparse
import os.path as osp
import shlex
import sys
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from benchmarks.harness.data import load_planetoid_data
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.registry import protocol_for
from benchmarks.harness.results import RESULTS_DIR, write_text
from benchmarks.harness.runtime import seed_everything
from benchmarks.uncertainty import (
    UncertaintyConfig,
    build,
    extra_loss,
    report,
    set_kep_samples,
    train,
)
from ikgat.nn.conv.kep_gat_conv import KEPGATConv
from ikgat.training import train_node_classifier, variational_adam

DEFAULT_OUTPUT = osp.join(RESULTS_DIR, 'kep_diagnostics_{dataset}.md')
VARIANTS = ('gat', 'kep', 'kep, m frozen')


def build_variant(variant: str, bench, protocol: Dict,
                  config: UncertaintyConfig) -> torch.nn.Module:
    model = build('gat-msp' if variant == 'gat' else 'kep',
                  bench.num_features, bench.num_classes, protocol, config)
    if variant == 'kep, m frozen':
        for module in model.modules():
            if isinstance(module, KEPGATConv):
                module.inducing_mean.requires_grad_(False)
    return model


def logit_curve(model: torch.nn.Module, data, protocol: Dict,
                regulariser: Optional[Callable[[], torch.Tensor]],
                epochs: int, every: int = 25) -> List[Dict[str, float]]:
    r"""Train for :obj:`epochs` epochs without early stopping; every
    :obj:`every` epochs, the validation NLL and accuracy of the
    deterministic model and the std of its logits over all nodes."""
    mask = data.val_mask
    points = []

    def record(epoch: int, out: torch.Tensor) -> None:
        if epoch % every == 0:
            points.append(dict(
                epoch=epoch,
                nll=float(F.cross_entropy(out[mask], data.y[mask])),
                acc=float((out[mask].argmax(-1) == data.y[mask]
                           ).float().mean()),
                logit_std=float(out.std())))

    # Frozen parameters get no gradient, and Adam leaves those alone.
    train_node_classifier(
        model, data, epochs=epochs, patience=None, extra_loss=regulariser,
        optimizer=variational_adam(model, protocol['lr'],
                                   protocol['weight_decay']),
        on_evaluate=record)
    return points


@torch.no_grad()
def predictive_rules(model: torch.nn.Module, data, seed: int,
                     draws: int = 50) -> Dict[str, Dict[str, float]]:
    r"""Validation metrics of KEPGATConv's predictive rules, and the noise
    of its draws against the spread of its mean logits."""
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    set_kep_samples(model, 1)
    try:
        logits = torch.stack([
            model(data.x, data.edge_index, generator=generator)
            for _ in range(draws)])
    finally:
        set_kep_samples(model, 0)
    mean = model(data.x, data.edge_index)
    rules = {
        'posterior mean': mean.softmax(-1),
        'logits averaged, 10 draws (benchmark)': logits[:10].mean(0).softmax(
            -1),
        'probabilities averaged, 10 draws': logits[:10].softmax(-1).mean(0),
        f'probabilities averaged, {draws} draws': logits.softmax(-1).mean(0),
    }
    rows = {name: report(probs, data.y, data.val_mask)
            for name, probs in rules.items()}
    noise = dict(noise_std=float(logits.std(0).mean()),
                 mean_logit_std=float(mean.std()))
    return dict(rows, noise=noise)


def render(dataset: str, seeds: List[int], epochs: int, curves: Dict,
           rules: Dict, command: str, commit: str) -> str:
    lines = [
        '# KEPGATConv diagnostics (validation split only)', '',
        f'Command: `{command}`', '',
        f'Code: ikgat commit {commit}; {dataset}, seeds '
        f'{", ".join(map(str, seeds))}; the uncertainty benchmark\'s '
        f'protocol and KEP settings ({UncertaintyConfig().label("kep")}).',
        '',
        f'## Logit growth: fixed {epochs} epochs, no early stopping', '',
        'Validation NLL / accuracy (%) / std of the logits over all nodes.',
        '']
    header = '| epoch | ' + ' | '.join(
        f'{variant} (seed {seed})' for seed in seeds
        for variant in VARIANTS) + ' |'
    lines += [header, '|---' * (1 + len(seeds) * len(VARIANTS)) + '|']
    first = curves[(seeds[0], VARIANTS[0])]
    for index, point in enumerate(first):
        cells = []
        for seed in seeds:
            for variant in VARIANTS:
                p = curves[(seed, variant)][index]
                cells.append(f"{p['nll']:.3f} / {100 * p['acc']:.1f} / "
                             f"{p['logit_std']:.2f}")
        lines.append(f"| {point['epoch']} | " + ' | '.join(cells) + ' |')
    lines += ['', '## Predictive rules of KEPGATConv at its lowest '
              'validation NLL (GATConv at its own)', '',
              '| seed | rule | acc % | AUROC % | ECE % | NLL |',
              '|---|---|---|---|---|---|']
    for seed in seeds:
        for name, row in rules[seed].items():
            if name == 'noise':
                continue
            lines.append(f"| {seed} | {name} | {100 * row['accuracy']:.1f} | "
                         f"{100 * row['auroc']:.1f} | {100 * row['ece']:.1f} |"
                         f" {row['nll']:.3f} |")
    lines += ['', '| seed | per-logit std of the draws (mean over nodes and '
              'classes) | std of the mean logits over nodes |',
              '|---|---|---|']
    for seed in seeds:
        noise = rules[seed]['noise']
        lines.append(f"| {seed} | {noise['noise_std']:.3f} | "
                     f"{noise['mean_logit_std']:.3f} |")
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--dataset', default='Cora')
    parser.add_argument('--seeds', type=int, nargs='+', default=[100, 101])
    parser.add_argument('--epochs', type=int, default=400)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--root', default=None)
    parser.add_argument('--output', default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    command = 'python -m benchmarks.kep_diagnostics ' + ' '.join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    commit = git_commit()  # the code that runs, before anything changes
    bench = load_planetoid_data(args.dataset, args.root)
    data, protocol = bench.data, protocol_for(bench.name)
    config = UncertaintyConfig()
    num_train = int(data.train_mask.sum())
    curves, rules = {}, {}
    for seed in args.seeds:
        for variant in VARIANTS:
            seed_everything(seed)
            model = build_variant(variant, bench, protocol, config)
            regulariser = (None if variant == 'gat' else
                           extra_loss('kep', model, config, num_train))
            curves[(seed, variant)] = logit_curve(model, data, protocol,
                                                  regulariser, args.epochs)
            print(f'seed {seed} {variant}: done', file=sys.stderr)
        seed_everything(seed)
        gat = train(build_variant('gat', bench, protocol, config), data,
                    protocol).model.eval()
        with torch.no_grad():
            gat_probs = gat(data.x, data.edge_index).softmax(-1)
        seed_everything(seed)
        model = build_variant('kep', bench, protocol, config)
        trained = train(model, data, protocol,
                        extra_loss('kep', model, config, num_train))
        rules[seed] = dict(
            {'GATConv, max-softmax': report(gat_probs, data.y,
                                            data.val_mask)},
            **predictive_rules(trained.model, data, seed))
    text = render(bench.name, args.seeds, args.epochs, curves, rules,
                  command, commit)
    output = args.output.format(dataset=bench.name)
    write_text(output, text)
    print(f'wrote {output}', file=sys.stderr)
    return text


if __name__ == '__main__':
    main()
