r"""``ikgat tune``: search one layer's options on one dataset by validation
score in a resumable Optuna study (:mod:`ikgat.training.tuning`), and write
the best configuration for ``ikgat train --config``."""
import argparse
import os
import time

import torch
from tqdm.auto import tqdm

from ikgat.atomic_writes import check_writable
from ikgat.cli.arguments import (
    CommandError,
    add_dataset_arguments,
    positive_float,
    positive_int,
    user_input,
)
from ikgat.data import load_dataset
from ikgat.training.configuration import write_config
from ikgat.training.distributed import init_from_environment
from ikgat.training.layer_recipes import TRAIN_LAYERS
from ikgat.training.search_space import LAYER_SEARCH, SHARED_OPTIONS
from ikgat.training.tuning import OPTUNA_HELP, sqlite_file

#: Trials a study reaches when neither --trials nor --timeout is given.
DEFAULT_TRIALS = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    r"""Add the options of ``ikgat tune`` to :obj:`parser`."""
    add_dataset_arguments(parser)
    parser.add_argument('--layer', default='ikgat',
                        choices=list(TRAIN_LAYERS),
                        help='the layer whose options are searched '
                        '(default: ikgat)')
    options = {**LAYER_SEARCH, **SHARED_OPTIONS}
    defaults = ', '.join(f'{name}={option.default.describe()}'
                         for name, option in options.items()
                         if option.by_default)
    asked = ', '.join(f'{name} ({option.default.describe()})'
                      for name, option in options.items()
                      if not option.by_default)
    parser.add_argument('--search', action='append', default=[],
                        metavar='NAME=SPEC',
                        help='the values of one option: low:high, '
                        'low:high:log, a,b,c or one value; repeat for '
                        'several (default, for the options the layer '
                        f'takes: {defaults}; searched only when named: '
                        f'{asked}, the random-feature kernels\' floor, '
                        'left out of a trial whose kernel has none)')
    parser.add_argument('--storage', default='sqlite:///study.db',
                        help='the database of the study; a run with the '
                        'same storage and --study-name resumes it '
                        '(default: sqlite:///study.db)')
    parser.add_argument('--study-name', default='ikgat-tune',
                        help='(default: ikgat-tune)')
    parser.add_argument('--trials', type=positive_int, default=None,
                        help='finished trials the study reaches, those of '
                        f'earlier runs included (default: {DEFAULT_TRIALS} '
                        'without --timeout)')
    parser.add_argument('--timeout', type=positive_float, default=None,
                        metavar='SECONDS',
                        help='start no trial after this long')
    parser.add_argument('--out', default='best.json', metavar='BEST.json',
                        help='where the best configuration is written, '
                        'after every better trial (default: best.json)')
    parser.add_argument('--top', type=positive_int, default=5,
                        help='rows of the table of the best trials '
                        '(default: 5)')
    parser.add_argument('--heads', type=positive_int, default=8,
                        help='heads of the first layer (default: 8)')
    parser.add_argument('--epochs', type=positive_int, default=1000,
                        help='the most epochs of a trial (default: 1000)')
    parser.add_argument('--patience', type=positive_int, default=100,
                        help='early stopping of a trial (default: 100)')
    parser.add_argument('--device', default='cpu', choices=['cpu', 'cuda'])
    parser.add_argument('--threads', type=positive_int, default=None,
                        help='CPU threads of PyTorch (default: its own '
                        'choice)')
    parser.add_argument('--no-progress', dest='progress',
                        action='store_false', default=None,
                        help='no progress bar (it shows only on a terminal '
                        'anyway)')
    parser.set_defaults(run=run_tune)


def check_storage(storage: str) -> None:
    r"""Raise an :class:`OSError` naming :obj:`storage` when its SQLite
    file cannot be written."""
    path = sqlite_file(storage)
    if path is None:
        return
    path = check_writable(path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise PermissionError(f'{path} is not writable; choose another '
                              f'--storage')


def run_tune(args: argparse.Namespace) -> None:
    r"""``ikgat tune``: check every input, open (or resume) the study, run
    trials until it has ``--trials`` finished ones or ``--timeout`` passes,
    then print the best trials and write the best configuration."""
    try:
        from ikgat.training import tuning
        tuning.require_optuna()
    except ImportError:
        raise CommandError(OPTUNA_HELP) from None
    from optuna.trial import TrialState

    with user_input():
        from ikgat.training.search_space import parse_search
        space = parse_search(args.layer, args.search)
    with user_input('--out: '):
        check_writable(args.out)
    with user_input(f'--storage {args.storage}: '):
        check_storage(args.storage)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    with user_input('--device: '):
        device = init_from_environment(args.device)
    with user_input():
        dataset = load_dataset(args.dataset, args.root)
        dataset.split(args.split)
    identity = tuning.identity(dataset.name, args.layer, args.split, space)
    with user_input():
        study = tuning.open_study(args.storage, args.study_name, identity,
                                  seed=len(_all_trials(args)),
                                  warmup_epochs=args.patience)
    done = len(tuning.finished_trials(study))
    trials = args.trials
    if trials is None and args.timeout is None:
        trials = DEFAULT_TRIALS
    remaining = None if trials is None else max(trials - done, 0)
    score = dataset.score.name
    print(f'ikgat tune: {args.layer} on {dataset.name} (split '
          f'{args.split}) by validation {score}; study {args.study_name!r} '
          f'in {args.storage}: {done} finished trial(s)'
          + (f', {remaining} to run' if remaining is not None else '')
          + (f', for at most {args.timeout:g} s' if args.timeout else ''),
          flush=True)
    objective = tuning.Objective(dataset, dataset.split(args.split),
                                 args.layer, space,
                                 args.heads, args.epochs, args.patience,
                                 device)
    bar = tqdm(total=remaining, unit='trial', dynamic_ncols=True,
               disable=None if args.progress is None else not args.progress)
    started = [time.perf_counter()]

    def after_trial(study, trial) -> None:
        seconds = time.perf_counter() - started[0]
        started[0] = time.perf_counter()
        bar.update()
        options = ' '.join(f'{name}={_short(value)}'
                            for name, value in trial.params.items())
        if trial.state == TrialState.COMPLETE:
            outcome = (f'validation {score} {trial.value:.4f} (best epoch '
                       f'{trial.user_attrs.get("best_epoch")})')
            if study.best_trial.number == trial.number:
                write_config(args.out, tuning.best_config(study, args.heads))
                outcome += ', best so far'
        elif trial.state == TrialState.PRUNED:
            outcome = (f'pruned at epoch {trial.last_step} (validation '
                       f'{score} '
                       f'{trial.intermediate_values[trial.last_step]:.4f})')
        else:
            outcome = trial.state.name.lower()
        tqdm.write(f'trial {trial.number}: {outcome} in {seconds:.1f} s: '
                   f'{options}')

    if remaining != 0:
        study.optimize(objective, n_trials=remaining, timeout=args.timeout,
                       callbacks=[after_trial], gc_after_trial=False)
    bar.close()
    complete = study.get_trials(deepcopy=False,
                                states=(TrialState.COMPLETE, ))
    if not complete:
        raise CommandError(f'the study {args.study_name!r} has no complete '
                           f'trial yet; run more with --trials or --timeout')
    print(best_trials_table(complete, args.top, score))
    write_config(args.out, tuning.best_config(study, args.heads))
    best = study.best_trial
    print(f'best: trial {best.number}, validation {score} '
          f'{best.value:.4f}; its configuration is in {args.out}: train it '
          f'with `ikgat train --config {args.out}`')


def _all_trials(args: argparse.Namespace) -> list:
    # The sampler's seed follows the study's size, so that a resumed study
    # does not draw its first proposals again.
    import optuna
    try:
        return optuna.load_study(study_name=args.study_name,
                                 storage=args.storage).trials
    except KeyError:  # no such study yet
        return []


def best_trials_table(trials: list, top: int, score: str) -> str:
    r"""The :obj:`top` best of the complete :obj:`trials` as a text
    table: trial, validation score, best epoch and the options."""
    ranked = sorted(trials, key=lambda trial: -trial.value)[:top]
    names = list(ranked[0].params)
    header = ['trial', f'val {score}', 'epoch'] + names
    rows = [[str(trial.number), f'{trial.value:.4f}',
             str(trial.user_attrs.get('best_epoch', ''))]
            + [_short(trial.params.get(name)) for name in names]
            for trial in ranked]
    widths = [max(len(row[i]) for row in [header] + rows)
              for i in range(len(header))]
    lines = ['  '.join(cell.rjust(width) for cell, width in zip(row, widths))
             for row in [header] + rows]
    return '\n'.join([f'the {len(ranked)} best trial(s):'] + lines)


def _short(value) -> str:
    return f'{value:.4g}' if isinstance(value, float) else str(value)
