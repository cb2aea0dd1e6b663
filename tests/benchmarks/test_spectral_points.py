"""The paired comparison of runs at another R with the Planetoid table."""
import os

import pytest

from benchmarks import spectral_points
from benchmarks.harness.results import COLUMNS, ResultsWriter


def write_rows(path, tag, R, accuracies):
    writer = ResultsWriter(str(path), COLUMNS)
    for seed, accuracy in accuracies.items():
        writer.write(dict(dataset='Cora', model='ikan-direct', tag=tag,
                          seed=seed, p=2.0, R=R, beta='', lr=0.005,
                          weight_decay=0.0005, val_acc=0.8,
                          test_acc=accuracy, epochs=300, best_epoch=100,
                          seconds=1.0, num_parameters=10, device='cpu',
                          git_commit='abc'))


def row_of(text):
    return [line for line in text.splitlines()
            if line.startswith('| Cora')][0]


def test_paired_difference_over_the_common_seeds(tmp_path):
    table, runs = tmp_path / 'table.csv', tmp_path / 'runs.csv'
    # Seed 3 is in the table only: the difference pairs seeds 0-2, each
    # 1 or 2 points up (mean +1.33, t interval [-0.10, +2.77]).
    write_rows(table, 'final', 64, {0: 0.80, 1: 0.81, 2: 0.82, 3: 0.5})
    write_rows(runs, 'r16', 16, {0: 0.81, 1: 0.83, 2: 0.83})
    row = row_of(spectral_points.render(str(runs), 'r16', str(table)))
    cells = [cell.strip() for cell in row.strip('|').split('|')]
    assert cells[2] == '16' and cells[4] == '64'
    assert cells[3].startswith('82.33') and cells[5].endswith('(n=4)')
    assert cells[6].startswith('+1.33 [-0.10, +2.77]')
    assert cells[7] == '3' and cells[8] == 'within noise'


def test_a_clear_loss_is_worse(tmp_path):
    table, runs = tmp_path / 'table.csv', tmp_path / 'runs.csv'
    base = {seed: 0.80 + 0.001 * seed for seed in range(5)}
    write_rows(table, 'final', 64, base)
    write_rows(runs, 'r16', 16, {s: a - 0.02 for s, a in base.items()})
    row = row_of(spectral_points.render(str(runs), 'r16', str(table)))
    assert row.rstrip(' |').endswith('worse')


def test_missing_results_name_the_file(tmp_path):
    with pytest.raises(SystemExit, match='does not exist'):
        spectral_points.main(['--results', str(tmp_path / 'none.csv'),
                              '--tag', 'r16'])


def test_the_report_names_the_command_that_remakes_it(tmp_path):
    table, runs = tmp_path / 'table.csv', tmp_path / 'runs.csv'
    write_rows(table, 'base', 64, {0: 0.80, 1: 0.81})
    write_rows(runs, 'r16', 16, {0: 0.81, 1: 0.83})
    output = tmp_path / 'paired.md'
    spectral_points.main(['--results', str(runs), '--tag', 'r16',
                          '--table', str(table), '--table-tag', 'base',
                          '--output', str(output)])
    text = output.read_text()
    relative = {path: os.path.relpath(path) for path in (runs, table, output)}
    assert (f'`python -m benchmarks.spectral_points --results '
            f'{relative[runs]} --tag r16 --table {relative[table]} '
            f'--table-tag base --output {relative[output]}`') in text
    assert 'table.md' in text  # where the table's own commands are
