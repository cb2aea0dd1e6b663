"""The GPU compile check (benchmarks.gpu_compile) and the launch seam it
records from (ikgat.ops.runtime): launches recorded from a real
layer step without running anything, with the decisions CUDA takes (the
transformer's gathered tables); a layer or option whose launches vanish
fails the check; the compiler's verdict on a kernel that does not compile
(fast), on one that spills and on one of ours (slow); Triton's build key
tells alignment variants apart and merges launches Triton builds once;
stored verdicts are reused; a kernel that fails to build on a user's machine
is one line; an old Triton takes the PyTorch path with one warning.  The
whole grid, with Triton 3.6 too, runs in CI (``.ci/run``)."""
import json
import os
import os.path as osp
import subprocess
import sys
import warnings

import pytest
import torch

import benchmarks.gpu_compile as gpu_compile
import ikgat.ops.runtime as runtime
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
    with runtime.record_launches() as launches:
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
    assert names == ['backward_dst_kernel', 'backward_src_kernel',
                     'estimate_kernel', 'forward_kernel', 'grad_points_kernel',
                     'grad_x_kernel']
    forward = next(launch for launch in launches
                   if launch.name == 'forward_kernel')
    assert forward.constexprs['HAS_DROPOUT'] is True
    assert forward.signature['score_src'] == '*fp32'
    assert forward.signature['negative_slope'] == 'fp32'
    assert forward.options['maxnreg'] == runtime.MAX_REGISTERS
    # Outside the block, launches run again:
    assert runtime._RECORDING is None


def compile_in_a_process(launches, tmp_path, targets=('90', )):
    r"""The compile phase in a process without the interpreter: per
    launch, ``{'keys': {cc: key}, 'builds': {cc: build}}``, and what it
    said on stderr."""
    path = tmp_path / 'launches.json'
    path.write_text(json.dumps(launches))
    env = {key: value for key, value in os.environ.items()
           if key != 'TRITON_INTERPRET'}
    env.update(TRITON_DUMP_PTXAS_LOG='1', TRITON_ALWAYS_COMPILE='1',
               TRITON_DEFAULT_FP_FUSION='1',
               TRITON_CACHE_DIR=str(tmp_path / 'triton'))
    done = subprocess.run(
        [sys.executable, '-m', 'benchmarks.gpu_compile', '--compile-from',
         str(path), '--jobs', '1', '--cache', str(tmp_path / 'cache'),
         '--targets', *targets], env=env, check=True, capture_output=True,
        text=True)
    return (json.loads((tmp_path / 'launches.json.out').read_text()),
            done.stderr)


def mismatched(aligned=('x', 'out'), **options):
    r"""A launch of the known-bad helper of gpu_compile_cases: Triton's
    compiler rejects it in its front end, in well under a second."""
    return dict(module=CASES, name='_mismatched_body',
                signature=dict(x='*fp32', out='*fp32', N='i32',
                               HALVE='constexpr', BLOCK='constexpr'),
                constexprs=dict(HALVE=True, BLOCK=128), aligned=list(aligned),
                options=options)


@pytest.mark.slow  # a compile in a process of its own (5-6 s)
def test_the_check_fails_a_kernel_that_does_not_compile(tmp_path):
    # The twin of the test below, on one kernel: a kernel that the interpreter
    # runs and Triton's compiler rejects fails the check (a real compile,
    # in a process of its own, of a kernel that fails in the front end).
    # Its launches with other alignment hints are other builds; a launch
    # that names Triton's defaults (4 warps) is the same build.
    launches = [mismatched(maxnreg=runtime.MAX_REGISTERS),
                mismatched(('out', ), maxnreg=runtime.MAX_REGISTERS),
                mismatched(num_warps=4, maxnreg=runtime.MAX_REGISTERS)]
    results, stderr = compile_in_a_process(launches, tmp_path)
    keys = [result['keys']['90'] for result in results]
    assert keys[0] != keys[1] and keys[0] == keys[2]
    assert '3 launches x 1 targets, 2 builds: 0 stored verdicts, 2 ' \
        'compiled' in stderr
    build = results[0]['builds']['90']
    assert 'Return type mismatch' in verdict(build)
    # The table says so, and the command's status follows its failures:
    for launch in launches:
        launch.update(first='test', calls=1)
    rows = gpu_compile.table_rows(launches, {build['triton']: results}, [90])
    assert len(rows) == 2
    text, failures = gpu_compile.render(rows, 'test', len(launches))
    assert len(failures) == 2
    assert all('_mismatched_body' in failure
               and 'Return type mismatch' in failure for failure in failures)
    assert '3 launches, 2 builds x 1 (Triton, target): 2 failures.' in text
    assert ('| `_mismatched_body` | HALVE=True, BLOCK=128; unaligned: N |'
            in text)
    assert ('| `_mismatched_body` | HALVE=True, BLOCK=128; unaligned: x, N |'
            in text)
    # The verdict is stored by Triton's build key:
    stored = tmp_path / 'cache' / 'verdicts' / keys[0][:2] / f'{keys[0]}.json'
    assert json.loads(stored.read_text()) == build


def test_stored_verdicts_are_reused(tmp_path, monkeypatch):
    compiled = []

    def compile_launch(launch, cc):
        compiled.append((launch['name'], cc))
        return dict(cc=cc, triton='9.9', registers=40, spill=0, shared=0,
                    warps=4)

    monkeypatch.setattr(gpu_compile, 'build_key',
                        lambda launch, cc: f"{launch['name']}-{cc}")
    monkeypatch.setattr(gpu_compile, 'compile_launch', compile_launch)
    cache = str(tmp_path)
    launches = [dict(name='a'), dict(name='b'), dict(name='a')]
    first = gpu_compile.compile_all(launches, [90, 80], 1, cache)
    assert sorted(compiled) == [('a', 80), ('a', 90), ('b', 80), ('b', 90)]
    assert first[0] == first[2]
    compiled.clear()
    assert gpu_compile.compile_all(launches, [90, 80], 1, cache) == first
    assert compiled == []  # a hit reuses the verdict, compiling nothing
    gpu_compile.compile_all(launches[:1], [90], 1, cache, recompile=True)
    assert compiled == [('a', 90)]
    # No cache folder: everything compiles.
    compiled.clear()
    gpu_compile.compile_all(launches[:1], [90], 1, None)
    assert compiled == [('a', 90)]
    # The committed results' verdicts are read first, on a clean machine
    # too; what they lack compiles; --recompile leaves them out.
    compiled.clear()
    stored = {'a-90': dict(first[0]['builds']['90'], registers=41)}
    again = gpu_compile.compile_all(launches[:1], [90, 80], 1, None,
                                    stored=stored)
    assert again[0]['builds']['90']['registers'] == 41
    assert compiled == [('a', 80)]
    compiled.clear()
    gpu_compile.compile_all(launches[:1], [90], 1, None, recompile=True,
                            stored=stored)
    assert compiled == [('a', 90)]


def test_the_committed_verdicts_are_those_of_the_committed_table():
    # benchmarks/results/gpu_compile_verdicts.json and gpu_compile.json
    # come from one run (--output writes both): the same builds.
    verdicts = gpu_compile.load_stored(gpu_compile.STORED)
    with open(osp.join(osp.dirname(gpu_compile.STORED),
                       'gpu_compile.json')) as file:
        rows = json.load(file)
    table = sorted(json.dumps({key: value for key, value in build.items()
                               if key not in ('verdict', 'resident_warps')},
                              sort_keys=True)
                   for row in rows for build in row['builds'].values())
    assert sorted(json.dumps(build, sort_keys=True)
                  for build in verdicts.values()) == table


@pytest.mark.slow  # compiles three kernels in a process (9 s)
@pytest.mark.skipif(os.environ.get('TRITON_INTERPRET') != '1',
                    reason='records the CPU path of the interpreter')
def test_the_check_fails_a_compile_error_and_a_spill_and_passes_ours(
        tmp_path):
    ours = next(launch for launch in recorded_step()
                if launch.name == 'forward_kernel')
    options = dict(maxnreg=runtime.MAX_REGISTERS)
    launches = [
        mismatched(**options),
        dict(module=CASES, name='_wide_tile_body',
             signature=dict(x='*fp32', points='*fp32', out='*fp32', N='i32',
                            C='i32', BLOCK_N='constexpr',
                            BLOCK_R='constexpr', BLOCK_C='constexpr'),
             constexprs=dict(BLOCK_N=32, BLOCK_R=32, BLOCK_C=64),
             aligned=['x', 'points', 'out'], options=options),
        dict(ours._asdict(), aligned=list(ours.aligned)),
    ]
    results, _ = compile_in_a_process(launches, tmp_path)
    mismatch, wide, forward = [result['builds']['90'] for result in results]
    assert 'Return type mismatch' in verdict(mismatch)
    assert wide['spill'] > 0
    assert verdict(wide).startswith('spills')
    assert verdict(forward) is None
    assert forward['spill'] == 0
    assert forward['registers'] <= runtime.MAX_REGISTERS
    # The SASS shape the cost model's issue term reads: the per-target edge
    # loop is one loop, inside the kernel's instructions.
    assert forward['instructions'] > 0
    assert len(forward['loops']) == 1
    first, last = forward['loops'][0]
    assert 0 < first < last < forward['instructions']


def test_verdict_and_occupancy():
    build = dict(registers=64, spill=0, shared=0, warps=4)
    assert verdict(build) is None
    assert verdict(dict(build, spill=8)) == 'spills 8 B'
    # Registers are reported, not judged: every launch is built under its
    # cap (.maxnreg), which ptxas keeps to by spilling.
    assert verdict(dict(build, registers=200)) is None
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
        self.fn.__name__ = 'forward_kernel'

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
    with pytest.raises(runtime.KernelBuildError) as caught:
        runtime.launch(_FailingKernel(outer), (1, ),
                              switch=runtime.ATTENTION_SWITCH)
    message = str(caught.value)
    assert '\n' not in message
    assert 'forward_kernel' in message
    assert f'Triton {triton.__version__}' in message
    assert 'fused_attention=False' in message
    assert 'Return type mismatch' in message
    assert 'Return type mismatch' in caught.value.details
    assert caught.value.__cause__ is None  # no chained Triton traceback


def test_the_command_line_prints_a_build_error_in_one_line(monkeypatch,
                                                           capsys):
    import ikgat.cli as cli

    def fail(args):
        raise runtime.KernelBuildError(
            'ikgat: Triton 3.6.0 could not build the kernel forward_kernel '
            '(CompilationError: x); pass fused_attention=False to avoid it',
            'Traceback: 60 lines of Triton')

    monkeypatch.setattr('ikgat.cli.train.run_train', fail)
    with pytest.raises(SystemExit) as caught:
        cli.main(['train', '--dataset', 'Cora', '--epochs', '1'])
    assert caught.value.code == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert 'fused_attention=False' in err and 'Traceback' not in err


def test_an_old_triton_takes_the_pytorch_path_and_warns_once(monkeypatch):
    monkeypatch.setattr(triton, '__version__', '3.5.1')
    runtime.triton_usable.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            assert not runtime.triton_usable()
            assert not runtime.triton_usable()
            conv = IKGATConv(8, 4, heads=2)
            conv.fused_attention = 'always'
            x = torch.randn(5, 8)
            edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
            assert conv._route(edge_index, x).fused is False
        messages = [str(w.message) for w in caught
                    if 'older than 3.6' in str(w.message)]
        assert len(messages) == 1
        assert "pip install 'triton>=3.6'" in messages[0]
    finally:
        runtime.triton_usable.cache_clear()


def test_every_option_is_called_at_every_degree():
    # The edge block follows the in-degree and the options choose the
    # kernels' variants (edge features: the gated kernels), so the grid
    # crosses them: each option at each degree, in every mode.
    from benchmarks.gpu_compile import DEGREES, layer_calls
    labels = [call.label for call in layer_calls(['IKGATConv-direct'])]
    for degree in DEGREES:
        for option in ('edge', 'bipartite', 'x_dst=None'):
            assert any(f'degree={degree} {option}' in label
                       and 'train dropout=0.6' in label for label in labels)
        assert any(f'degree={degree} edge alpha' in label
                   for label in labels)


def test_the_transformer_calls_take_tables_and_points():
    # The drop-ins with spectral points on CUDA's gathered tables, and
    # again on the points (node_tables.ENABLED cleared); the exact kernel
    # has no points; KEPGATConv, without kernels, is called once a mode.
    from benchmarks.gpu_compile import NO_KERNEL, layer_calls
    calls = list(layer_calls(['IKTransformerConv-direct',
                              'IKTransformerConv-rbf', 'KEPGATConv']))
    direct = [call for call in calls
              if call.layer == 'IKTransformerConv-direct']
    tables = [call for call in direct if 'tables' in call.rules]
    points = [call for call in direct if 'points' in call.rules]
    assert len(tables) == len(points) == len(direct) // 2 > 0
    assert not any(('tables' in call.rules or 'points' in call.rules)
                   for call in calls if call.layer == 'IKTransformerConv-rbf')
    assert [call.rules for call in calls if call.layer == 'KEPGATConv'] == [
        (NO_KERNEL, ), (NO_KERNEL, )]


def test_cuda_decisions_give_the_transformer_its_tables():
    from ikgat.ops import node_tables
    x = torch.randn(3, 2, 4)
    assert not node_tables.uses_tables(x)  # the CPU rule
    with gpu_compile.cuda_decisions():
        assert node_tables.uses_tables(x)
    with gpu_compile.cuda_decisions(tables=False):
        assert not node_tables.uses_tables(x)
    assert not node_tables.uses_tables(x) and node_tables.ENABLED


def capture(layer, label):
    r"""The calls and launches of the grid call of :obj:`layer` labelled
    :obj:`label`, as :func:`~benchmarks.gpu_compile.capture_part` records
    them."""
    calls = gpu_compile.all_calls([layer])
    index = next(index for index, call in enumerate(calls)
                 if call.label == label)
    part = gpu_compile.capture_part([layer], index, len(calls))
    return gpu_compile.merge_parts([part])


@pytest.mark.skipif(os.environ.get('TRITON_INTERPRET') != '1',
                    reason='records the CPU path of the interpreter')
def test_the_capture_has_the_launch_only_cuda_makes():
    # IKTransformerConv implicit in evaluation, 4 draws x 1 head, R = 16:
    # on CUDA its fused attention gathers R = 16-wide node tables (the
    # cosines and sines of the R/2 distinct points of a symmetric draw), a
    # launch that the CPU path (spectral points) never made.
    calls, launches = capture(
        'IKTransformerConv-implicit',
        'IKTransformerConv-implicit 1x7 eval dropout=0 R=16 degree=8 tables')
    assert gpu_compile.coverage_failures(calls, launches) == []
    forward = [launch for launch in launches
               if launch['module'] == 'ikgat.ops.transformer_attention_triton'
               and launch['name'] == 'forward_kernel']
    assert len(forward) == 1
    assert forward[0]['constexprs'] == dict(
        LOG_SQUARE=True, HAS_DROPOUT=False, BLOCK_E=8, BLOCK_H=4, BLOCK_D=16,
        BLOCK_C=8)
    assert forward[0]['options']['num_warps'] == 4
    # The same call on the points: the Fourier-pair kernels.
    _, launches = capture(
        'IKTransformerConv-implicit',
        'IKTransformerConv-implicit 1x7 eval dropout=0 R=16 degree=8 points')
    assert {launch['module'] for launch in launches} == {
        'ikgat.ops.transformer_fourier'}


@pytest.mark.skipif(os.environ.get('TRITON_INTERPRET') != '1',
                    reason='records the CPU path of the interpreter')
def test_a_layer_whose_launches_vanish_fails_the_check(monkeypatch):
    label = 'IKGATConv-direct 8x8 train dropout=0.6 R=16 degree=8'
    calls, launches = capture('IKGATConv-direct', label)
    assert gpu_compile.coverage_failures(calls, launches) == []
    # The fused attention turned off (its launches vanish; the node terms
    # stay):
    build = gpu_compile._build

    def unfused(*args, **kwargs):
        layer = build(*args, **kwargs)
        layer.fused_attention = False
        return layer

    monkeypatch.setattr(gpu_compile, '_build', unfused)
    calls, launches = capture('IKGATConv-direct', label)
    failures = gpu_compile.coverage_failures(calls, launches)
    assert any(failure.startswith("IKGATConv-direct: its 1 calls with "
                                  "'fused attention' launched no kernel of "
                                  "the fused attention") for failure in failures)
    assert any("'dropout'" in failure for failure in failures)


def test_the_coverage_rules():
    from benchmarks.gpu_compile import NO_KERNEL, coverage_failures

    def launch(key, module='ikgat.ops.gat_attention_triton', name='forward_kernel',
               **constexprs):
        return dict(key=key, module=module, name=name, constexprs=constexprs,
                    signature={})

    def call(layer, keys, *rules):
        return dict(label=f'{layer} call', layer=layer, keys=keys,
                    rules=list(rules))

    launches = [launch('plain', HAS_DROPOUT=False),
                launch('dropout', HAS_DROPOUT=True)]
    good = [call('A', ['plain'], 'fused attention'),
            call('A', ['dropout'], 'fused attention', 'dropout'),
            call('K', [], NO_KERNEL)]
    assert coverage_failures(good, launches) == []
    # A layer that launches nothing, named once:
    assert coverage_failures(good + [call('B', [], 'fused attention',
                                          'dropout')], launches) == [
        'B: 1 of its 1 calls launched no kernel (e.g. B call): their '
        'launches vanished from the capture']
    # An option whose kernel variant vanished:
    failures = coverage_failures(
        [good[0], call('A', ['plain'], 'fused attention', 'dropout')],
        launches)
    assert failures == ["A: its 1 calls with 'dropout' launched no kernel "
                        "with attention dropout (HAS_DROPOUT=True) (e.g. A "
                        "call)"]
    # A layer without kernels that gained some:
    failures = coverage_failures([call('K', ['plain'], NO_KERNEL)], launches)
    assert len(failures) == 1 and 'WITHOUT_TRITON' in failures[0]


def test_launches_that_differ_in_alignment_are_told_apart():
    def launch(aligned):
        return runtime.KernelLaunch(
            'm', 'k', dict(x='*fp32', N='i32'), {}, aligned, {})
    assert launch(('x', )).key != launch(('x', 'N')).key
    assert launch(('x', 'N')).key == launch(('N', 'x')).key
