"""The transformer speed study (``python -m benchmarks.transformer_speed``)
runs end to end on a tiny graph (no timing assertions)."""
import pytest
import torch

from benchmarks import transformer_speed
from benchmarks.speed_steps import synthetic_graph


@pytest.mark.slow
def test_smoke_mode_writes_the_tables(tmp_path, capsys):
    out = tmp_path / 'transformer_speed.md'
    text = transformer_speed.main(['--smoke', '--out', str(out)])
    assert out.read_text() == text
    assert f'wrote {out}' in capsys.readouterr().out
    assert text.startswith('# Speed and memory: kernel attention vs '
                           'TransformerConv')
    assert ('Command: `python -m benchmarks.transformer_speed --smoke --out '
            f'{out}`') in text
    for line in ('- CPU: ', '- torch ', '- load average', '## tiny',
                 '## Targets', 'Total run time'):
        assert line in text, line
    for _, label in transformer_speed.LAYERS:
        assert f'| {label} |' in text, label
    labels = dict(transformer_speed.LAYERS)
    for key in transformer_speed.COMPILED:  # timed, no peak memory
        assert f'| {labels[key]}, compiled | ' in text, key
    assert '| time, both compiled |' in text
    assert '| TransformerConv | ' in text and '| 1.00x (cpu 1.00x) |' in text
    assert 'failed' not in text and 'Error' not in text


def test_every_layer_sees_one_self_loop_per_node():
    graph = transformer_speed.with_self_loops(
        synthetic_graph('g', 10, 30, 4))
    src, dst = graph.edge_index
    loops = src == dst
    assert int(loops.sum()) == 10
    assert torch.equal(src[loops].sort().values, torch.arange(10))


def test_rbf_layer_is_transformer_conv():
    graph = transformer_speed.with_self_loops(
        synthetic_graph('g', 12, 40, 6))
    reference = transformer_speed.make_layer('transformer', 6)
    conv = transformer_speed.make_layer('rbf', 6)
    conv.load_state_dict(reference.state_dict(), strict=False)
    assert torch.allclose(conv(graph.x, graph.edge_index),
                          reference(graph.x, graph.edge_index), atol=1e-5)
