"""benchmarks/startup.py with stand-in commands: interleaved rounds, the
report's medians and ratios, and a failing command named (no timing
assertions beyond positivity)."""
import sys

import pytest

from benchmarks import startup


def test_report_of_interleaved_rounds(tmp_path, monkeypatch):
    order = []
    monkeypatch.setattr(startup, 'wall_time',
                        lambda arguments: order.append(arguments[-1]) or
                        (0.2 if arguments[-1] == 'ikgat' else 1.0))
    commands = {'import torch_geometric': ['torch_geometric'],
                'import ikgat': ['ikgat']}
    monkeypatch.setattr(startup, 'COMMANDS', commands)
    text = startup.main(['--rounds', '3', '--output',
                         str(tmp_path / 'startup.md')])
    # one untimed round, then 3 timed ones, each command once per round:
    assert order == ['torch_geometric', 'ikgat'] * 4
    assert '| `import ikgat` | 0.20 | 0.20 | 0.20 |' in text
    assert ('| `import ikgat` / `import torch_geometric` | 0.20x | 0.20x |'
            in text)
    assert (tmp_path / 'startup.md').read_text() == text


def test_a_failing_command_is_named():
    with pytest.raises(RuntimeError, match='failed .1.: .*boom'):
        startup.wall_time([sys.executable, '-c',
                           'import sys; sys.exit("boom")'])
    assert startup.wall_time([sys.executable, '-c', 'pass']) > 0
