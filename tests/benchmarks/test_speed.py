"""The speed study (``python -m benchmarks.speed``) runs end to end on tiny
graphs (no timing assertions), and its baselines compute the same function
as the layer."""
import pytest
import torch

from benchmarks import speed
from benchmarks.speed_steps import (
    NaiveEdgeWise,
    make_ikgat,
    synthetic_graph,
    without_kernel,
)


@pytest.mark.slow
def test_smoke_mode_writes_the_tables(tmp_path):
    out = tmp_path / 'speed.md'
    text = speed.main(['--smoke', '--out', str(out)])
    assert out.read_text() == text
    assert text.startswith('# Speed and memory')
    assert f'Command: `python -m benchmarks.speed --out {out} --smoke`' in text
    for line in ('- CPU: ', '- torch ', '- load average', 'Total run time'):
        assert line in text, line
    for heading in ('## Layers', 'Split of IKGATConv', '## R sweep',
                    '### Edge doubling at fixed N', '### Naive edge-wise',
                    '## Key ratios'):
        assert heading in text, heading
    for row in ('| GATConv |', '| IKGATConv `direct` |',
                '| IKGATConv `implicit` |', '| MIKANConv |',
                '| naive edge-wise `direct` (node path `plain`) |',
                '| naive edge-wise `direct` (node path `eager`) |',
                '| `direct` (plain) |', '| `direct` (eager) |', '| `rbf` |',
                '| 2 → 4 | 200 |',
                '| tiny (synthetic): IKGATConv direct (eager) / GATConv time |'
                ):
        assert row in text, row
    assert 'failed' not in text and 'Error' not in text


def test_cli_runs_the_smoke_mode(tmp_path, capsys):
    from benchmarks.speed import main
    out = tmp_path / 'speed.md'
    main(['--smoke', '--kernels', 'direct', '--no-mikan',
          '--naive', '--split-kernels', 'direct', '--r-sweep', '--degrees',
          '--no-memory', '--out', str(out)])
    assert f'wrote {out}' in capsys.readouterr().out
    text = out.read_text()
    command = text.split('Command: `', 1)[1].split('`', 1)[0]
    assert command.startswith('python -m benchmarks.speed ')
    for flag in ('--smoke', '--kernels direct', '--no-mikan', '--naive',
                 '--split-kernels direct', '--r-sweep', '--degrees',
                 '--no-memory', f'--out {out}'):
        assert flag in command, flag
    assert '| IKGATConv `direct` |' in text and '## R sweep' not in text
    assert '| `direct` (plain) |' in text and '| MIKANConv |' not in text


@pytest.mark.parametrize('kernel', ['direct', 'rff'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_node_paths_and_baselines_match_the_layer(kernel, dtype):
    # Outputs within 1e-5 in float32 (what the benchmark times); gradients
    # too in float64 (in float32 they sum to ~100 and differ by ~1e-6
    # relative, which is rounding).
    graph = synthetic_graph('tiny', 60, 300, 16, seed=0)
    x = graph.x.to(dtype)
    torch.manual_seed(0)
    conv = make_ikgat(16, kernel, num_features=8).to(dtype)
    grad = torch.randn(60, 64, dtype=dtype)

    def output_and_grads(model):
        model.zero_grad()
        out = model(x, graph.edge_index)
        if dtype == torch.float32:
            return out.detach()
        out.backward(grad)
        return out.detach(), {
            name: param.grad.clone()
            for name, param in conv.named_parameters()
        }

    expected = output_and_grads(conv)  # the default node path, 'eager'
    for node_path in ('plain', 'eager'):
        conv.kernel.node_path = node_path
        for model in (conv, NaiveEdgeWise(conv)):
            torch.testing.assert_close(output_and_grads(model), expected,
                                       atol=1e-5, rtol=1e-5)
    rest = without_kernel(conv, x)  # the kernel output precomputed
    with torch.no_grad():
        torch.testing.assert_close(rest(x, graph.edge_index),
                                   conv(x, graph.edge_index), atol=1e-5,
                                   rtol=1e-5)
