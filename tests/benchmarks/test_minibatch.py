"""benchmarks/minibatch.py on a tiny graph: rows and the Markdown summary are
written with sensible values, ``--resume`` keeps a measured part (no timing
assertions beyond positivity)."""
import csv

import pytest

from benchmarks.minibatch import main
from tests.helpers import needs_sampler

pytestmark = needs_sampler


def read_rows(folder):
    with open(folder / 'minibatch.csv', newline='') as file:
        return list(csv.DictReader(file))


@pytest.mark.slow  # a benchmark's whole run, in smoke mode
def test_smoke_run_writes_rows_and_summary(tmp_path):
    text = main(['--smoke', '--results-dir', str(tmp_path)])
    assert (tmp_path / 'minibatch.md').read_text() == text
    rows = read_rows(tmp_path)
    assert [(r['part'], r['model'], r['processes']) for r in rows] == [
        ('single', 'gat', '1'), ('single', 'ikan-direct', '1')]
    for row in rows:
        assert not row['note'], row['note']
        for column in ('sample_s', 'step_s', 'total_s', 'cpu_total_s',
                       'seeds_per_s', 'subgraph_nodes', 'rss_graph_bytes'):
            assert float(row[column]) > 0, column
        # sample+step is timed as one step, about the sum of the two:
        assert float(row['total_s']) > 0.5 * float(row['step_s'])
        assert float(row['seeds_per_s']) == pytest.approx(
            64 / float(row['total_s']))
        assert row['tensor_bytes'] == '' or int(row['tensor_bytes']) > 0
        assert row['sampler'].startswith(('pyg-lib', 'torch-sparse'))
        assert row['git_commit']
    assert ('Command: `python -m benchmarks.minibatch --smoke --results-dir '
            f'{tmp_path}`') in text
    for line in ('- commit: ', '- CPU: ', '- torch ', '- sampler: PyG '
                 'NeighborLoader on ', '## One process', '| gat | ',
                 '| ikan-direct | '):
        assert line in text, line
    assert '## 1 and 2 processes' not in text

    # A second run with --resume measures nothing and reports the same rows:
    again = main(['--smoke', '--results-dir', str(tmp_path), '--resume'])
    assert len(read_rows(tmp_path)) == 2
    assert again.split('## One process')[1].split('\n\n')[2] == \
        text.split('## One process')[1].split('\n\n')[2]


@pytest.mark.slow  # forks 1 and 2 processes per model (about 10 s)
def test_smoke_run_of_one_and_two_processes(tmp_path):
    text = main(['--smoke', '--parts', 'ddp', '--results-dir',
                 str(tmp_path)])
    rows = read_rows(tmp_path)
    assert [(r['part'], r['model'], r['processes']) for r in rows] == [
        ('ddp', 'gat', '1'), ('ddp', 'gat', '2'), ('ddp', 'ikan-direct', '1'),
        ('ddp', 'ikan-direct', '2')]
    for row in rows:
        assert not row['note'], row['note']
        assert float(row['seeds_per_s']) > 0 and float(row['speedup']) > 0
    assert '## 1 and 2 processes (gloo, DDP)' in text


@pytest.mark.parametrize('flags', [['--fraction', '0'], ['--steps', '0'],
                                   ['--fan-out', '0', '5'],
                                   ['--threads', '100000']])
def test_bad_options_exit_with_status_2(flags, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(['--smoke', '--parts', 'ddp', '--results-dir', str(tmp_path),
              *flags])
    assert exit_.value.code == 2
    assert flags[0] in capsys.readouterr().err


def test_the_layers_take_the_given_number_of_spectral_points():
    from benchmarks.minibatch import make_model, parse_args, settings_of
    model = make_model('ikan-direct', 5, 3, seed=0, num_spectral_points=8)
    assert model.conv1.kernel.num_spectral_points == 8
    assert make_model('ikan-direct', 5, 3, 0).conv1.kernel.num_spectral_points \
        == 64
    # R is part of a run's settings (a resumed part matches it), except the
    # historical 64:
    default = settings_of(parse_args(['--smoke']))
    other = settings_of(parse_args(['--smoke', '--num-spectral-points', '16']))
    assert other == default + ' R 16'
