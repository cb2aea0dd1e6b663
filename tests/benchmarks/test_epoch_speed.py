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
