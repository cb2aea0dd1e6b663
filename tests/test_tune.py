"""``ikgat tune``: a study that runs, resumes (after a SIGKILL too) and
writes the best configuration that ``ikgat train --config`` takes; bad
input is one line and exit status 2 before any training."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

optuna = pytest.importorskip('optuna')

from ikgat.cli import main  # noqa: E402
from ikgat.training.configuration import SEARCH_SEEDS  # noqa: E402

#: A cheap study: GATConv with 4 channels a head, a few epochs.
CHEAP = ['--layer', 'gat', '--search', 'hidden=4', '--heads', '2',
         '--no-progress']


def _tune(tmp_path, *argv, epochs='3'):
    main(['tune', '--storage', f'sqlite:///{tmp_path}/study.db', '--out',
          str(tmp_path / 'best.json'), '--epochs', epochs, *CHEAP, *argv])


def _states(tmp_path) -> list:
    study = optuna.load_study(study_name='ikgat-tune',
                              storage=f'sqlite:///{tmp_path}/study.db')
    return [trial.state.name for trial in study.trials]


def test_a_study_resumes_and_its_best_configuration_trains(tmp_path, capsys):
    _tune(tmp_path, '--trials', '2')
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ikgat tune: gat on Cora (split 0) by "
                             "validation accuracy; study 'ikgat-tune'")
    assert [line.split(':')[0] for line in out[1:3]] == ['trial 0',
                                                         'trial 1']
    assert 'the 2 best trial(s):' in out
    assert out[-1].startswith('best: trial ')
    _tune(tmp_path, '--trials', '3')
    out = capsys.readouterr().out.splitlines()
    assert '2 finished trial(s), 1 to run' in out[0]
    assert out[1].startswith('trial 2: ')
    assert _states(tmp_path) == ['COMPLETE'] * 3
    config = json.loads((tmp_path / 'best.json').read_text())
    assert config['layer'] == 'gat' and config['hidden'] == 4
    assert config['provenance']['search_seed'] in SEARCH_SEEDS
    main(['train', '--config', str(tmp_path / 'best.json'), '--epochs', '1',
          '--no-progress', '--save-checkpoint', str(tmp_path / 'model.pt')])
    out = capsys.readouterr().out
    assert out.startswith('ikgat train: GATConv on Cora')
    from ikgat.training.checkpoints import load_checkpoint
    checkpoint = load_checkpoint(str(tmp_path / 'model.pt'))
    assert checkpoint.model_kwargs['hidden_channels'] == 4
    assert checkpoint.info['lr'] == pytest.approx(config['lr'])


def test_a_tuned_layer_option_reaches_train(tmp_path, capsys):
    main(['tune', '--storage', f'sqlite:///{tmp_path}/study.db', '--out',
          str(tmp_path / 'best.json'), '--epochs', '2', '--trials', '1',
          '--layer', 'ikgat', '--search', 'kernel=rff', '--search', 'p=1.5',
          '--search', 'num_spectral_points=8', '--search', 'hidden=4',
          '--heads', '2', '--no-progress'])
    config = json.loads((tmp_path / 'best.json').read_text())
    # The kernel's floor, not searched, is written as the trials had it.
    assert config['layer_options'] == {'kernel': 'rff', 'p': 1.5,
                                       'num_spectral_points': 8,
                                       'kernel_eps': 0.01}
    capsys.readouterr()
    main(['train', '--config', str(tmp_path / 'best.json'), '--epochs', '1',
          '--no-progress'])
    assert capsys.readouterr().out.startswith(
        'ikgat train: IKGATConv(kernel=rff, p=1.5, num_spectral_points=8) '
        'on Cora')
    # A configuration's floor is the one trained with.
    config['layer_options']['kernel_eps'] = 1e-5
    (tmp_path / 'old.json').write_text(json.dumps(config))
    main(['train', '--config', str(tmp_path / 'old.json'), '--epochs', '1',
          '--no-progress', '--save-checkpoint', str(tmp_path / 'model.pt')])
    from ikgat.training.checkpoints import load_checkpoint
    model = load_checkpoint(str(tmp_path / 'model.pt')).model
    assert model.conv1.kernel.eps == model.conv2.kernel.eps == 1e-5


def _must_not_train(*args, **kwargs):
    raise AssertionError('trained before refusing the input')


@pytest.mark.parametrize('argv, expected', [
    (['--layer', 'mikan', '--search', 'kernel=rff'],
     '--search kernel=rff: kernel is not an option of --layer mikan'),
    (['--search', 'p=2:1'], '--search p=2:1: the range 2:1 is empty; give '
     'low < high'),
    (['--search', 'lr=0:0.1:log'], '--search lr=0:0.1:log: lr must lie in '
     '(0, inf) (got 0)'),
    (['--search', 'dropout=0.5:1'], 'dropout must lie in [0, 1) (got 1)'),
    (['--search', 'kernel=nope'], "unknown kernel 'nope' for --layer ikgat"),
    (['--search', 'p'], '--search p: write NAME=SPEC'),
    (['--dataset', 'Cora', '--split', '4'], 'Cora has 1 split(s)'),
])
def test_bad_input_is_one_line_before_any_training(tmp_path, capsys,
                                                   monkeypatch, argv,
                                                   expected):
    monkeypatch.setattr('ikgat.training.fitting.train_node_classifier',
                        _must_not_train)
    with pytest.raises(SystemExit) as caught:
        main(['tune', '--storage', f'sqlite:///{tmp_path}/study.db',
              '--out', str(tmp_path / 'best.json'), *argv])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith('ikgat tune: error')
    assert expected in err


def test_a_study_of_another_dataset_or_layer_is_refused(tmp_path, capsys,
                                                        monkeypatch):
    _tune(tmp_path, '--trials', '1', epochs='1')
    capsys.readouterr()
    monkeypatch.setattr('ikgat.training.fitting.train_node_classifier',
                        _must_not_train)
    for argv, expected in ((['--dataset', 'CiteSeer'], '--dataset Cora'),
                           (['--layer', 'ikgat'], '--layer gat')):
        with pytest.raises(SystemExit) as caught:
            main(['tune', '--storage', f'sqlite:///{tmp_path}/study.db',
                  '--out', str(tmp_path / 'best.json'), '--trials', '2',
                  *argv])
        assert caught.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert f"the study 'ikgat-tune' in sqlite:///{tmp_path}/study.db " \
            f"was made for {expected}" in err
        assert '--study-name' in err


def test_a_storage_that_cannot_be_written_is_refused(tmp_path, capsys,
                                                     monkeypatch):
    monkeypatch.setattr('ikgat.training.fitting.train_node_classifier',
                        _must_not_train)
    (tmp_path / 'a_file').write_text('not a folder')
    storage = f'sqlite:///{tmp_path}/a_file/study.db'
    with pytest.raises(SystemExit) as caught:
        main(['tune', '--storage', storage, '--out',
              str(tmp_path / 'best.json')])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f'ikgat tune: error: --storage {storage}: cannot '
                          f'write {tmp_path}/a_file/study.db')
    assert 'choose another path' in err


def test_without_optuna_the_command_says_how_to_install_it(tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, 'optuna', None)  # import fails
    with pytest.raises(SystemExit) as caught:
        main(['tune', '--out', str(tmp_path / 'best.json')])
    assert caught.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "ikgat tune: error: ikgat tune needs Optuna: pip install "
        "'ikgat[tune]'")


@pytest.mark.slow  # two processes start (about 15 s)
def test_a_killed_study_resumes_losing_only_the_trial_in_flight(tmp_path):
    storage = f'sqlite:///{tmp_path}/study.db'
    command = [sys.executable, '-m', 'ikgat.cli', 'tune', '--storage',
               storage, '--out', str(tmp_path / 'best.json'), *CHEAP]
    env = dict(os.environ, OMP_NUM_THREADS='1')
    process = subprocess.Popen(command + ['--trials', '100', '--epochs',
                                          '40', '--patience', '40'],
                               env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                states = _states(tmp_path)
            except Exception:  # the study is not created yet
                continue
            if 'COMPLETE' in states and states[-1] == 'RUNNING':
                break
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    states = _states(tmp_path)
    assert states[-1] == 'RUNNING' and 'COMPLETE' in states
    finished = states.count('COMPLETE')
    assert (tmp_path / 'best.json').exists()
    subprocess.run(command + ['--trials', str(finished + 1), '--epochs',
                              '2'], env=env, check=True,
                   capture_output=True)
    after = _states(tmp_path)
    # The finished trials kept, the one in flight failed, one more run:
    assert after[:len(states) - 1] == states[:-1]
    assert after[len(states) - 1] == 'FAIL'
    assert after.count('COMPLETE') == finished + 1
    assert json.loads((tmp_path / 'best.json').read_text())['layer'] == 'gat'


@pytest.mark.parametrize('text, expected', [
    ('{', 'is not JSON'),
    ('{"format": "other"}', 'is not an ikgat configuration'),
    ('{"format": "ikgat-config", "version": 1, "dataset": "Cora", '
     '"layer": "gat", "layer_options": {}, "depth": 3}',
     "unknown fields ['depth']"),
])
def test_a_configuration_that_is_not_one_is_one_line(tmp_path, capsys, text,
                                                     expected):
    path = tmp_path / 'best.json'
    path.write_text(text)
    with pytest.raises(SystemExit) as caught:
        main(['train', '--config', str(path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and expected in err
    assert err.startswith(f'ikgat train: error: --config: {path}')


def test_a_trial_reports_every_tenth_epoch_to_the_pruner(tmp_path,
                                                         monkeypatch):
    from ikgat.training.loop import TrainResult
    from ikgat.training.tuning import REPORT_EVERY

    def curve(model, data, on_epoch=None, **kwargs):
        for epoch in range(1, 26):
            on_epoch(epoch, epoch / 100, 1.0)
        return TrainResult(0.25, 0.0, 25, 25, 0.0)

    monkeypatch.setattr('ikgat.training.fitting.train_node_classifier',
                        curve)
    _tune(tmp_path, '--trials', '1')
    study = optuna.load_study(study_name='ikgat-tune',
                              storage=f'sqlite:///{tmp_path}/study.db')
    assert REPORT_EVERY == 10
    assert study.trials[0].intermediate_values == {10: 0.1, 20: 0.2}


def test_no_trial_is_pruned_before_the_patience(tmp_path, monkeypatch):
    from ikgat.training.loop import TrainResult
    calls = []

    def curve(model, data, on_epoch=None, **kwargs):
        # Five good trials, then one far under their median at every epoch.
        value = 0.1 if len(calls) == 5 else 0.9
        calls.append(value)
        for epoch in range(1, 61):
            on_epoch(epoch, value, 1.0)
        return TrainResult(value, 0.0, 60, 60, 0.0)

    monkeypatch.setattr('ikgat.training.fitting.train_node_classifier',
                        curve)
    _tune(tmp_path, '--trials', '6', '--patience', '30')
    study = optuna.load_study(study_name='ikgat-tune',
                              storage=f'sqlite:///{tmp_path}/study.db')
    last = study.trials[-1]
    assert last.state.name == 'PRUNED' and last.last_step == 30
    assert all(t.state.name == 'COMPLETE' for t in study.trials[:5])


@pytest.mark.parametrize('kernel', ['rbf', 'rff'])
def test_the_kernel_floor_is_searched_only_when_named(tmp_path, capsys,
                                                      kernel):
    from ikgat.training.search_space import default_space, parse_search
    assert 'kernel_eps' not in default_space('ikgat')
    assert 'kernel_eps' in parse_search('mikan', ['kernel_eps=1e-3:0.1'])
    # Searched beside a kernel without a floor, a trial leaves it out.
    main(['tune', '--storage', f'sqlite:///{tmp_path}/study.db', '--out',
          str(tmp_path / 'best.json'), '--epochs', '2', '--trials', '1',
          '--layer', 'ikgat', '--search', f'kernel={kernel}', '--search',
          'kernel_eps=0.001:0.1:log', '--search', 'num_spectral_points=8',
          '--search', 'hidden=4', '--heads', '2', '--no-progress'])
    assert 'trial 0: validation accuracy' in capsys.readouterr().out
    options = json.loads((tmp_path / 'best.json').read_text())[
        'layer_options']
    if kernel == 'rbf':
        assert 'kernel_eps' not in options
    else:
        assert 0.001 <= options['kernel_eps'] <= 0.1
