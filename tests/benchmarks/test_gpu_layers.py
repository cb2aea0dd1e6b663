"""The committed GPU layer rows: one row per measured layer, beside the
cost model's prediction, appended atomically."""
import json

import pytest

from benchmarks import gpu_layers, gpu_model


def study(models, ms=2.0):
    header = {'device': 'NVIDIA H200', 'torch': '2.11.0', 'triton': '3.6.0',
              'git commit': 'abc123', 'command': 'gpu_speed'}
    layers = [dict(graph='arxiv', nodes=169343, edges=1166243, features=128,
                   model=model, precision='float32', ms=ms,
                   peak_bytes=3 * 2**20, step_bytes=2**20)
              for model in models]
    return dict(header=header, layers=layers)


def test_a_row_per_layer_with_the_models_prediction():
    rows = gpu_layers.rows_of_study(
        study(['IKGATConv-direct', 'IKGATConv-direct-compiled', 'MIKANConv',
               'GATConv']), 0.6, 'gpu_speed_dropout.json')
    assert [(row['model'], row['compiled']) for row in rows] == [
        ('IKGATConv-direct', False), ('IKGATConv-direct', True),
        ('MIKANConv', False), ('GATConv', False)]
    assert all(row['device'] == 'NVIDIA H200' and row['dropout'] == 0.6
               and row['peak_mib'] == 3.0 and row['commit'] == 'abc123'
               for row in rows)
    expected = gpu_model.ikgat_layer(
        gpu_model.ARXIV, 'direct',
        rows=gpu_model.load_builds(gpu_model.COMPILE_JSON)).total * 1e3
    assert rows[0]['predicted_ms'] == pytest.approx(expected, abs=1e-3)
    assert rows[2]['predicted_ms'] is None  # not modelled
    assert rows[3]['predicted_ms'] == pytest.approx(
        gpu_model.gatconv_step(gpu_model.ARXIV).total * 1e3, abs=1e-3)


def test_rows_are_appended_and_bad_files_refused(tmp_path, capsys):
    first, second = tmp_path / 'gpu_speed.json', tmp_path / 'b_dropout.json'
    first.write_text(json.dumps(study(['GATConv'])))
    second.write_text(json.dumps(study(['GATConv', 'IKGATConv-rbf'])))
    into = tmp_path / 'rows' / 'gpu_layers.json'
    assert gpu_layers.main([str(first), '--into', str(into)]) == 1
    assert gpu_layers.main([str(second), '--into', str(into)]) == 3
    rows = json.loads(into.read_text())
    assert [row['dropout'] for row in rows] == [0.0, 0.6, 0.6]
    with pytest.raises(SystemExit):
        gpu_layers.main([str(tmp_path / 'missing.json'), '--into',
                         str(into)])
    assert 'missing.json is not a benchmarks.gpu_speed result' in \
        capsys.readouterr().err
    into.write_text('{"not": "a list"}')
    with pytest.raises(SystemExit):
        gpu_layers.main([str(first), '--into', str(into)])
    assert 'expected a JSON list of rows' in capsys.readouterr().err
