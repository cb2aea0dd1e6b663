r"""The accuracy tables from tuned configurations: each layer's options
searched by validation score with the same trial budget
(:mod:`ikgat.training.tuning`, the search of ``ikgat tune``), the best
configuration evaluated on seeds (Planetoid) or fixed splits
(heterophilous graphs) that the search never used, and each layer compared
with its PyG baseline on the same seeds or splits, paired.

    # the studies, resumable (a killed run loses the trial in flight only):
    python -m benchmarks.tuned study --datasets Cora \
        --models gat ikgat-direct ikgat-implicit mikan --trials 20 --threads 1
    # each best configuration on the evaluation seeds, one CSV row a run:
    python -m benchmarks.tuned evaluate --datasets Cora \
        --models gat ikgat-direct ikgat-implicit mikan --threads 1
    # benchmarks/results/tuned/tuned.md from the rows:
    python -m benchmarks.tuned summary

Files, under ``benchmarks/results/tuned/``: ``studies.log`` (the Optuna
studies, one journal of text lines, one study per dataset and model),
``configs/<dataset>-<model>.json`` (each study's best configuration, for
``ikgat train --config``), ``evaluation.csv`` and ``tuned.md``.

Seeds and splits: trial ``n`` trains with seed ``SEARCH_SEEDS[n]``
(:data:`ikgat.training.configuration.SEARCH_SEEDS`). On Planetoid the
search and the evaluation share the public split, and the evaluation seeds
are 0-19. The heterophilous graphs come with 10 fixed splits, all of them
evaluated (with seed = split); their search trains on a split of its own
(:func:`search_split`: the nodes shuffled with the first search seed, in
the fixed splits' proportions), so no fixed split selects anything. The
search never reads a test mask.
"""
import argparse
import copy
import glob
import math
import os.path as osp
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch_geometric.data import Data

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.registry import PAPER_RESULTS
from benchmarks.harness.results import (
    ResultsWriter,
    format_float,
    read_results,
    write_text,
)
from benchmarks.harness.statistics import Stats, mean_std_ci

FOLDER = osp.join(osp.dirname(__file__), 'results', 'tuned')
STUDIES = osp.join(FOLDER, 'studies.log')
CONFIGS = osp.join(FOLDER, 'configs')
EVALUATION = osp.join(FOLDER, 'evaluation.csv')
SUMMARY = osp.join(FOLDER, 'tuned.md')
COLUMNS = ['dataset', 'model', 'layer', 'seed', 'split', 'score',
           'val_score', 'test_score', 'best_epoch', 'epochs', 'seconds',
           'config_trial', 'commit']
#: The recipe's epochs and patience, in the search and the evaluation.
EPOCHS, PATIENCE = 500, 100
#: Planetoid's evaluation seeds (the search's are SEARCH_SEEDS).
PLANETOID_SEEDS = tuple(range(20))


@dataclass(frozen=True)
class TunedModel:
    r"""A row of the tables: a layer of ``ikgat train``, the options its
    search fixes, its baseline and the paper's figure beside it."""
    layer: str
    fixed: Tuple[str, ...] = ()
    baseline: Optional[str] = None
    #: The key of ``PAPER_RESULTS`` (the GAT paper's and the IKA paper's
    #: Table 5) shown beside it.
    paper: Optional[str] = None
    label: str = ''


MODELS: Dict[str, TunedModel] = {
    'gat': TunedModel('gat', paper='GAT', label='GATConv'),
    'ikgat-direct': TunedModel('ikgat', ('kernel=direct', ), 'gat',
                               'IKAN-direct', 'IKGATConv direct'),
    'ikgat-implicit': TunedModel('ikgat', ('kernel=implicit', ), 'gat',
                                 None, 'IKGATConv implicit (IKAN)'),
    'mikan': TunedModel('mikan', (), 'gat', 'MIKAN', 'MIKANConv'),
    'transformerconv': TunedModel('transformerconv',
                                  label='TransformerConv'),
    'iktransformer': TunedModel('transformer', (), 'transformerconv', None,
                                'IKTransformerConv (kernel searched)'),
}
#: Platonov et al. (ICLR 2023), GAT, ROC-AUC (mean, std) over the 10
#: splits, with their recipe (the defaults of their code,
#: yandex-research/heterophilous-graphs): 5 layers with residual
#: connections and layer normalisation, hidden 512, 8 heads, dropout 0.2,
#: AdamW at lr 3e-5 for 1000 full-batch steps.
PLATONOV_GAT = {'minesweeper': (92.01, 0.68), 'tolokers': (83.70, 0.47)}


def search_split(data: Data, seed: int) -> Data:
    r"""A split of :obj:`data` that none of its fixed splits is: the nodes
    shuffled with :obj:`seed` and cut in the proportions of fixed split 0
    (train, then validation, the rest test)."""
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(data.num_nodes, generator=generator)
    counts = [int(data[key][:, 0].sum()) for key in ('train_mask',
                                                      'val_mask')]
    out = copy.copy(data)
    cuts = [0, counts[0], counts[0] + counts[1], data.num_nodes]
    for key, low, high in zip(('train_mask', 'val_mask', 'test_mask'),
                              cuts[:-1], cuts[1:]):
        mask = torch.zeros(data.num_nodes, dtype=torch.bool)
        mask[order[low:high]] = True
        out[key] = mask
    return out


def _storage(path: str):
    import os
    os.makedirs(osp.dirname(path) or '.', exist_ok=True)
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    return JournalStorage(JournalFileBackend(path))


def config_path(folder: str, dataset: str, model: str) -> str:
    return osp.join(folder, f'{dataset}-{model}.json')


def run_studies(datasets: Sequence[str], models: Sequence[str], trials: int,
                studies: str = STUDIES, configs: str = CONFIGS,
                root: Optional[str] = None, epochs: int = EPOCHS,
                patience: int = PATIENCE, heads: int = 8) -> None:
    r"""Bring each (dataset, model) study in :obj:`studies` to
    :obj:`trials` finished trials, writing its best configuration to
    :obj:`configs` after every better trial."""
    from ikgat.data import load_dataset
    from ikgat.training import tuning
    from ikgat.training.configuration import SEARCH_SEEDS, write_config
    from ikgat.training.search_space import parse_search
    storage = _storage(studies)
    for name in datasets:
        dataset = load_dataset(name, root)
        split = 'search' if dataset.num_splits > 1 else 0
        data = (search_split(dataset.data, SEARCH_SEEDS[0])
                if split == 'search' else dataset.split(0))
        for model in models:
            entry = MODELS[model]
            space = parse_search(entry.layer, list(entry.fixed))
            study_name = f'{dataset.name}-{model}'
            existing = [s.study_name for s in storage.get_all_studies()]
            size = (len(storage.get_all_trials(
                storage.get_study_id_from_name(study_name)))
                if study_name in existing else 0)
            study = tuning.open_study(
                storage, study_name,
                tuning.identity(dataset.name, entry.layer, split, space),
                seed=size, warmup_epochs=patience)
            done = len(tuning.finished_trials(study))
            print(f'{study_name}: {done} finished trial(s), '
                  f'{max(trials - done, 0)} to run', flush=True)
            if done >= trials:
                continue
            objective = tuning.Objective(
                dataset, data, entry.layer, space, heads, epochs, patience,
                torch.device('cpu'))
            target = config_path(configs, dataset.name, model)

            def after_trial(study, trial, target=target) -> None:
                value = ('pruned' if trial.value is None
                         else f'{trial.value:.4f}')
                print(f'  trial {trial.number}: {trial.state.name.lower()} '
                      f'{value} {trial.params}', flush=True)
                if (trial.state.name == 'COMPLETE'
                        and study.best_trial.number == trial.number):
                    write_config(target, tuning.best_config(study, heads))

            study.optimize(objective, n_trials=trials - done,
                           callbacks=[after_trial], gc_after_trial=False)


def evaluation_runs(num_splits: int,
                    seeds: Sequence[int] = PLANETOID_SEEDS
                    ) -> List[Tuple[int, int]]:
    r"""``(seed, split)`` of each evaluation run: the seeds on the one
    split of a dataset that has one, else every fixed split with its index
    as seed."""
    if num_splits == 1:
        return [(seed, 0) for seed in seeds]
    return [(split, split) for split in range(num_splits)]


def run_evaluation(datasets: Sequence[str], models: Sequence[str],
                   results: str = EVALUATION, configs: str = CONFIGS,
                   root: Optional[str] = None,
                   seeds: Sequence[int] = PLANETOID_SEEDS,
                   epochs: int = EPOCHS, patience: int = PATIENCE) -> None:
    r"""Train each (dataset, model)'s best configuration on its evaluation
    runs, appending one row a run to :obj:`results` and skipping the runs
    it holds."""
    from dataclasses import asdict

    from ikgat.data import load_dataset
    from ikgat.training.configuration import read_config
    from ikgat.training.fitting import fit_configuration
    writer = ResultsWriter(results, COLUMNS)
    done = {(row['dataset'], row['model'], row['seed'], row['split'])
            for row in read_results(results, ('dataset', 'model'),
                                    ('val_score', 'test_score'))}
    commit = git_commit()
    for name in datasets:
        dataset = load_dataset(name, root)
        for model in models:
            path = config_path(configs, dataset.name, model)
            if not osp.isfile(path):
                raise FileNotFoundError(
                    f'{path} does not exist; run `python -m benchmarks.tuned '
                    f'study --datasets {dataset.name} --models {model}` '
                    f'first')
            config = read_config(path)
            options = {**config.layer_options,
                       **{key: value for key, value in asdict(config).items()
                          if key in ('hidden', 'dropout', 'lr',
                                     'weight_decay')}}
            for seed, split in evaluation_runs(dataset.num_splits, seeds):
                if (dataset.name, model, str(seed), str(split)) in done:
                    continue
                start = time.perf_counter()
                fit = fit_configuration(
                    dataset, dataset.split(split), config.layer, options,
                    config.heads, epochs, patience, seed,
                    torch.device('cpu'))
                row = dict(
                    dataset=dataset.name, model=model, layer=config.layer,
                    seed=seed, split=split, score=dataset.score.name,
                    val_score=format_float(fit.val_score),
                    test_score=format_float(fit.test_score),
                    best_epoch=fit.best_epoch, epochs=fit.epochs,
                    seconds=f'{time.perf_counter() - start:.1f}',
                    config_trial=config.provenance.get('trial', ''),
                    commit=commit)
                writer.write(row)
                print(f'{dataset.name} {model} seed {seed} split {split}: '
                      f'test {dataset.score.name} {fit.test_score:.4f} '
                      f'(epoch {fit.best_epoch}) in {row["seconds"]} s',
                      flush=True)


def paired(cell: Dict[Tuple[str, str], float],
           baseline: Dict[Tuple[str, str], float]) -> Stats:
    r"""Mean difference (in percentage points) over the runs both hold,
    with its 95% Student-t interval."""
    common = sorted(set(cell) & set(baseline))
    return mean_std_ci([100 * (cell[key] - baseline[key]) for key in common])


def study_progress(studies: str) -> List[str]:
    r"""Markdown rows of each study in the journal :obj:`studies`: its
    finished (complete and pruned) trials, its best validation score and
    trial, and the hours its trials took."""
    import optuna
    from optuna.trial import TrialState
    storage = _storage(studies)
    rows = []
    for summary in sorted(optuna.get_all_study_summaries(storage),
                          key=lambda summary: summary.study_name):
        study = optuna.load_study(study_name=summary.study_name,
                                  storage=storage)
        trials = study.get_trials(deepcopy=False)
        states = [trial.state for trial in trials]
        hours = sum((trial.datetime_complete - trial.datetime_start)
                    .total_seconds() for trial in trials
                    if trial.datetime_complete and trial.datetime_start
                    ) / 3600
        complete = states.count(TrialState.COMPLETE)
        best = (f'{study.best_value:.4f} (trial {study.best_trial.number})'
                if complete else '—')
        rows.append(f'| {summary.study_name} | {complete} | '
                    f'{states.count(TrialState.PRUNED)} | {best} | '
                    f'{hours:.2f} |')
    return rows


def _runs(rows: List[Dict[str, str]]
          ) -> Dict[Tuple[str, str], Dict[Tuple[str, str], float]]:
    # Test scores by (dataset, model), then by (seed, split).
    runs: Dict[Tuple[str, str], Dict[Tuple[str, str], float]] = {}
    for row in rows:
        runs.setdefault((row['dataset'], row['model']), {})[
            (row['seed'], row['split'])] = float(row['test_score'])
    return runs


def render_summary(rows: List[Dict[str, str]],
                   configs: str = CONFIGS,
                   studies: Optional[str] = None,
                   against: Optional[List[Dict[str, str]]] = None,
                   against_name: str = '') -> str:
    r"""The tables' Markdown.  With :obj:`against` (the rows of another
    evaluation of the same models, e.g. at another setting, named
    :obj:`against_name`), each model is also paired with its own runs
    there, and a baseline evaluated only there is taken from there."""
    runs = _runs(rows)
    others = _runs(against or [])
    lines = [
        '# Accuracy from tuned configurations', '',
        'Made by `python -m benchmarks.tuned summary` from '
        '`evaluation.csv`; the studies and the evaluation by the commands '
        'in `benchmarks/tuned.py`. Each layer searched with the same trial '
        'budget by validation score; each best configuration evaluated on '
        'runs the search never used (Planetoid: seeds 0-19 on the public '
        'split; heterophilous: the 10 fixed splits). Paired: the difference '
        'to the baseline over the same seeds or splits, with its 95% '
        'Student-t interval; "better" or "worse" only where it excludes '
        '0. Commits: ' + (', '.join(sorted({r['commit'] for r in rows}))
                          or 'no runs yet') + '.', '',
        'Published: the GAT paper (GATConv on Planetoid), the IKA paper\'s '
        'Table 5 (IKAN-direct, MIKAN) and Platonov et al., ICLR 2023 '
        '(GATConv on the heterophilous graphs, with their own recipe: 5 '
        'layers with residual connections and layer normalisation, hidden '
        '512, 8 heads, dropout 0.2, AdamW at lr 3e-5 for 1000 steps; ours '
        'is the GAT paper\'s 2-layer model, tuned).', '',
    ]
    if against is not None:
        lines += [f'Paired vs {against_name}: the difference to the same '
                  f'model\'s runs in `{against_name}` on the same seeds or '
                  f'splits; a baseline without runs here is taken from '
                  f'there.', '']
    extra = ' paired vs against |' if against is not None else ''
    lines += [
        '| dataset | model | score | n | test (mean ± std) | paired vs '
        'baseline | verdict |' + extra + ' published |',
        '|---|---|---|---:|---:|---|---|' + ('---|' if extra else '')
        + '---|']
    for (name, model), cell in runs.items():
        entry = MODELS[model]
        stats = mean_std_ci([100 * v for v in cell.values()])
        score = next(r['score'] for r in rows if r['dataset'] == name
                     and r['model'] == model)
        comparison, verdict = '—', '—'
        base = (runs.get((name, entry.baseline or ''))
                or others.get((name, entry.baseline or '')))
        if base:
            diff = paired(cell, base)
            comparison = f'{diff.interval} vs {entry.baseline}, n={diff.n}'
            verdict = diff.verdict
        published = PAPER_RESULTS.get(entry.paper or '', {}).get(name)
        if name in PLATONOV_GAT and model == 'gat':
            published = PLATONOV_GAT[name]
        shown = (f'{published[0]:.2f} ± {published[1]:.2f}' if published
                 else '—')
        own = ''
        if against is not None:
            earlier = others.get((name, model))
            own = (f' {paired(cell, earlier).interval}, n='
                   f'{paired(cell, earlier).n} |' if earlier else ' — |')
        lines.append(f'| {name} | {entry.label} | {score} | {stats.n} | '
                     f'{stats.mean:.2f} ± {_std(stats)} | {comparison} | '
                     f'{verdict} |{own} {shown} |')
    if studies is not None and osp.isfile(studies):
        lines += ['', '## The studies', '',
                  f'`{osp.basename(studies)}`: the trials each study has '
                  'finished (its budget: the same for every model of a '
                  'dataset), its best validation score, and the hours its '
                  'trials took on one thread.', '',
                  '| study | complete | pruned | best validation | hours |',
                  '|---|---:|---:|---|---:|'] + study_progress(studies)
    lines += ['', '## The configurations', '',
              'Each study\'s best trial so far (`configs/<dataset>-<model>'
              '.json`, for `ikgat train --config`; trial numbers count the '
              'trials a stopped session left unfinished too):', '']
    from ikgat.training.configuration import read_config
    for path in sorted(glob.glob(osp.join(configs, '*.json'))):
        config = read_config(path)
        trial = config.provenance
        lines.append(
            f'- {osp.basename(path)[:-5]}: '
            f'{config.layer_options or "no layer options"}, hidden '
            f'{config.hidden}, dropout {config.dropout:.3g}, lr '
            f'{config.lr:.3g}, weight decay {config.weight_decay:.3g} (trial '
            f'{trial.get("trial")}, written after '
            f'{trial.get("finished_trials")} finished trials, validation '
            f'{trial.get("validation_score", math.nan):.4f})')
    return '\n'.join(lines) + '\n'


def _std(stats: Stats) -> str:
    return 'nan' if math.isnan(stats.std) else f'{stats.std:.2f}'


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog='python -m benchmarks.tuned', description=__doc__.split(
            '\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest='command', required=True)
    for command in ('study', 'evaluate'):
        sub = commands.add_parser(command)
        sub.add_argument('--datasets', nargs='+', required=True)
        sub.add_argument('--models', nargs='+', choices=list(MODELS),
                         required=True)
        sub.add_argument('--root', default=None)
        sub.add_argument('--threads', type=int, default=None)
        sub.add_argument('--configs', default=CONFIGS)
        sub.add_argument('--epochs', type=int, default=EPOCHS)
        sub.add_argument('--patience', type=int, default=PATIENCE)
    study = commands.choices['study']
    study.add_argument('--trials', type=int, default=20)
    study.add_argument('--studies', default=STUDIES)
    evaluate = commands.choices['evaluate']
    evaluate.add_argument('--results', default=EVALUATION)
    evaluate.add_argument('--seeds', type=int, nargs='+',
                          default=list(PLANETOID_SEEDS),
                          help='the evaluation seeds of a dataset with one '
                          'split (default: 0-19)')
    summary = commands.add_parser('summary')
    summary.add_argument('--results', default=EVALUATION)
    summary.add_argument('--out', default=SUMMARY)
    summary.add_argument('--configs', default=CONFIGS)
    summary.add_argument('--studies', default=STUDIES)
    summary.add_argument('--against', default=None, metavar='RESULTS',
                         help='another evaluation of the same models (its '
                         'CSV): pair each model with its runs there')
    args = parser.parse_args(argv)
    if getattr(args, 'threads', None):
        torch.set_num_threads(args.threads)
    if args.command == 'study':
        run_studies(args.datasets, args.models, args.trials, args.studies,
                    args.configs, args.root, args.epochs, args.patience)
    elif args.command == 'evaluate':
        run_evaluation(args.datasets, args.models, args.results,
                       args.configs, args.root, args.seeds, args.epochs,
                       args.patience)
    else:
        rows = read_results(args.results, ('dataset', 'model'),
                            ('val_score', 'test_score'))
        against = None if args.against is None else read_results(
            args.against, ('dataset', 'model'), ('val_score', 'test_score'))
        write_text(args.out, render_summary(rows, args.configs,
                                             args.studies, against,
                                             args.against or ''))
        print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
