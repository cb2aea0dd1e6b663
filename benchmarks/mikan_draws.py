r"""How much MIKAN's Monte-Carlo draws of spectral points move its
predictions (validation split only).

    IKGAT_DATA=../shared/data python -m benchmarks.mikan_draws \
        --dataset Cora --seeds 100 101

Trains MIKAN as the uncertainty benchmark does (the state of lowest
validation NLL) and scores its predictive rules on the validation nodes:
the deterministic model (:math:`\tilde z = \mu`), the benchmark's rule
(``num_samples=10`` inside each layer: the attention weights of 10 draws
averaged), and the Monte-Carlo predictive distribution (one draw per forward
pass, probabilities averaged over 10 and 50 passes).  It reports the
per-logit standard deviation over the 50 passes against the spread of the
deterministic logits over nodes, after training and at initialisation.

Writes ``benchmarks/results/mikan_draws_<dataset>.md``.
"""
import argparse
import os.path as osp
import shlex
import sys
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional

import torch

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
    set_mikan_samples,
    train,
)
from ikgat.nn.conv.mikan_conv import MIKANConv

DEFAULT_OUTPUT = osp.join(RESULTS_DIR, 'mikan_draws_{dataset}.md')


@contextmanager
def one_draw_per_pass(model: torch.nn.Module) -> Iterator[None]:
    r"""In evaluation, make every MIKANConv draw its spectral points
    (one draw per forward pass) instead of using :math:`\tilde z = \mu`;
    dropout stays off."""
    convs = [m for m in model.modules() if isinstance(m, MIKANConv)]

    def drawing(prepare):
        def prepare_with_a_draw(*args, sample=False, **kwargs):
            return prepare(*args, sample=True, **kwargs)
        return prepare_with_a_draw

    for conv in convs:
        conv._prepare_kernel = drawing(conv._prepare_kernel)
    try:
        yield
    finally:
        for conv in convs:
            del conv._prepare_kernel  # back to the class's method


@torch.no_grad()
def draw_spread(model: torch.nn.Module, data, passes: int) -> torch.Tensor:
    r"""The logits of :obj:`passes` forward passes with one draw each,
    :math:`(S, N, K)`."""
    model.eval()
    with one_draw_per_pass(model):
        return torch.stack([model(data.x, data.edge_index)
                            for _ in range(passes)])


@torch.no_grad()
def predictive_rules(model: torch.nn.Module, data,
                     config: UncertaintyConfig, passes: int = 50
                     ) -> Dict[str, Dict[str, float]]:
    model.eval()
    deterministic = model(data.x, data.edge_index)
    set_mikan_samples(model, config.mikan_num_samples)
    try:
        in_layer = model(data.x, data.edge_index)
    finally:
        set_mikan_samples(model, 1)
    logits = draw_spread(model, data, passes)
    rules = {
        'deterministic (z = mu)': deterministic.softmax(-1),
        f'{config.mikan_num_samples} draws averaged in each layer '
        '(benchmark)': in_layer.softmax(-1),
        'probabilities averaged, 10 passes': logits[:10].softmax(-1).mean(0),
        f'probabilities averaged, {passes} passes':
        logits.softmax(-1).mean(0),
    }
    rows = {name: report(probs, data.y, data.val_mask)
            for name, probs in rules.items()}
    rows['spread'] = dict(draw_std=float(logits.std(0).mean()),
                          logit_std=float(deterministic.std()))
    return rows


def render(dataset: str, seeds: List[int], rules: Dict, initial: Dict,
           command: str, commit: str, config: UncertaintyConfig) -> str:
    lines = [
        '# MIKAN: how much its spectral draws move the predictions '
        '(validation split only)', '',
        f'Command: `{command}`', '',
        f'Code: ikgat commit {commit}; {dataset}, seeds '
        f'{", ".join(map(str, seeds))}; the uncertainty benchmark\'s MIKAN '
        f'({config.label("mikan")}).', '',
        '## Predictive rules at the lowest validation NLL', '',
        '| seed | rule | acc % | AUROC % | ECE % | NLL |',
        '|---|---|---|---|---|---|']
    for seed in seeds:
        for name, row in rules[seed].items():
            if name != 'spread':
                lines.append(
                    f"| {seed} | {name} | {100 * row['accuracy']:.1f} | "
                    f"{100 * row['auroc']:.1f} | {100 * row['ece']:.1f} | "
                    f"{row['nll']:.3f} |")
    lines += ['', '## Spread of the draws', '',
              '| seed | model | per-logit std over 50 passes (mean over nodes '
              'and classes) | std of the deterministic logits over nodes |',
              '|---|---|---|---|']
    for seed in seeds:
        for label, spread in (('initial', initial[seed]),
                              ('trained', rules[seed]['spread'])):
            lines.append(f"| {seed} | {label} | {spread['draw_std']:.4f} | "
                         f"{spread['logit_std']:.4f} |")
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--dataset', default='Cora')
    parser.add_argument('--seeds', type=int, nargs='+', default=[100, 101])
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--root', default=None)
    parser.add_argument('--output', default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    command = 'python -m benchmarks.mikan_draws ' + ' '.join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    commit = git_commit()  # the code that runs, before anything changes
    bench = load_planetoid_data(args.dataset, args.root)
    data, protocol = bench.data, protocol_for(bench.name)
    config = UncertaintyConfig()
    num_train = int(data.train_mask.sum())
    rules, initial = {}, {}
    for seed in args.seeds:
        seed_everything(seed)
        model = build('mikan', bench.num_features, bench.num_classes,
                      protocol, config)
        # Measured without moving the random stream, so that training is
        # the uncertainty benchmark's:
        rng = torch.random.get_rng_state()
        logits = draw_spread(model, data, 50)
        with torch.no_grad():
            deterministic = model.eval()(data.x, data.edge_index)
        torch.random.set_rng_state(rng)
        initial[seed] = dict(draw_std=float(logits.std(0).mean()),
                             logit_std=float(deterministic.std()))
        trained = train(model, data, protocol,
                        extra_loss('mikan', model, config, num_train))
        rules[seed] = predictive_rules(trained.model, data, config)
        print(f'seed {seed}: done', file=sys.stderr)
    text = render(bench.name, args.seeds, rules, initial, command, commit,
                  config)
    output = args.output.format(dataset=bench.name)
    write_text(output, text)
    print(f'wrote {output}', file=sys.stderr)
    return text


if __name__ == '__main__':
    main()
