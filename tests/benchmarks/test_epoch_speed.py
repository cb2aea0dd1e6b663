"""The whole-epoch study runs, names its baselines and its R, and writes
rows whose ratio is the model's median over its baseline's."""
import csv

from benchmarks import epoch_speed


def test_rows_with_baselines_and_spectral_points(tmp_path):
    output = str(tmp_path / 'epoch.csv')
    epoch_speed.main(['--datasets', 'Cora', '--models', 'IKGATConv direct',
                      'MIKANTransformerConv', '--rounds', '1', '--warmup',
                      '0', '--num-spectral-points', '4', '--output', output])
    with open(output, newline='') as file:
        rows = list(csv.DictReader(file))
    models = [row['model'] for row in rows]
    assert models == ['TransformerConv', 'GATConv', 'IKGATConv direct R=4',
                      'MIKANTransformerConv R=4']
    for row in rows:
        ratio = float(row['median_ms']) / float(row['baseline_ms'])
        assert abs(ratio - float(row['ratio'])) < 1e-9
    assert '| Cora | 1 | IKGATConv direct R=4 |' in open(
        output[:-4] + '.md').read()


def test_layers_take_the_spectral_points():
    make, _ = epoch_speed.layers(8)['IKGATConv direct']
    assert make(4, 2, heads=1).kernel.num_spectral_points == 8
    make, _ = epoch_speed.layers()['MIKANConv']
    assert make(4, 2, heads=1).kernel.num_spectral_points == 64
    make, _ = epoch_speed.layers()['IKGATConv direct']  # its own default
    assert make(4, 2, heads=1).kernel.num_spectral_points == 16


def test_paired_ratio_is_the_geometric_mean_of_the_rounds_ratios():
    ratio, low, high = epoch_speed.paired_ratio([2.0, 4.0], [1.0, 2.0])
    assert (ratio, low, high) == (2.0, 2.0, 2.0)
    # Ratios 1.1, 1.0, 0.9 of three rounds: geometric mean inside the
    # interval, which holds 1; below two rounds there is no interval.
    ratio, low, high = epoch_speed.paired_ratio([1.1, 1.0, 0.9],
                                                [1.0, 1.0, 1.0])
    assert abs(ratio - (1.1 * 0.9)**(1 / 3)) < 1e-12
    assert low < 1.0 < high and low < ratio < high
    ratio, low, high = epoch_speed.paired_ratio([1.5], [1.0])
    assert ratio == 1.5 and low != low and high != high  # nan


def test_rows_of_an_older_file_keep_their_values(tmp_path):
    # A file written before the paired columns: rewritten with them, its
    # old rows empty there, then the new rows appended.
    path = str(tmp_path / 'old.csv')
    with open(path, 'w', newline='') as file:
        file.write('dataset,threads,model,baseline,median_ms,baseline_ms,'
                   'ratio,rounds,commit,machine\n'
                   'Cora,1,GATConv,GATConv,100,100,1.0,3,abc,cpu\n')
    row = dict(dataset='Cora', threads=1, model='IKGATConv rbf',
               baseline='GATConv', median_ms=110.0, baseline_ms=100.0,
               ratio=1.1, paired_ratio=1.09, ratio_low=1.01, ratio_high=1.17,
               rounds=3, commit='def', machine='cpu')
    epoch_speed.append_rows(path, [row])
    with open(path, newline='') as file:
        rows = list(csv.DictReader(file))
    assert [r['model'] for r in rows] == ['GATConv', 'IKGATConv rbf']
    assert rows[0]['ratio'] == '1.0' and rows[0]['ratio_low'] == ''
    assert float(rows[1]['ratio_high']) == 1.17
    text = epoch_speed.report(path, 'cmd')
    assert '| 1.00x | — |' in text and '1.09x [1.01, 1.17]' in text
