import os
import os.path as osp
import shutil

import pytest
import torch
import torch_geometric.typing

from ikgat.cli import main
from ikgat.training.sampling import has_sampler
from tests.helpers import fast_few, needs_sampler


def run_failing(argv, capsys) -> str:
    r"""Run the command line, check it exits with status 2 and one line on
    stderr, and return that line."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1, err
    assert err.startswith('ikgat'), err
    return err


def test_train_talks_and_ends_with_a_summary(cora, capsys):
    main(['train', '--epochs', '3', '--hidden', '2', '--heads', '2',
          '--num-features', '2', '--threads', '1'])
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('ikgat train: IKGATConv(kernel=direct, p=2, '
                               'num_spectral_points=2) on Cora: 2708 nodes')
    assert '1 thread(s)' in lines[0]
    assert 'test accuracy' in lines[1] and '3 epochs in' in lines[1]
    assert out.err == ''  # no progress bar when not on a terminal


def test_train_progress_shows_loss_and_validation_accuracy(cora,
                                                          monkeypatch):
    import io

    from tqdm.auto import tqdm

    from ikgat.models import TwoLayerGAT
    from ikgat.nn import IKGATConv
    from ikgat.training import train_node_classifier
    stream = io.StringIO()
    monkeypatch.setattr(
        'ikgat.training.loop.tqdm',
        lambda *args, **kwargs: tqdm(*args, file=stream, mininterval=0,
                                     **kwargs))
    model = TwoLayerGAT(cora.num_features, 2, cora.num_classes, IKGATConv,
                        heads=2, conv_kwargs=dict(kernel='rbf'))
    train_node_classifier(model, cora[0], epochs=2, progress=True)
    text = stream.getvalue()
    assert 'loss=' in text and 'val_acc=' in text and '2/2' in text


def test_no_progress_switch(cora, capsys):
    main(['train', '--epochs', '1', '--hidden', '2', '--heads', '1',
          '--kernel', 'rbf', '--no-progress'])
    assert capsys.readouterr().err == ''


@pytest.mark.parametrize('argv, expected', [
    (['train', '--dataset', 'Kora'],
     "unknown dataset 'Kora'; choose one of Cora, CiteSeer"),
    (['train', '--epochs', '0'], "--epochs: must be a positive integer"),
    (['train', '--dropout', '1.5'], "--dropout: must lie in [0, 1)"),
    (['train', '--p', 'nan'], "--p: must be a positive number"),
    (['train', '--kernel', 'gauss'], "invalid choice: 'gauss'"),
    (['plot', 'pie', '--checkpoint', 'x', '--out', 'y'],
     "invalid choice: 'pie'"),
])
def test_usage_errors_are_one_line(argv, expected, capsys):
    assert expected in run_failing(argv, capsys)


def test_a_missing_data_folder_is_one_line(tmp_path, capsys):
    err = run_failing(['train', '--root', str(tmp_path / 'nowhere')], capsys)
    assert 'nowhere/Planetoid/Cora/raw lacks the Cora raw files' in err


def test_a_truncated_raw_file_is_named(tmp_path, monkeypatch, capsys):
    raw = osp.join(os.environ.get('IKGAT_DATA', ''), 'Planetoid', 'Cora',
                   'raw')
    if not osp.isdir(raw):
        pytest.skip('the Planetoid raw files are not available')
    copy = tmp_path / 'data' / 'Planetoid' / 'Cora' / 'raw'
    shutil.copytree(raw, copy)
    (copy / 'ind.cora.allx').write_bytes(
        (copy / 'ind.cora.allx').read_bytes()[:64])
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    err = run_failing(['train', '--root', str(tmp_path / 'data')], capsys)
    assert 'ind.cora.allx is damaged or truncated' in err


def test_an_unwritable_checkpoint_path_fails_before_training(
        tmp_path, monkeypatch, capsys):
    (tmp_path / 'file').write_text('a file, not a folder')
    monkeypatch.setattr('ikgat.cli.train.train_node_classifier', _must_not_train)
    monkeypatch.setattr('ikgat.cli.train.load_dataset', _must_not_train)
    err = run_failing(['train', '--save-checkpoint',
                       str(tmp_path / 'file' / 'model.pt')], capsys)
    assert '--save-checkpoint: cannot write' in err and 'file' in err


@pytest.mark.parametrize('content', [b'', b'\x00' * 10, os.urandom(500)])
def test_a_damaged_checkpoint_is_one_line(tmp_path, capsys, content):
    path = tmp_path / 'model.pt'
    path.write_bytes(content)
    err = run_failing(['plot', 'terms', '--checkpoint', str(path), '--out',
                       str(tmp_path / 'out.png')], capsys)
    assert f'{path} is not an ikgat checkpoint or is damaged' in err


def test_debug_shows_the_traceback(tmp_path):
    from ikgat.cli.arguments import CommandError
    with pytest.raises(CommandError) as error_info:
        main(['train', '--root', str(tmp_path / 'nowhere'), '--debug'])
    assert isinstance(error_info.value.__cause__, ValueError)


def _must_not_train(*args, **kwargs):
    raise AssertionError('the output path must be checked first')


def test_atomic_open_keeps_the_old_file_when_a_write_fails(tmp_path):
    from ikgat.atomic_writes import atomic_open, write_text_atomic
    path = tmp_path / 'results.md'
    write_text_atomic(str(path), 'old')
    with pytest.raises(RuntimeError, match='killed'):
        with atomic_open(str(path), 'w') as file:
            file.write('half of the new')
            raise RuntimeError('killed')
    assert path.read_text() == 'old'
    assert os.listdir(tmp_path) == ['results.md']  # no temporary left
    write_text_atomic(str(path), 'new')
    assert path.read_text() == 'new'


def test_a_failed_checkpoint_save_keeps_the_previous_one(tmp_path,
                                                        monkeypatch):
    from ikgat.models import TwoLayerGAT
    from ikgat.nn import IKGATConv
    from ikgat.training.checkpoints import load_checkpoint, save_checkpoint
    model = TwoLayerGAT(4, 2, 3, IKGATConv, heads=2,
                        conv_kwargs=dict(kernel='rbf'))
    path = str(tmp_path / 'model.pt')
    save_checkpoint(path, model, 'Cora', dict(kernel='rbf'))
    before = open(path, 'rb').read()

    def cut_off(payload, file):
        file.write(b'680 bytes of a good checkpoint')
        raise OSError('No space left on device')

    monkeypatch.setattr(torch, 'save', cut_off)
    with pytest.raises(OSError, match='No space'):
        save_checkpoint(path, model, 'Cora', dict(kernel='rbf'))
    monkeypatch.undo()
    assert open(path, 'rb').read() == before
    assert load_checkpoint(path).layer == 'IKGATConv'




#: Per layer of ``ikgat train --layer``: what its summary line names.
LAYER_SUMMARIES = {
    'gat': ('GATConv on Cora', None),
    'ikgat': ('IKGATConv(kernel=direct, p=2, num_spectral_points=64) on Cora',
              None),
    'mikan': ('MIKANConv(p=2, num_spectral_points=64) on Cora',
              'the mean of 3 draws'),
    'kep': ('KEPGATConv on Cora', 'the mean of 3 draws'),
    'transformer': ('IKTransformerConv(kernel=direct, p=2, '
                    'num_spectral_points=64) on Cora', None),
    'mikan-transformer': ('MIKANTransformerConv(p=2, num_spectral_points=64) '
                          'on Cora', 'the mean of 3 draws'),
}


class _TrainedLayers(dict):
    r"""Per layer of :data:`LAYER_SUMMARIES`, trained when first asked
    for: a checkpoint of ``ikgat train --layer X --epochs 2`` and the
    summary line printed."""
    def __init__(self, folder):
        super().__init__()
        self.folder = folder

    def __missing__(self, layer):
        path = str(self.folder / f'{layer}.pt')
        argv = ['train', '--layer', layer, '--epochs', '2', '--hidden', '2',
                '--heads', '2', '--threads', '1', '--save-checkpoint', path]
        if LAYER_SUMMARIES[layer][1] is not None:
            argv += ['--num-samples', '3']
        with pytest.MonkeyPatch.context() as patch:
            import io
            stream = io.StringIO()
            patch.setattr('sys.stdout', stream)
            main(argv)
        self[layer] = (path, stream.getvalue().splitlines())
        return self[layer]


@pytest.fixture(scope='module')
def layer_checkpoints(cora, tmp_path_factory):
    r"""The trained layers of ``ikgat train --layer`` (:class:`_TrainedLayers`:
    each trained once, when a test first asks for it)."""
    return _TrainedLayers(tmp_path_factory.mktemp('layers'))


# A local layer, and a stochastic one of each family, in the fast tier:
@pytest.mark.parametrize('layer', fast_few(
    list(LAYER_SUMMARIES), ('ikgat', 'kep', 'mikan-transformer')))
def test_train_each_layer(layer, layer_checkpoints, cora):
    from ikgat.training.checkpoints import load_checkpoint
    path, lines = layer_checkpoints[layer]
    described, draws = LAYER_SUMMARIES[layer]
    assert lines[0].startswith(f'ikgat train: {described}: 2708 nodes')
    summary = lines[1]
    assert summary.startswith(f'{described}: test accuracy ')
    assert '2 epochs in' in summary
    checkpoint = load_checkpoint(path)
    assert checkpoint.layer == described.split('(')[0].split(' ')[0]
    # The rebuilt model is the one trained: it gives the saved validation
    # accuracy (of the deterministic evaluation, without draws).
    data = cora[0]
    with torch.no_grad():
        out = checkpoint.model(data.x, data.edge_index)
    val_acc = float((out[data.val_mask].argmax(-1) ==
                     data.y[data.val_mask]).float().mean())
    assert val_acc == pytest.approx(checkpoint.info['val_acc'], abs=1e-6)
    if draws is None:
        assert 'ECE' not in summary and 'draws' not in summary
        assert checkpoint.info['test_ece'] is None
    else:
        # The test ECE of the project's metric, from the averaged draws:
        ece = float(summary.split('test ECE ')[1].split(' ')[0])
        assert f'({draws})' in summary and 'without draws' in summary
        assert ece == pytest.approx(checkpoint.info['test_ece'], abs=1e-4)
        assert 0.0 <= ece <= 1.0


def test_stochastic_layers_report_the_same_draws_in_every_run(
        cora, layer_checkpoints, capsys):
    main(['train', '--layer', 'kep', '--epochs', '2', '--hidden', '2',
          '--heads', '2', '--threads', '1', '--num-samples', '3'])
    summary = capsys.readouterr().out.splitlines()[1]
    before = layer_checkpoints['kep'][1][1]
    assert summary.split(' at the best')[0] == before.split(' at the best')[0]


@pytest.mark.parametrize('argv, expected', [
    (['--layer', 'gat', '--kernel', 'rbf'],
     '--kernel does not apply to --layer gat (it is an option of --layer '
     'ikgat or transformer); --layer gat takes none of the layer options'),
    (['--layer', 'gat', '--num-samples', '3'],
     '--num-samples does not apply to --layer gat'),
    (['--layer', 'ikgat', '--kl-weight', '0.1'],
     '--kl-weight does not apply to --layer ikgat (it is an option of '
     '--layer mikan or kep or mikan-transformer)'),
    (['--kernel', 'rbf', '--ksvd-weight', '1'],
     '--ksvd-weight does not apply to --layer ikgat'),
    (['--layer', 'mikan', '--kernel', 'rbf'],
     '--kernel does not apply to --layer mikan (it is an option of --layer '
     'ikgat or transformer); --layer mikan takes --p, --num-spectral-points, '
     '--num-samples, --kl-weight'),
    (['--layer', 'kep', '--p', '3'],
     '--p does not apply to --layer kep (it is an option of --layer ikgat '
     'or mikan or transformer or mikan-transformer); --layer kep takes '
     '--num-samples, --kl-weight, --ksvd-weight'),
    (['--layer', 'kep', '--num-spectral-points', '8'],
     '--num-spectral-points does not apply to --layer kep'),
    (['--layer', 'mikan', '--num-samples', '0'],
     '--num-samples 0 is too few for --layer mikan: give at least 1'),
    (['--layer', 'kep', '--kl-weight', '-1'],
     '--kl-weight: must be a non-negative number'),
    (['--layer', 'transformer', '--num-samples', '3'],
     '--num-samples does not apply to --layer transformer (it is an option '
     'of --layer mikan or kep or mikan-transformer); --layer transformer '
     'takes --kernel, --p, --num-spectral-points'),
    (['--layer', 'mikan-transformer', '--kernel', 'rbf'],
     '--kernel does not apply to --layer mikan-transformer (it is an option '
     'of --layer ikgat or transformer)'),
    (['--kernel', 'rbf', '--kernel-eps', '0.1'],
     '--kernel-eps applies to the random-feature kernels (direct, implicit, '
     'rff, rff_ns); --kernel rbf has no floor: leave --kernel-eps out'),
    (['--layer', 'kep', '--kernel-eps', '0.1'],
     '--kernel-eps does not apply to --layer kep (it is an option of '
     '--layer ikgat or mikan or transformer or mikan-transformer)'),
    (['--layer', 'mikan', '--kernel-eps', '0'],
     '--kernel-eps: must be a positive number'),
    (['--layer', 'bert'], "invalid choice: 'bert'"),
])
def test_options_that_do_not_apply_are_refused_before_training(
        argv, expected, monkeypatch, capsys):
    monkeypatch.setattr('ikgat.cli.train.train_node_classifier', _must_not_train)
    monkeypatch.setattr('ikgat.cli.train.load_dataset', _must_not_train)
    assert expected in run_failing(['train'] + argv, capsys)


@pytest.mark.parametrize('argv, floor', [
    (['--layer', 'mikan', '--kernel-eps', '0.05'], 0.05),
    (['--kernel', 'rff'], 1e-2),
])
def test_the_kernel_floor_reaches_the_layers_and_the_checkpoint(
        cora, tmp_path, capsys, argv, floor):
    from ikgat.training.checkpoints import load_checkpoint
    path = str(tmp_path / 'model.pt')
    main(['train', *argv, '--epochs', '1', '--hidden', '2', '--heads', '2',
          '--num-spectral-points', '4', '--threads', '1', '--no-progress',
          '--save-checkpoint', path])
    checkpoint = load_checkpoint(path)
    assert checkpoint.conv_kwargs['kernel_kwargs'] == dict(eps=floor)
    assert (checkpoint.model.conv1.kernel.eps ==
            checkpoint.model.conv2.kernel.eps == floor)


# Every kind from the trained checkpoints in the slow tier (t-SNE:
# scikit-learn's, 4 s); the fast tier plots through tests/test_visualization.
@pytest.mark.slow
@pytest.mark.parametrize('kind', ['tsne', 'copula', 'heads', 'sparsity',
                                  'terms'])
def test_plot_kinds_on_the_checkpoints_of_ikgat_train(
        kind, layer_checkpoints, tmp_path, capsys):
    pytest.importorskip('matplotlib')
    from ikgat.cli.plot import PLOT_NEEDS, TRANSFORMER_OPTIONS
    _, layers, options = PLOT_NEEDS[kind]
    kernel_layers = {'ikgat', 'mikan', 'transformer', 'mikan-transformer'}
    drawn = {'tsne': kernel_layers, 'copula': {'mikan', 'mikan-transformer'},
             'terms': kernel_layers}.get(kind, set(LAYER_SUMMARIES))
    for layer in LAYER_SUMMARIES:
        path, _ = layer_checkpoints[layer]
        out = str(tmp_path / f'{kind}-{layer}.png')
        argv = ['plot', kind, '--checkpoint', path, '--out', out]
        if layer in drawn:
            main(argv)
            assert capsys.readouterr().out.startswith('wrote ')
            with open(out, 'rb') as file:
                assert file.read(8) == b'\x89PNG\r\n\x1a\n'
        else:
            err = run_failing(argv, capsys)
            assert f'found in {layers}' in err and path in err
            if 'transformer' in layer:  # the transformer form suggested
                options = TRANSFORMER_OPTIONS.get(options, options)
            assert f'`ikgat train {options} --save-checkpoint PATH`' in err


def test_plot_tsne_names_the_kernels_with_spectral_points(tmp_path, capsys):
    from ikgat.models import TwoLayerGAT
    from ikgat.nn import IKGATConv
    from ikgat.training.checkpoints import save_checkpoint
    model = TwoLayerGAT(4, 2, 3, IKGATConv, heads=2,
                        conv_kwargs=dict(kernel='rbf'))
    path = str(tmp_path / 'rbf.pt')
    save_checkpoint(path, model, 'Cora', dict(kernel='rbf'))
    err = run_failing(['plot', 'tsne', '--checkpoint', path, '--out',
                       str(tmp_path / 'x.png')], capsys)
    assert 'the IKGATConv(kernel=rbf) model of' in err
    assert 'rff, rff_ns, direct or implicit' in err


def test_transformer_takes_only_the_kernels_that_pair_two_vectors(
        monkeypatch, capsys):
    # Every built-in kernel pairs two vectors today; a kernel that does not
    # is refused in one line naming those that do, before any training:
    import dataclasses

    from ikgat.training.layer_recipes import TRAIN_LAYERS
    monkeypatch.setitem(TRAIN_LAYERS, 'transformer', dataclasses.replace(
        TRAIN_LAYERS['transformer'], kernels=('direct', 'rbf')))
    monkeypatch.setattr('ikgat.cli.train.train_node_classifier', _must_not_train)
    monkeypatch.setattr('ikgat.cli.train.load_dataset', _must_not_train)
    err = run_failing(['train', '--layer', 'transformer', '--kernel',
                       'expsin'], capsys)
    assert err == ('ikgat train: error: --kernel expsin does not apply to '
                   '--layer transformer (its kernel must pair two vectors); '
                   'choose one of direct, rbf\n')


@needs_sampler
def test_train_in_mini_batches(cora, capsys, tmp_path):
    path = str(tmp_path / 'mini.pt')
    main(['train', '--epochs', '2', '--hidden', '2', '--heads', '2',
          '--threads', '1', '--batch-size', '70', '--fan-out', '5', '-1',
          '--eval-batch-size', '1000', '--save-checkpoint', path])
    lines = capsys.readouterr().out.splitlines()
    assert 'mini-batches of 70 seeds, fan-out 5 -1' in lines[0]
    assert '2 epochs in' in lines[1]
    from ikgat.training.checkpoints import load_checkpoint
    info = load_checkpoint(path).info
    assert info['batch_size'] == 70 and info['fan_out'] == [5, -1]


@pytest.mark.parametrize('argv,message', [
    (['--fan-out', '10', '0'], '--fan-out: must be a positive number of '
     "neighbours or -1 for all (got '0')"),
    (['--fan-out', '10'], '--fan-out: expected 2 arguments'),
    (['--batch-size', '0'], "--batch-size: must be a positive integer"),
    (['--device', 'tpu'], "--device: invalid choice: 'tpu'"),
])
def test_mini_batch_options_are_checked(argv, message, capsys):
    err = run_failing(['train'] + argv, capsys)
    assert message in err, err


def test_mini_batches_without_a_sampler_name_both(monkeypatch, capsys):
    monkeypatch.setattr(torch_geometric.typing, 'WITH_PYG_LIB', False)
    monkeypatch.setattr(torch_geometric.typing, 'WITH_TORCH_SPARSE', False)
    err = run_failing(['train', '--batch-size', '64'], capsys)
    assert 'pyg-lib' in err and 'torch-sparse' in err, err


@pytest.mark.slow
@pytest.mark.parametrize('regime', [
    ['--batch-size', '64'],
    # Full batch, and a kernel with buffers (rank 0's evaluation must not
    # go through DDP's forward, whose buffer broadcast the others miss):
    ['--kernel', 'rff'],
], ids=['mini-batch', 'full-batch-rff'])
def test_train_under_torchrun_with_two_processes(cora, tmp_path, regime):
    # Two gloo processes, one thread each: only rank 0 talks and writes.
    if '--batch-size' in regime and not has_sampler():
        pytest.skip('needs pyg-lib or torch-sparse')
    import subprocess
    import sys
    path = str(tmp_path / 'ddp.pt')
    env = dict(os.environ, OMP_NUM_THREADS='1')
    done = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc-per-node',
         '2', '--standalone', '-m', 'ikgat.cli', 'train', '--epochs',
         '2', '--hidden', '2', '--heads', '2', '--threads', '1',
         '--no-progress', '--save-checkpoint', path, *regime],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert '2 processes' in lines[0] and '2 epochs in' in lines[1]
    assert osp.exists(path)


@pytest.mark.slow
def test_train_compiles_the_model(cora, capsys, monkeypatch):
    # --compile trains the model through torch.compile (here with the
    # eager backend, so that the test does not wait for Inductor), with
    # dynamic shapes only for mini-batches.
    calls = []
    compile_ = torch.compile

    def recording(model, **kwargs):
        calls.append(kwargs)
        return compile_(model, backend='eager', **kwargs)

    monkeypatch.setattr(torch, 'compile', recording)
    main(['train', '--epochs', '2', '--hidden', '2', '--heads', '2',
          '--compile', '--no-progress'])
    out = capsys.readouterr().out
    assert calls == [dict(dynamic=None)]
    assert ', compiled' in out and 'test accuracy' in out
