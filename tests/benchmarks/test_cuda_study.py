"""The one command of the CUDA study runs every part (at toy sizes on CPU
with --quick) and writes its summary."""
import pytest

from benchmarks import cuda_study


@pytest.mark.slow
def test_every_part_runs_and_the_summary_lists_them(tmp_path, cora):
    statuses = cuda_study.main(['--output-dir', str(tmp_path), '--quick'])
    assert [name for name, _ in statuses] == [
        name for name, _ in cuda_study.parts(str(tmp_path), quick=True)]
    assert all(status == 0 for _, status in statuses), statuses
    summary = (tmp_path / 'summary.md').read_text()
    assert 'git commit' in summary and '## GAT recipe' in summary
    for name in ('gpu_profile.md', 'gpu_speed.md', 'gpu_speed_dropout.md',
                 'gpu_speed_products.md', 'gat_recipe.csv', 'launches.md',
                 'gpu_speed_transformer.md'):
        assert (tmp_path / name).stat().st_size > 0, name
    transformers = (tmp_path / 'gpu_speed_transformer.md').read_text()
    assert '| TransformerConv |' in transformers
    assert '| IKTransformerConv-direct |' in transformers
    # Every layer row of the three layer studies, beside the model:
    import json
    rows = json.loads((tmp_path / 'gpu_layers.json').read_text())
    assert {row['source'] for row in rows} == set(cuda_study.STUDY_FILES)
    assert {row['dropout'] for row in rows
            if row['source'] == 'gpu_speed_dropout.json'} == {0.6}
    direct = [row for row in rows if row['model'] == 'IKTransformerConv-direct']
    assert direct and all(row['predicted_ms'] > 0 for row in direct)
    assert 'gpu_layers.json' in summary


@pytest.mark.slow  # 4 s: a quick launch count
def test_parts_and_graphs_choose_what_runs(tmp_path):
    statuses = cuda_study.main(['--output-dir', str(tmp_path), '--quick',
                                '--parts', 'launches'])
    assert statuses == [('launch counts', 0)]
    assert (tmp_path / 'launches.md').stat().st_size > 0
    assert not (tmp_path / 'gpu_speed.md').exists()
    summary = (tmp_path / 'summary.md').read_text()
    assert 'launch counts' in summary and 'layer study' not in summary
    commands = dict(cuda_study.parts(str(tmp_path), False, ['arxiv']))
    assert commands['graph transformers'][1:4] == ['--graphs', 'arxiv',
                                                   '--models']


def test_the_profile_asks_for_a_gpu_or_smoke(tmp_path, capsys):
    import torch

    from benchmarks import gpu_profile
    if torch.cuda.is_available():
        pytest.skip('a GPU is here')
    with pytest.raises(SystemExit):
        gpu_profile.main(['--output', str(tmp_path / 'profile.md')])
    assert 'no CUDA device' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gpu_profile.main(['--smoke', '--graphs', 'arxiv', '--output',
                          str(tmp_path / 'profile.md')])
    assert "unknown graphs ['arxiv']" in capsys.readouterr().err


def test_the_full_study_asks_for_a_gpu(tmp_path, capsys):
    import torch
    if torch.cuda.is_available():
        pytest.skip('a GPU is here')
    with pytest.raises(SystemExit):
        cuda_study.main(['--output-dir', str(tmp_path)])
    assert 'needs a GPU' in capsys.readouterr().err
