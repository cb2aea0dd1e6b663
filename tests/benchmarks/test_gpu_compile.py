"""The GPU compile check (benchmarks.gpu_compile) and the launch seam it
records from (ikgat.kernels.triton_runtime): launches recorded from a real
layer step without running anything; the compiler's verdict on a kernel that
does not compile, on one that spills and on one of ours; a kernel that fails
to build on a user's machine is one line; an old Triton takes the PyTorch
path with one warning.  The whole grid, with Triton 3.6 too, runs in CI
(``.ci/run``)."""
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

import ikgat.kernels.triton_runtime as triton_runtime
from benchmarks.gpu_compile import occupancy, verdict
from ikgat import IKGATConv

triton = pytest.importorskip('triton')

CASES = 'tests.benchmarks.gpu_compile_cases'


def recorded_step(dropout=0.6):
    torch.manual_seed(0)
    conv = IKGATConv(16, 8, heads=8, dropout=dropout,
                     kernel_kwargs=dict(node_path='triton')).train()
    conv.fused_attention = 'always'
    x = torch.randn(40, 16, requires_grad=True)
    edge_index = torch.randint(0, 40, (2, 160))
    with triton_runtime.record_launches() as launches:
        conv(x, edge_index).sum().backward()
    return launches


@pytest.mark.skipif(os.environ.get('TRITON_INTERPRET') != '1',
                    reason='records the CPU path of the interpreter')
def test_a_training_step_is_recorded_and_nothing_runs(monkeypatch):
    from triton.runtime.interpreter import InterpretedFunction

    def refuse(*args, **kwargs):
        raise AssertionError('a kernel ran while recording')

    monkeypatch.setattr(InterpretedFunction, 'run', refuse)
    launches = recorded_step()
    names = sorted({launch.name for launch in launches})
    assert names == ['_backward_dst_body', '_backward_src_body',
                     '_estimate_body', '_forward_body', '_grad_points_body',
                     '_grad_x_body']
    forward = next(launch for launch in launches
                   if launch.name == '_forward_body')
    assert forward.constexprs['HAS_DROPOUT'] is True
    assert forward.signature['score_src'] == '*fp32'
    assert forward.signature['negative_slope'] == 'fp32'
    assert forward.options['maxnreg'] == triton_runtime.MAX_REGISTERS
    # Outside the block, launches run again:
    assert triton_runtime._RECORDING is None


def compile_in_a_process(launches, tmp_path, targets=('90', )):
    path = tmp_path / 'launches.json'
    path.write_text(json.dumps(launches))
    env = {key: value for key, value in os.environ.items()
           if key != 'TRITON_INTERPRET'}
    env.update(TRITON_DUMP_PTXAS_LOG='1', TRITON_ALWAYS_COMPILE='1',
               TRITON_DEFAULT_FP_FUSION='1')
    subprocess.run([sys.executable, '-m', 'benchmarks.gpu_compile',
                    '--compile-from', str(path), '--jobs', '1', '--targets',
                    *targets], env=env, check=True, capture_output=True)
    return json.loads((tmp_path / 'launches.json.out').read_text())


@pytest.mark.slow  # compiles three kernels in a process (9 s)
@pytest.mark.skipif(os.environ.get('TRITON_INTERPRET') != '1',
                    reason='records the CPU path of the interpreter')
def test_the_check_fails_a_compile_error_and_a_spill_and_passes_ours(
        tmp_path):
    ours = next(launch for launch in recorded_step()
                if launch.name == '_forward_body')
    options = dict(maxnreg=triton_runtime.MAX_REGISTERS)
    launches = [
        dict(module=CASES, name='_mismatched_body',
             signature=dict(x='*fp32', out='*fp32', N='i32',
                            HALVE='constexpr', BLOCK='constexpr'),
             constexprs=dict(HALVE=True, BLOCK=128), aligned=['x', 'out'],
             options=options),
        dict(module=CASES, name='_wide_tile_body',
             signature=dict(x='*fp32', points='*fp32', out='*fp32', N='i32',
                            C='i32', BLOCK_N='constexpr',
                            BLOCK_R='constexpr', BLOCK_C='constexpr'),
             constexprs=dict(BLOCK_N=32, BLOCK_R=32, BLOCK_C=64),
             aligned=['x', 'points', 'out'], options=options),
        dict(ours._asdict(), aligned=list(ours.aligned)),
    ]
    mismatched, wide, forward = [row['90'] for row in
                                 compile_in_a_process(launches, tmp_path)]
    assert 'Return type mismatch' in verdict(mismatched)
    assert wide['spill'] > 0
    assert verdict(wide).startswith('spills')
    assert verdict(forward) is None
    assert forward['spill'] == 0
    assert forward['registers'] <= triton_runtime.MAX_REGISTERS


def test_verdict_and_occupancy():
    build = dict(registers=64, spill=0, shared=0, warps=4)
    assert verdict(build) is None
    assert verdict(dict(build, spill=8)) == 'spills 8 B'
    assert '200 registers' in verdict(dict(build, registers=200))
    assert verdict(dict(error='CompilationError: x')).startswith(
        'CompilationError')
    # 64 registers x 128 threads: 8 blocks of 64k registers; 255: 2;
    # shared memory and the thread limit bound it too.
    assert occupancy(64, 4, 0, 90) == 8
    assert occupancy(255, 4, 0, 90) == 2
    assert occupancy(32, 4, 0, 90) == 16
    assert occupancy(32, 4, 100 * 1024, 90) == 2


class _FailingKernel:
    r"""A jitted kernel whose build fails as Triton's compiler fails."""
    def __init__(self, error):
        self.error = error
        self.fn = lambda: None
        self.fn.__name__ = '_forward_body'

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            raise self.error
        return run


def test_a_kernel_that_does_not_build_is_one_line():
    from triton.compiler.errors import CompilationError
    inner = CompilationError('def f():\n    return 1.', None,
                             'Return type mismatch: <[8, 8], fp32> and fp32')
    outer = CompilationError('p = p * _keep(...)\n        ^', None, None)
    outer.__cause__ = inner
    with pytest.raises(triton_runtime.KernelBuildError) as caught:
        triton_runtime.launch(_FailingKernel(outer), (1, ),
                              switch=triton_runtime.ATTENTION_SWITCH)
    message = str(caught.value)
    assert '\n' not in message
    assert '_forward_body' in message
    assert f'Triton {triton.__version__}' in message
    assert 'fused_attention=False' in message
    assert 'Return type mismatch' in message
    assert 'Return type mismatch' in caught.value.details
    assert caught.value.__cause__ is None  # no chained Triton traceback


def test_the_command_line_prints_a_build_error_in_one_line(monkeypatch,
                                                           capsys):
    import ikgat.cli as cli

    def fail(args):
        raise triton_runtime.KernelBuildError(
            'ikgat: Triton 3.6.0 could not build the kernel _forward_body '
            '(CompilationError: x); pass fused_attention=False to avoid it',
            'Traceback: 60 lines of Triton')

    monkeypatch.setattr(cli, 'run_train', fail)
    with pytest.raises(SystemExit) as caught:
        cli.main(['train', '--dataset', 'Cora', '--epochs', '1'])
    assert caught.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert 'fused_attention=False' in err and 'Traceback' not in err


def test_an_old_triton_takes_the_pytorch_path_and_warns_once(monkeypatch):
    monkeypatch.setattr(triton, '__version__', '3.5.1')
    triton_runtime.triton_usable.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            assert not triton_runtime.triton_usable()
            assert not triton_runtime.triton_usable()
            conv = IKGATConv(8, 4, heads=2)
            conv.fused_attention = 'always'
            x = torch.randn(5, 8)
            edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
            assert conv._fused_kernels(edge_index, x) is None
        messages = [str(w.message) for w in caught
                    if 'older than 3.6' in str(w.message)]
        assert len(messages) == 1
        assert "pip install 'triton>=3.6'" in messages[0]
    finally:
        triton_runtime.triton_usable.cache_clear()


def test_every_option_is_called_at_every_degree():
    # The edge block follows the in-degree and the options choose the
    # kernels' variants (edge features: the gated kernels), so the grid
    # crosses them: each option at each degree, in every mode.
    from benchmarks.gpu_compile import DEGREES, layer_calls
    labels = [label for label, _ in layer_calls(['IKGATConv-direct'])]
    for degree in DEGREES:
        for option in ('edge', 'bipartite', 'x_dst=None'):
            assert any(f'degree={degree} {option}' in label
                       and 'train dropout=0.6' in label for label in labels)
        assert any(f'degree={degree} edge alpha' in label
                   for label in labels)
