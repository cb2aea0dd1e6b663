"""benchmarks/scale.py on tiny graphs: runs, writes its table, reports an
out-of-memory and skips by extrapolation (no timing assertions)."""
import pytest

from benchmarks.scale import main, predict_peak


@pytest.mark.slow  # a subprocess per model and size (about 20 s)
def test_scale_runs_and_writes_a_table(tmp_path):
    output = tmp_path / 'scale.md'
    main(['--fractions', '0.0001', '--models', 'gat', 'ikgat',
          'ikgat-propagate', 'ikgat-edge-updater', '--steps', '1',
          '--warmup', '0', '--output', str(output)])
    lines = [line for line in output.read_text().splitlines()
             if line.startswith('| 0.000')]
    assert len(lines) == 4 and all(line.endswith('| ok |') for line in lines)


@pytest.mark.slow  # subprocesses
def test_scale_reports_out_of_memory_and_skips_larger_sizes(tmp_path):
    output = tmp_path / 'scale.md'
    main(['--fractions', '0.001', '0.002', '--models', 'gat', '--steps', '1',
          '--warmup', '0', '--budget-gb', '0.01', '--output', str(output)])
    text = output.read_text()
    assert 'out of memory' in text
    assert 'skipped: out of memory at a smaller size' in text


def test_extrapolation():
    rows = [dict(fraction=0.25, peak=3.0, status='ok'),
            dict(fraction=0.5, peak=5.0, status='ok')]
    assert predict_peak(rows, 1.0) == 9.0  # linear through both
    assert predict_peak(rows[:1], 1.0) == 12.0  # proportional from one
    assert predict_peak([], 1.0) is None


def test_breakdown(capsys):
    main(['--breakdown', '--fraction', '0.0001', '--models', 'gat', 'ikgat'])
    out = capsys.readouterr().out
    assert out.count('bytes per edge') == 2 and 'B/edge' in out
