"""The uncertainty study on a tiny synthetic graph (seconds)."""
import csv
import math

import pytest
import torch
import torch.nn.functional as F

from benchmarks.uncertainty import (
    COLUMNS,
    METHODS,
    UncertaintyConfig,
    fit_temperature,
    held_out_split,
    render_summary,
    report,
)


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def read(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # a benchmark's whole run, in smoke mode
def test_smoke_writes_rows_resumes_and_summarises(tmp_path, restore_threads):
    from benchmarks.uncertainty import main
    results, summary = tmp_path / 'u.csv', tmp_path / 'u.md'
    argv = ['--smoke', '--results', str(results), '--summary', str(summary)]
    rows = main(argv + ['--resume'])
    assert len(rows) == 2 * len(METHODS)
    table = read(results)
    assert len(table) == 2 * len(METHODS)
    assert list(table[0]) == COLUMNS
    for row in table:
        for metric in ('accuracy', 'aurc', 'eaurc', 'ece', 'nll', 'brier'):
            assert 0.0 <= float(row[metric]) < 30.0, (row['method'], metric)
        assert (row['ood_auroc'] != '') == (row['setting'] == 'ood')
        assert (row['temperature'] != '') == (row['method'] == 'gat-ts')
    ood = [row for row in table if row['setting'] == 'ood']
    assert {row['held_out'] for row in ood} == {'3'}
    # A resumed run finds every row done:
    assert main(argv + ['--resume']) == []
    assert len(read(results)) == 2 * len(METHODS)
    text = summary.read_text()
    assert 'python -m benchmarks.uncertainty --smoke' in text
    assert '## Misclassification detection' in text
    assert '## Out-of-distribution detection' in text
    for method in METHODS:
        assert f'| Tiny | {method} | 1 |' in text


def test_changed_settings_do_not_resume_old_rows():
    config = UncertaintyConfig()
    assert config.label('gat-msp') == '{}'
    assert config.label('kep') != UncertaintyConfig(
        kep_eta_ksvd=1.0).label('kep')
    assert config.label('gat-msp') == UncertaintyConfig(
        kep_eta_ksvd=1.0).label('gat-msp')


def test_fit_temperature_recovers_the_generating_temperature():
    generator = torch.Generator().manual_seed(0)
    logits = 3 * torch.randn(20000, 5, generator=generator)
    labels = torch.multinomial((logits / 2.5).softmax(-1), 1,
                               generator=generator).squeeze(-1)
    temperature = fit_temperature(logits, labels)
    assert abs(temperature - 2.5) < 0.1

    def nll(t):
        return float(F.cross_entropy(logits.double() / t, labels))

    assert nll(temperature) <= min(nll(temperature * 1.05),
                                   nll(temperature / 1.05))


def test_held_out_split():
    from torch_geometric.data import Data
    y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    mask = torch.ones(8, dtype=torch.bool)
    data = Data(x=torch.randn(8, 2), y=y, train_mask=mask, val_mask=mask,
                test_mask=mask)
    split, in_dist = held_out_split(data, 4, 2)
    assert torch.equal(in_dist, y < 2)
    assert torch.equal(split.train_mask, y < 2)
    assert torch.equal(split.val_mask, y < 2)
    assert torch.equal(split.test_mask, mask)
    assert torch.equal(split.y, torch.tensor([0, 1, -1, -1, 0, 1, -1, -1]))
    assert torch.equal(data.y, y)  # the original is untouched
    for bad in (0, 4):
        with pytest.raises(ValueError, match=f'got {bad}'):
            held_out_split(data, 4, bad)


def test_report_scores_in_distribution_nodes_and_ood_separation():
    probs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3], [0.6, 0.4],
                          [0.5, 0.5], [0.55, 0.45]])
    labels = torch.tensor([0, 1, 1, 0, 0, 0])
    mask = torch.ones(6, dtype=torch.bool)
    in_dist = torch.tensor([True, True, True, True, False, False])
    row = report(probs, labels, mask, in_dist)
    assert row['accuracy'] == pytest.approx(0.75)  # the 4 ID nodes
    # ID confidences 0.9, 0.8, 0.7, 0.6 all above OOD 0.5, 0.55:
    assert row['ood_auroc'] == 1.0 and row['ood_fpr95'] == 0.0
    plain = report(probs, labels, mask)
    assert math.isnan(plain['ood_auroc'])
    assert plain['accuracy'] == pytest.approx(5 / 6)  # tie -> class 0


def test_render_summary_mean_and_std():
    rows = []
    for seed, accuracy in enumerate((0.8, 0.9)):
        row = {column: '' for column in COLUMNS}
        row.update(dataset='Cora', method='kep', setting='misclassification',
                   seed=str(seed), accuracy=str(accuracy), ece='0.05',
                   config='{"rank":8}')
        rows.append(row)
    text = render_summary(rows, command='python benchmarks/uncertainty.py')
    line = next(line for line in text.splitlines()
                if line.startswith('| Cora | kep |'))
    assert '| 2 | 85.00 ± 7.07 |' in line
    assert '5.00 ± 0.00' in line
    assert '`kep` {"rank":8}' in text


@pytest.mark.parametrize('keep', [False, True])
def test_mikan_output_layer_magnitude_follows_the_config(keep):
    from benchmarks.uncertainty import build
    protocol = dict(hidden=4, heads=2, out_heads=1, dropout=0.6)
    config = UncertaintyConfig(mikan_output_magnitude=keep)
    model = build('mikan', 6, 3, protocol, config)
    assert model.conv1.magnitude and model.conv2.magnitude == keep
    assert (f'"out_magnitude":{str(keep).lower()}' in config.label('mikan'))


def test_mikan_node_path_reaches_the_kernels_and_not_the_key():
    from benchmarks.uncertainty import build
    protocol = dict(hidden=4, heads=2, out_heads=1, dropout=0.6)
    config = UncertaintyConfig(node_path='plain')
    model = build('mikan', 6, 3, protocol, config)
    assert model.conv1.kernel.node_path == 'plain'
    assert model.conv2.kernel.node_path == 'plain'
    assert config.label('mikan') == UncertaintyConfig().label('mikan')
    with pytest.raises(ValueError, match="'node_path' 'fast'"):
        build('mikan', 6, 3, protocol, UncertaintyConfig(node_path='fast'))


def test_two_layer_gat_output_layer_arguments_override():
    from ikgat import IKGATConv
    from ikgat.kernels.rbf import RBFKernel
    from ikgat.models import TwoLayerGAT
    model = TwoLayerGAT(6, 4, 3, IKGATConv, heads=2,
                        conv_kwargs=dict(kernel='rbf', p=3.0),
                        out_conv_kwargs=dict(p=1.5))
    assert model.conv1.p == 3.0 and model.conv2.p == 1.5
    assert type(model.conv1.kernel) is RBFKernel
    assert type(model.conv2.kernel) is RBFKernel


def test_render_summary_separates_settings_of_one_method():
    rows = []
    for config, accuracy in (('{"out_magnitude":false}', 0.8),
                             ('{"out_magnitude":true}', 0.6)):
        for seed in range(2):
            row = {column: '' for column in COLUMNS}
            row.update(dataset='Cora', method='mikan',
                       setting='misclassification', seed=str(seed),
                       accuracy=str(accuracy), config=config)
            rows.append(row)
    text = render_summary(rows)
    lines = [line for line in text.splitlines()
             if line.startswith('| Cora | mikan')]
    assert len(lines) == 2
    assert '| Cora | mikan {"out_magnitude":false} | 2 | 80.00 ± 0.00 |' in (
        lines[0])
    assert '| Cora | mikan {"out_magnitude":true} | 2 | 60.00 ± 0.00 |' in (
        lines[1])


def test_a_torn_row_is_repaired_on_resume(tmp_path, restore_threads, capsys):
    from benchmarks.uncertainty import main
    results, summary = tmp_path / 'u.csv', tmp_path / 'u.md'
    argv = ['--smoke', '--results', str(results), '--summary', str(summary),
            '--methods', 'gat-msp', 'mikan', '--settings', 'ood', '--resume']
    main(argv)
    whole = results.read_bytes()
    results.write_bytes(whole[:-40])  # mikan's row cut off mid-line
    rows = main(argv)
    assert [row['method'] for row in rows] == ['mikan']
    assert 'removed a torn last row' in capsys.readouterr().err
    # The rows before the torn one are kept as they were:
    assert results.read_bytes().startswith(
        whole[:whole.rfind(b'\n', 0, -1) + 1])
    assert [row['method'] for row in read(results)] == ['gat-msp', 'mikan']
    # Two rows on one line are named, in one line, with status 2:
    results.write_bytes(whole[:-40] + whole[whole.find(b'\n') + 1:])
    with pytest.raises(SystemExit) as exit:
        main(argv[:-1] + ['--summary-only'])
    assert exit.value.code == 2
    assert f'{results}:3: ' in capsys.readouterr().err
