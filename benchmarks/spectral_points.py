r"""Accuracy at another number of spectral points :math:`R`, paired by seed
with the Planetoid table's runs: the evidence a change of a layer's default
:math:`R` needs (the same seeds, none of them used by a search).

    # the runs at R = 16, one CSV row each (resumable):
    python -m benchmarks.planetoid planetoid --datasets Cora \
        --models ikan-direct --seeds 0-19 --p 2.0 --num-features 16 \
        --tag r16 --results benchmarks/results/planetoid_r16.csv \
        --threads 1 --resume
    # the comparison with the table's rows (tag final, R = 64):
    python -m benchmarks.spectral_points \
        --results benchmarks/results/planetoid_r16.csv --tag r16

For each dataset and model of :obj:`--results`, the mean test accuracy of
both and their paired difference over the seeds both hold, with its 95%
Student-t interval: "within noise" where it contains 0.
"""
import argparse
import os.path as osp
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

from benchmarks.harness.results import read_results, write_text
from benchmarks.harness.statistics import Stats, mean_std_ci

RESULTS = osp.join(osp.dirname(__file__), 'results')
TABLE = osp.join(RESULTS, 'planetoid.csv')

Cells = Dict[Tuple[str, str], Dict[int, Tuple[float, str]]]


def _cells(rows: List[Dict[str, str]], tag: str) -> Cells:
    r"""Test accuracy (percent) and R by dataset and model, then seed."""
    cells: Cells = defaultdict(dict)
    for row in rows:
        if row['tag'] == tag:
            cells[row['dataset'], row['model']][int(row['seed'])] = (
                100 * float(row['test_acc']), row['R'])
    return cells


def _pct(stats: Stats) -> str:
    if stats.n < 2:
        return f'{stats.mean:.2f}'
    return f'{stats.mean:.2f} ± {stats.std:.2f}'


def render(results: str, tag: str, table: str = TABLE,
           table_tag: str = 'final', output: Optional[str] = None) -> str:
    r"""The Markdown comparison of :obj:`results` (runs tagged :obj:`tag`)
    with :obj:`table` (tagged :obj:`table_tag`), to be written to
    :obj:`output` (default: :obj:`results` with ``.md``)."""
    runs = _cells(read_results(results), tag)
    reference = _cells(read_results(table), table_tag)
    command = (f'python -m benchmarks.spectral_points --results '
               f'{osp.relpath(results)} --tag {tag}')
    if osp.abspath(table) != osp.abspath(TABLE) or table_tag != 'final':
        command += f' --table {osp.relpath(table)} --table-tag {table_tag}'
    if output is not None and output != default_output(results):
        command += f' --output {osp.relpath(output)}'
    lines = [
        '# Accuracy at another R, paired by seed', '',
        f'Made by `{command}` from the runs tagged `{tag}` and the rows '
        f'tagged `{table_tag}` of `{osp.relpath(table)}` (their commands: '
        f'`benchmarks/spectral_points.py` and '
        f'`{osp.relpath(osp.splitext(table)[0] + ".md")}`). Paired: the '
        'difference over the seeds both hold, with its 95% Student-t '
        'interval; "within noise" where it contains 0.', '',
        '| dataset | model | R | test | R | test | paired difference | '
        'n | verdict |', '|---|---|---|---|---|---|---|---:|---|']
    for (dataset, model), seeds in runs.items():
        base = reference.get((dataset, model), {})
        common = sorted(set(seeds) & set(base))
        new = mean_std_ci([seeds[s][0] for s in seeds])
        old = mean_std_ci([base[s][0] for s in base])
        diff = mean_std_ci([seeds[s][0] - base[s][0] for s in common])
        interval = diff.interval if diff.n >= 2 else '—'
        r_new = ', '.join(sorted({seeds[s][1] for s in seeds}))
        r_old = ', '.join(sorted({base[s][1] for s in base})) or '—'
        lines.append(f'| {dataset} | {model} | {r_new} | {_pct(new)} '
                     f'(n={new.n}) | {r_old} | {_pct(old)} (n={old.n}) | '
                     f'{interval} | {diff.n} | {diff.verdict} |')
    return '\n'.join(lines) + '\n'


def default_output(results: str) -> str:
    return osp.splitext(results)[0] + '.md'


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--results', required=True)
    parser.add_argument('--tag', required=True)
    parser.add_argument('--table', default=TABLE)
    parser.add_argument('--table-tag', default='final')
    parser.add_argument('--output', default=None,
                        help='default: the results file with .md')
    args = parser.parse_args(argv)
    if not osp.isfile(args.results):
        raise SystemExit(f'--results: {args.results} does not exist; run '
                         'the runs first (see python -m '
                         'benchmarks.spectral_points --help)')
    output = args.output or default_output(args.results)
    write_text(output, render(args.results, args.tag, args.table,
                              args.table_tag, output))
    print(f'wrote {output}')


if __name__ == '__main__':
    main()
