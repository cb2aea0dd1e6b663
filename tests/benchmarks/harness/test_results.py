"""Results files: fsynced rows, a torn last row repaired and re-run on
resume, malformed lines named with file:line."""
import csv
import os

import pytest

from benchmarks.harness.data import BenchData
from benchmarks.harness.results import (
    COLUMNS,
    MalformedResults,
    ResultsWriter,
    read_results,
    repair_torn_row,
)
from benchmarks.planetoid import main as planetoid_main
from benchmarks.planetoid import run_benchmark
from ikgat.data import toy_citation_graph

QUICK = dict(epochs=4, patience=2)


def tiny_loader(name: str) -> BenchData:
    data = toy_citation_graph(num_nodes=48, num_classes=3, num_train=12,
                              num_val=18)
    return BenchData(name, data, data.num_features, 3)


def run(results, seeds, resume=True):
    return run_benchmark(['Tiny'], ['gat'], seeds, results=str(results),
                         tag='t', protocol_overrides=QUICK, device='cpu',
                         progress=False, load_dataset=tiny_loader,
                         resume=resume)


def test_every_row_is_fsynced(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, 'fsync',
                        lambda fd: synced.append(fd) or real_fsync(fd))
    writer = ResultsWriter(str(tmp_path / 'r.csv'), ['a', 'b'])
    writer.write(dict(a=1, b=2))
    writer.write(dict(a=3, b=4))
    assert len(synced) == 2
    assert (tmp_path / 'r.csv').read_bytes() == b'a,b\r\n1,2\r\n3,4\r\n'


def test_a_torn_last_row_is_repaired_and_run_again(tmp_path, capsys):
    results = tmp_path / 'planetoid.csv'
    run(results, [0, 1])
    whole = results.read_bytes()
    last_row = whole[whole.rstrip(b'\r\n').rfind(b'\n') + 1:]
    assert last_row.startswith(b'Tiny,gat,t,1,')
    # A write cut off in the middle of seed 1's row:
    results.write_bytes(whole[:-len(last_row) // 2])
    rows = run(results, [0, 1, 2])
    assert 'removed a torn last row' in capsys.readouterr().err
    assert [int(r['seed']) for r in rows] == [1, 2]  # seed 1 runs again
    stored = read_results(str(results))
    assert [int(r['seed']) for r in stored] == [0, 1, 2]
    assert stored[1] == {k: str(v) for k, v in rows[0].items()} | {
        'git_commit': stored[1]['git_commit']}


def test_repair_leaves_a_whole_file_alone(tmp_path):
    path = tmp_path / 'r.csv'
    assert repair_torn_row(str(path)) is None  # missing
    path.write_text('a,b\n1,2\n')
    assert repair_torn_row(str(path)) is None
    assert path.read_text() == 'a,b\n1,2\n'
    path.write_text('a,b')  # a torn header: the file starts again
    assert repair_torn_row(str(path)) == 'a,b'
    assert path.read_bytes() == b''


def _glued(tmp_path):
    # The old failure: a torn row, then the next row appended onto it.
    results = tmp_path / 'planetoid.csv'
    run(results, [0, 1])
    lines = results.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:30]
    results.write_text(''.join(lines))
    return results


def test_a_malformed_line_is_named(tmp_path):
    results = _glued(tmp_path)
    with pytest.raises(MalformedResults, match=r'planetoid\.csv:2: \d+ fields '
                       r'where the header has 17'):
        read_results(str(results))
    with open(results, 'w', newline='') as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        writer.writerow(dict.fromkeys(COLUMNS, '1') | dict(val_acc='gat'))
    with pytest.raises(MalformedResults, match=r"planetoid\.csv:2: column "
                       r"'val_acc' holds 'gat', not a number"):
        read_results(str(results))


def test_the_summary_names_a_malformed_line(tmp_path, capsys):
    results = _glued(tmp_path)
    with pytest.raises(SystemExit) as exit:
        planetoid_main(['summary', '--results', str(results), '--tag', 't',
                        '--output', str(tmp_path / 'p.md'),
                        '--search-results', ''])
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f'{results}:2: ' in err and 'fields where the header has 17' in err
