r"""The Markdown of the Planetoid study: the hyperparameter search
(validation accuracy only, :func:`select_hyperparameters`) and the final
runs beside the papers' numbers (:func:`render_summary`).  Rendered by
``python -m benchmarks.planetoid summary``."""
import math
import os.path as osp
from collections import OrderedDict
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from benchmarks.harness.provenance import row_commits
from benchmarks.harness.registry import (
    MODELS,
    PAPER_RESULTS,
    PROTOCOLS,
    protocol_for,
)
from benchmarks.harness.results import (
    RESULTS_DIR,
    format_float,
    format_int,
    run_key,
)
from benchmarks.harness.runtime import compact_seeds
from benchmarks.harness.statistics import Stats, mean_std_ci

DEFAULT_RESULTS = osp.join(RESULTS_DIR, 'planetoid.csv')
DEFAULT_SUMMARY = osp.join(RESULTS_DIR, 'planetoid.md')
DEFAULT_SEARCH_RESULTS = osp.join(RESULTS_DIR, 'search.csv')
DEFAULT_SEARCH_SUMMARY = osp.join(RESULTS_DIR, 'search.md')


class ConfigStats(NamedTuple):
    dataset: str
    model: str
    p: str
    R: str
    beta: str
    val: 'Stats'
    seeds: List[int]


def search_table(rows: Iterable[Dict[str, str]], tag: Optional[str] = None
                 ) -> List[ConfigStats]:
    r"""Validation accuracy (%) per (dataset, model, p, R, beta)."""
    groups: Dict[Tuple[str, ...], Dict[str, float]] = OrderedDict()
    for row in rows:
        if tag is not None and row.get('tag', '') != tag:
            continue
        key = run_key(row)
        group = groups.setdefault(key[:2] + key[3:6], {})
        group.setdefault(key[2], 100 * float(row['val_acc']))  # first per seed
    return [ConfigStats(*key, mean_std_ci(list(vals.values())),
                        sorted(int(s) for s in vals))
            for key, vals in groups.items()]


def select_hyperparameters(rows: Iterable[Dict[str, str]],
                           tag: Optional[str] = None
                           ) -> Dict[Tuple[str, str], Dict[str, Any]]:
    r"""Pick, per (dataset, model), the configuration with the highest mean
    validation accuracy; ties go to the smaller :math:`R`, then the
    :math:`p` closer to 2, then the smaller :math:`\beta`.  Reads only
    ``val_acc``: a test accuracy in the rows changes nothing.

    Returns ``{(dataset, model): {'p', 'R', 'beta', 'val_mean', 'n'}}``.
    """
    best: Dict[Tuple[str, str], Tuple[Tuple, ConfigStats]] = {}
    for stats in search_table(rows, tag):
        order = (-stats.val.mean, float(stats.R or 0),
                 abs(float(stats.p or 2.0) - 2.0), float(stats.beta or 0))
        key = (stats.dataset, stats.model)
        if key not in best or order < best[key][0]:
            best[key] = (order, stats)
    return {key: dict(p=float(s.p) if s.p else None,
                      R=int(s.R) if s.R else None,
                      beta=float(s.beta) if s.beta else None,
                      val_mean=s.val.mean, n=s.val.n)
            for key, (_, s) in best.items()}


def searched_grids(group: Sequence[ConfigStats]
                   ) -> List[Tuple[List[str], List[str], List[str]]]:
    r"""The configurations of :obj:`group` (one dataset and model) as
    grids :math:`P \times R \times B` of ``search --grid-p``,
    ``--grid-num-features`` and ``--grid-beta`` whose union is exactly
    them (one grid for a full product; a line of :math:`p` at one
    :math:`R` and a line of :math:`R` at one :math:`p` are two), each
    axis sorted, an unset value an empty axis."""
    def axis(values: Iterable[str]) -> Tuple[str, ...]:
        return tuple(sorted((v for v in set(values) if v), key=float))

    ps: Dict[Tuple[str, str], List[str]] = OrderedDict()
    for s in group:  # the p of each (R, beta)
        ps.setdefault((s.R, s.beta), []).append(s.p)
    rs: Dict[Tuple[Tuple[str, ...], str], List[str]] = OrderedDict()
    for (R, beta), values in ps.items():  # the R of each (P, beta)
        rs.setdefault((axis(values), beta), []).append(R)
    betas: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], List[str]] = (
        OrderedDict())
    for (p_axis, beta), values in rs.items():  # the beta of each (P, R)
        betas.setdefault((p_axis, axis(values)), []).append(beta)
    return [(list(p_axis), list(r_axis), list(axis(values)))
            for (p_axis, r_axis), values in betas.items()]


def render_search_summary(rows: List[Dict[str, str]], results: str =
                          DEFAULT_SEARCH_RESULTS, tag: Optional[str] = 'search'
                          ) -> str:
    table = search_table(rows, tag)
    chosen = select_hyperparameters(rows, tag)
    lines = [
        '# Hyperparameter search (validation accuracy only)', '',
        f'Rows: `{results}` (tag `{tag}`).  Every configuration is trained '
        'with the GAT protocol and early stopping on validation; the '
        'configuration with the highest **mean validation accuracy** is '
        'chosen per dataset and model (ties: smaller R, p closer to 2, '
        'smaller beta).  Search runs do not record test accuracy, so the '
        'test split selects nothing.', '',
        'Final runs use these choices with `python -m benchmarks.planetoid '
        f'--from-search {results} ...`.', '',
        row_commits([row for row in rows if tag is None
                     or row.get('tag') == tag]), '']
    datasets = _ordered_datasets(s.dataset for s in table)
    for dataset in datasets:
        lines += [f'## {dataset}', '',
                  '| model | p | R | beta | seeds | val acc (%) | chosen |',
                  '|---|---|---|---|---|---|---|']
        for model in _ordered_models(s.model for s in table
                                     if s.dataset == dataset):
            pick = chosen.get((dataset, model))
            for s in (s for s in table
                      if s.dataset == dataset and s.model == model):
                is_pick = pick is not None and (
                    format_float(pick['p']), format_int(pick['R']),
                    format_float(pick['beta'])) == (s.p, s.R, s.beta)
                lines.append(
                    f'| {model} | {s.p or "-"} | {s.R or "-"} | '
                    f'{s.beta or "-"} | {compact_seeds(s.seeds)} | '
                    f'{_pct(s.val)} | {"**yes**" if is_pick else ""} |')
        lines.append('')
    if not table:
        lines.append('No search runs yet.')
        return '\n'.join(lines).rstrip() + '\n'
    lines += ['## Reproduce', '',
              'Each searched grid (finished grid points are skipped):', '',
              '```']
    for dataset in datasets:
        for model in _ordered_models(s.model for s in table
                                     if s.dataset == dataset):
            group = [s for s in table
                     if s.dataset == dataset and s.model == model]
            seeds = sorted({seed for s in group for seed in s.seeds})
            fixed_p = (MODELS.get(model) is not None
                       and MODELS[model].fixed_p is not None)
            for grid in searched_grids(group):
                flags = ''
                for flag, values in zip(
                        ('grid-p', 'grid-num-features', 'grid-beta'), grid):
                    if values and not (flag == 'grid-p' and fixed_p):
                        flags += f' --{flag} ' + ' '.join(values)
                lines.append(f'python -m benchmarks.planetoid search '
                             f'--datasets {dataset} --models '
                             f'{model} --seeds {compact_seeds(seeds)}'
                             f'{flags} --results {results}')
    lines += ['```', '']
    return '\n'.join(lines).rstrip() + '\n'


class CellStats(NamedTuple):
    dataset: str
    model: str
    p: str
    R: str
    beta: str
    lr: str
    weight_decay: str
    test: Stats
    val: Stats
    seconds: float
    epochs: float
    seeds: List[int]
    commits: List[str]


def summarize(rows: Iterable[Dict[str, str]], tag: Optional[str] = 'final'
              ) -> Tuple[List[CellStats], int]:
    r"""Group the rows of :obj:`tag` by dataset, model and configuration
    (p, R, beta, lr, weight decay: different configurations are never
    averaged together).  A run repeated with the same key counts once (the
    first row).  Returns the cells and the number of duplicates dropped."""
    groups: Dict[Tuple[str, ...], List[Dict[str, str]]] = OrderedDict()
    seen, duplicates = set(), 0
    for row in rows:
        if tag is not None and row.get('tag', '') != tag:
            continue
        key = run_key(row)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        group = (key[0], key[1], key[3], key[4], key[5],
                 format_float(row.get('lr')),
                 format_float(row.get('weight_decay')))
        groups.setdefault(group, []).append(row)
    cells = []
    dataset_order = _ordered_datasets(g[0] for g in groups)
    model_order = _ordered_models(g[1] for g in groups)
    groups = OrderedDict(sorted(groups.items(), key=lambda item: (
        dataset_order.index(item[0][0]), model_order.index(item[0][1]))))
    for group, members in groups.items():
        tests = [float(r['test_acc']) * 100 for r in members
                 if r.get('test_acc')]
        cells.append(CellStats(
            *group, test=mean_std_ci(tests),
            val=mean_std_ci([float(r['val_acc']) * 100 for r in members]),
            seconds=math.fsum(float(r['seconds']) for r in members) /
            len(members),
            epochs=math.fsum(float(r['epochs']) for r in members) /
            len(members),
            seeds=sorted(int(r['seed']) for r in members),
            commits=sorted({r.get('git_commit', '') for r in members})))
    return cells, duplicates


def _ordered_datasets(names: Iterable[str]) -> List[str]:
    names = set(names)
    known = [n for n in PROTOCOLS if n in names]
    return known + sorted(names - set(known))


def _ordered_models(names: Iterable[str]) -> List[str]:
    names = set(names)
    known = [n for n in MODELS if n in names]
    return known + sorted(names - set(known))


def _pct(stats: Stats, digits: int = 2) -> str:
    if stats.n == 0:
        return '-'
    if stats.n < 2:
        return f'{stats.mean:.{digits}f}'
    return f'{stats.mean:.{digits}f} ± {stats.std:.{digits}f}'


def _ci(stats: Stats) -> str:
    if stats.n < 2:
        return '-'
    return f'[{stats.low:.2f}, {stats.high:.2f}]'


def _paper(model: str, dataset: str) -> str:
    key = MODELS[model].paper if model in MODELS else None
    value = PAPER_RESULTS.get(key or '', {}).get(dataset)
    return f'{value[0]:.1f} ± {value[1]:.1f} ({key})' if value else '-'


def _reference_gat(cells: List[CellStats], dataset: str, name: str = 'gat'
                   ) -> Optional[CellStats]:
    candidates = [c for c in cells if c.dataset == dataset
                  and c.model == name]
    return max(candidates, key=lambda c: c.test.n) if candidates else None


def compare_to_gat(cell: CellStats, gat: CellStats, name: str = 'gat'
                   ) -> str:
    r"""One sentence: difference of mean test accuracy to our run of the
    reference model :obj:`name` (``gat``, or ``transformer`` for its
    family) and whether the 95% confidence intervals overlap."""
    diff = cell.test.mean - gat.test.mean
    where = ('above' if diff > 0 else 'below' if diff < 0 else 'equal to')
    amount = '' if diff == 0 else f'{abs(diff):.2f} points '
    text = (f'{cell.model} ({_pct(cell.test)}, n={cell.test.n}) is {amount}'
            f'{where} our {name} ({_pct(gat.test)}, n={gat.test.n})')
    if cell.test.n < 2 or gat.test.n < 2:
        return text + '; too few seeds for confidence intervals.'
    overlap = cell.test.low <= gat.test.high and gat.test.low <= cell.test.high
    if overlap:
        return (text + '; the 95% CIs overlap, so the seeds do not separate '
                'them.')
    verdict = 'better' if diff > 0 else 'worse'
    return (text + f'; the 95% CIs do not overlap: {cell.model} is '
            f'{verdict} here.')


def _config_label(cell: CellStats) -> str:
    parts = [f'{k}={v}' for k, v in (('p', cell.p), ('R', cell.R),
                                     ('beta', cell.beta)) if v]
    return ', '.join(parts) or '-'


def reference_model(model: str) -> str:
    r"""The model that :obj:`model` is compared with: the PyG layer of its
    family (``gat`` for GATConv's drop-ins, ``transformer`` for
    TransformerConv's)."""
    family = MODELS[model].family if model in MODELS else 'gat'
    return next(name for name, spec in MODELS.items()
                if spec.family == family and spec.layer == 'pyg')


def _comparison_lines(cells: List[CellStats], dataset: str, name: str,
                      others: List[CellStats]) -> List[str]:
    r"""The sentences comparing :obj:`others` with our run of the
    reference model :obj:`name` on :obj:`dataset`."""
    lines: List[str] = []
    gat = _reference_gat(cells, dataset, name)
    if gat is None:
        lines += [f'No `{name}` runs on {dataset}: nothing to compare '
                  'with.', '']
    elif others:
        better = sorted({c.model for c in others
                         if c.test.n > 1 and gat.test.n > 1
                         and c.test.low > gat.test.high})
        above = sorted({c.model for c in others
                        if c.test.mean > gat.test.mean} - set(better))
        below = sorted({c.model for c in others
                        if c.test.mean <= gat.test.mean})
        lines.append(
            f'On {dataset}, compared with our own {name} run: '
            f'clearly better (CIs do not overlap): '
            f'{", ".join(better) or "none"}; higher mean but '
            f'overlapping CIs: {", ".join(above) or "none"}; not above '
            f'{name}: {", ".join(below) or "none"}.')
        lines.append('')
        for c in others:
            sentence = compare_to_gat(c, gat, name)
            paper = PAPER_RESULTS.get(MODELS[c.model].paper or '', {}
                                      ) if c.model in MODELS else {}
            if dataset in paper and c.model not in ('gat-rbf', 'ikt-rbf'):
                ref = paper[dataset][0]
                side = 'at or above' if c.test.mean >= ref else 'below'
                sentence += (f' Against the paper\'s {ref:.1f}: {side} '
                             f'({c.test.mean - ref:+.2f}).')
            lines.append(f'- {sentence}')
        lines.append('')
    return lines


def render_summary(rows: Iterable[Dict[str, str]], tag: Optional[str] =
                   'final', results: str = DEFAULT_RESULTS,
                   output: str = DEFAULT_SUMMARY,
                   command: Optional[str] = None) -> str:
    r"""The Markdown summary: per dataset, a table of model × configuration
    with test accuracy mean ± std, 95% CI, seeds, validation accuracy, time
    per run and the paper's number; then one sentence per ikgat model
    comparing it with our own ``gat`` run; then the commands that reproduce
    every cell.  :obj:`command`, when given, is the command of the runs,
    written at the top."""
    cells, duplicates = summarize(rows, tag)
    lines = [
        '# Planetoid benchmark (public split)', '',
        'Test accuracy (%) at the epoch of best validation accuracy, GAT '
        'protocol (8 heads x 8 hidden, dropout 0.6, Adam lr 0.005 / wd 5e-4; '
        'PubMed lr 0.01 / wd 1e-3 / 8 output heads; patience 100; '
        'row-normalised features).  mean ± sample std over seeds; 95% CI of '
        'the mean from Student\'s t.  Each cell\'s p, R, beta are in its '
        'config column; where they were searched, they were chosen on '
        'validation accuracy only (`search.md`).  Paper numbers: GAT paper '
        '(100 runs) and the IKA paper (AAAI).', '',
        f'Rows: `{results}`, tag `{tag}`.  Regenerate this file with '
        f'`python -m benchmarks.planetoid summary --results {results} '
        f'--tag {tag} '
        f'--output {output}`.', '']
    if command:
        lines[2:2] = [f'Command of the runs: `{command}`', '']
    if duplicates:
        lines += [f'{duplicates} repeated rows (same dataset, model, seed, '
                  'configuration and tag) were counted once.', '']
    if not cells:
        lines.append('No runs yet.')
        return '\n'.join(lines) + '\n'
    datasets = _ordered_datasets(c.dataset for c in cells)
    lines += ['Models: ' + '; '.join(
        f'`{name}`: {MODELS[name].description}' for name in
        _ordered_models(c.model for c in cells) if name in MODELS) + '.', '']
    if any(MODELS[c.model].family == 'transformer' for c in cells
           if c.model in MODELS):
        lines += [
            'The transformer family (`transformer`, `ikt-*`) is the same '
            'two-layer recipe with the layer swapped for TransformerConv or '
            'a drop-in (its defaults: root weight on, no gate), and one '
            'self-loop per node added before the layers for every one of '
            'them (TransformerConv adds none; GATConv adds them itself); '
            'each is compared with our `transformer` run.', '']
    # Overview: one line per model, one column per dataset.
    models = _ordered_models(c.model for c in cells)
    lines += ['## Overview (test accuracy %, mean ± std, seeds)', '',
              '| model | ' + ' | '.join(datasets) + ' |',
              '|---|' + '---|' * len(datasets)]
    for model in models:
        entries = []
        for dataset in datasets:
            found = [c for c in cells if c.model == model
                     and c.dataset == dataset]
            entries.append('<br>'.join(
                f'{_pct(c.test)} (n={c.test.n})' for c in found) or '-')
        lines.append(f'| {model} | ' + ' | '.join(entries) + ' |')
    lines.append('')
    for dataset in datasets:
        lines += [f'## {dataset}', '',
                  '| model | config | seeds | test acc (%) | 95% CI | '
                  'val acc (%) | epochs | s/run | paper |',
                  '|---|---|---|---|---|---|---|---|---|']
        dataset_cells = [c for c in cells if c.dataset == dataset]
        for model in _ordered_models(c.model for c in dataset_cells):
            for c in (c for c in dataset_cells if c.model == model):
                lines.append(
                    f'| {model} | {_config_label(c)} | {c.test.n} | '
                    f'{_pct(c.test)} | {_ci(c.test)} | {_pct(c.val)} | '
                    f'{c.epochs:.0f} | {c.seconds:.1f} | '
                    f'{_paper(model, dataset)} |')
        lines.append('')
        for reference_name in _ordered_models(
                reference_model(c.model) for c in dataset_cells):
            lines += _comparison_lines(
                cells, dataset, reference_name,
                [c for c in dataset_cells if c.model != reference_name
                 and reference_model(c.model) == reference_name])
    lines += ['## Reproduce', '',
              'Each cell, with the seeds it holds (`--resume` skips finished '
              'runs):', '', '```']
    for c in cells:
        spec = MODELS.get(c.model, MODELS['gat'])
        searched_p = c.p if spec.fixed_p is None else ''
        flags = ''.join(f' --{flag} {value}' for flag, value in (
            ('p', searched_p), ('num-features', c.R), ('beta', c.beta))
            if value)
        proto = protocol_for(c.dataset)
        for flag, value, default in (('lr', c.lr, proto['lr']),
                                     ('weight-decay', c.weight_decay,
                                      proto['weight_decay'])):
            if value and float(value) != float(default):
                flags += f' --{flag} {value}'
        lines.append(f'python -m benchmarks.planetoid --datasets '
                     f'{c.dataset} --models '
                     f'{c.model} --seeds {compact_seeds(c.seeds)}{flags} '
                     f'--tag {tag} --results {results} --resume')
    lines += ['```', '', 'Commits of these runs: ' + ', '.join(
        f'`{commit}`' for commit in sorted({x for c in cells
                                            for x in c.commits})), '']
    return '\n'.join(lines)
