import os.path as osp

import pytest
import torch

from ikgat import IKGATConv, MIKANConv, inspection
from tests.helpers import CHANNELS, HEADS, R, tiny_graph, tiny_model

pytest.importorskip('matplotlib')
pytest.importorskip('sklearn')

from ikgat import inspection as viz  # noqa: E402
from ikgat.training.checkpoints import load_checkpoint, save_checkpoint  # noqa: E402


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def assert_png(path):
    assert osp.isfile(path)
    with open(path, 'rb') as f:
        header = f.read(8)
    assert header == b'\x89PNG\r\n\x1a\n'
    assert osp.getsize(path) > 1000


def titles(fig):
    return [ax.get_title() for ax in fig.axes]


@pytest.mark.slow  # scikit-learn's t-SNE
def test_plot_spectral_tsne(tmp_path):
    model = tiny_model(kernel='direct')
    path = str(tmp_path / 'tsne.png')
    fig = viz.plot_spectral_tsne(model, path=path, seed=1)
    assert_png(path)
    (ax, ) = fig.axes
    assert ax.get_title() == 'Spectral points, t-SNE: conv1 (IKGATConv)'
    assert (ax.get_xlabel(), ax.get_ylabel()) == ('t-SNE 1', 't-SNE 2')
    # One scatter per head plus the reference, embedding exactly the inputs:
    inputs = inspection.spectral_tsne_inputs(
        model, generator=torch.Generator().manual_seed(1))
    sizes = [len(c.get_offsets()) for c in ax.collections]
    assert sizes == [2 * R] + [2 * R] * HEADS
    assert sum(sizes) == inputs.points.size(0)
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels[0].startswith('GAT: N(0, I/2l²)')
    assert labels[1:] == [f'head {h}' for h in range(HEADS)]


# --------------------------------------------------------------------------
# Copula and heads
# --------------------------------------------------------------------------


def test_plot_copula_correlation(tmp_path):
    model = tiny_model(MIKANConv)
    with torch.no_grad():
        model.conv1.kernel.raw_correlation.normal_()
    path = str(tmp_path / 'copula.png')
    fig = viz.plot_copula_correlation(model, path=path)
    assert_png(path)
    ax = fig.axes[0]
    assert ax.get_title() == ('Copula correlation across heads: conv1 '
                              '(MIKANConv)')
    assert (ax.get_xlabel(), ax.get_ylabel()) == ('head', 'head')
    shown = torch.as_tensor(ax.get_images()[0].get_array())
    expected = model.conv1.copula_correlation().detach().double()
    assert torch.allclose(shown, expected)
    assert expected[1, 0].abs() > 0  # a real correlation, not the identity
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    with pytest.raises(ValueError, match='only MIKAN'):
        viz.plot_copula_correlation(tiny_model())


def test_plot_head_attention_std(tmp_path):
    data = tiny_graph()
    path = str(tmp_path / 'heads.png')
    fig = viz.plot_head_attention_std(
        {'direct': tiny_model(), 'mikan': tiny_model(MIKANConv)}, data.x,
        data.edge_index, path=path)
    assert_png(path)
    (ax, ) = fig.axes
    assert ax.get_title() == 'Attention across heads (first attention layer)'
    assert ax.get_xlabel() == 'std of α_ij across heads'
    assert ax.get_ylabel() == 'edges'
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert [label.split(' ')[0] for label in labels] == ['direct', 'mikan']


@pytest.mark.slow  # the fast tier plots through the CLI test below
def test_plot_sparsity(tmp_path):
    data = tiny_graph()
    attention = {}
    for p in (1.0, 3.0):
        model = tiny_model(p=p)
        attention[p] = inspection.layer_decompositions(model, data.x,
                                                data.edge_index)['conv1']
    path = str(tmp_path / 'sparsity.png')
    fig = viz.plot_sparsity(attention, path=path)
    assert_png(path)
    assert titles(fig)[:3] == ['p = 1', 'p = 3',
                               'Sparsity statistics against p']
    assert fig.axes[0].get_xlabel() == 'attention weight α_ij'
    assert fig.axes[2].get_xlabel() == 'p'
    assert fig.get_suptitle() == 'Attention weights against p'
    # The panel's text shows the statistics of that run:
    stats = inspection.sparsity_statistics(attention[1.0].alpha,
                                    attention[1.0].edge_index[1])
    assert f'entropy {stats.entropy:.3f}' in fig.axes[0].texts[0].get_text()
    # Labelled runs without a p: no statistics panel.
    fig = viz.plot_sparsity({'a': attention[1.0]})
    assert titles(fig) == ['a']


@pytest.mark.slow  # the fast tier plots through the CLI test
def test_plot_terms(tmp_path):
    data = tiny_graph()
    model = tiny_model()
    recorder = inspection.AttentionTermsRecorder(model, data.x, data.edge_index,
                                          layer='conv1', every=2)
    for epoch in range(1, 5):
        recorder(epoch, 0.5, 1.0)
    assert recorder.log['epoch'] == [1, 2, 4]
    path = str(tmp_path / 'terms.png')
    fig = viz.plot_terms(recorder.log, path=path)
    assert_png(path)
    assert titles(fig) == [
        'log-similarity term (mean over edges)',
        'log-magnitude term (mean over edges)',
        'log-similarity term (std within neighbourhoods)',
        'log-magnitude term (std within neighbourhoods)',
    ]
    assert all(ax.get_xlabel() == 'epoch' for ax in fig.axes)
    line = fig.axes[0].get_lines()[0]
    assert list(line.get_xdata()) == [1, 2, 4]
    assert list(line.get_ydata()) == recorder.log['layers']['conv1'][
        'log_similarity_mean']
    fig = viz.plot_terms({'run a': recorder.log, 'run b': recorder.log},
                         statistic='mean')
    assert len(fig.axes) == 2
    assert [line.get_label() for line in fig.axes[0].get_lines()
            ] == ['run a: conv1', 'run b: conv1']
    with pytest.raises(ValueError, match='not a log'):
        viz.plot_terms({'x': {}})
    with pytest.raises(ValueError, match=r"no layers \['conv2'\]"):
        viz.plot_terms(recorder.log, layers=['conv2'])


# --------------------------------------------------------------------------
# Checkpoints and the command line
# --------------------------------------------------------------------------


def test_checkpoint_round_trip(tmp_path):
    data = tiny_graph()
    model = tiny_model(MIKANConv, p=1.5)
    path = str(tmp_path / 'sub' / 'mikan.pt')
    save_checkpoint(path, model, 'Cora', dict(num_spectral_points=R, p=1.5),
                    log={'epoch': [1]}, info={'test_acc': 0.5})
    checkpoint = load_checkpoint(path)
    assert checkpoint.layer == 'MIKANConv'
    assert checkpoint.dataset == 'Cora'
    assert checkpoint.model_kwargs == dict(
        in_channels=5, hidden_channels=CHANNELS, out_channels=3,
        heads=HEADS, out_heads=1, dropout=0.6, self_loops=False)
    assert checkpoint.log == {'epoch': [1]}
    assert checkpoint.info == {'test_acc': 0.5}
    assert not checkpoint.model.training
    assert checkpoint.model.conv1.p == 1.5
    with torch.no_grad():
        assert torch.equal(checkpoint.model(data.x, data.edge_index),
                           model(data.x, data.edge_index))
    with pytest.raises(FileNotFoundError, match='--save-checkpoint'):
        load_checkpoint(str(tmp_path / 'missing.pt'))
    torch.save({'weights': 1}, tmp_path / 'other.pt')
    with pytest.raises(ValueError, match='not an ikgat checkpoint'):
        load_checkpoint(str(tmp_path / 'other.pt'))


@pytest.mark.slow  # plots through the command line (1 s)
def test_cli_plots_from_checkpoints(tmp_path, capsys):
    from ikgat.cli import main
    data = tiny_graph()
    model = tiny_model(MIKANConv)
    recorder = inspection.AttentionTermsRecorder(model, data.x, data.edge_index)
    recorder(1, 0.5, 1.0)
    path = str(tmp_path / 'mikan.pt')
    save_checkpoint(path, model, 'Cora', dict(num_spectral_points=R),
                    log=recorder.log)
    for kind in ('terms', 'copula'):
        out = str(tmp_path / f'{kind}.png')
        main(['plot', kind, '--checkpoint', path, '--out', out])
        assert_png(out)
    with pytest.raises(SystemExit) as exit_info:
        main(['plot', 'terms', '--checkpoint', path, '--checkpoint', path,
              '--out', str(tmp_path / 'x.png')])
    assert exit_info.value.code == 2
    assert 'takes one --checkpoint' in capsys.readouterr().err


@pytest.mark.slow
def test_cli_train_saves_a_checkpoint_that_plot_reads(cora, tmp_path):
    from ikgat.cli import main
    path = str(tmp_path / 'cora.pt')
    main(['train', '--epochs', '2', '--hidden', '2', '--heads', '2',
          '--num-features', '2', '--p', '1.5', '--save-checkpoint', path])
    checkpoint = load_checkpoint(path)
    assert checkpoint.dataset == 'Cora'
    assert checkpoint.conv_kwargs == dict(kernel='direct', p=1.5,
                                          num_spectral_points=2,
                                          kernel_kwargs=dict(eps=1e-2))
    assert checkpoint.log['epoch'] == [1, 2]
    assert checkpoint.info['best_epoch'] in (1, 2)
    out = str(tmp_path / 'sparsity.png')
    main(['plot', 'sparsity', '--checkpoint', path, '--out', out])
    assert_png(out)


def test_checkpoint_with_the_former_num_features_loads(tmp_path):
    import warnings
    model = tiny_model(IKGATConv, kernel='direct')
    path = str(tmp_path / 'old.pt')
    save_checkpoint(path, model, 'Cora', dict(kernel='direct', p=2.0,
                                              num_spectral_points=R))
    payload = torch.load(path, weights_only=False)
    payload['conv_kwargs'] = dict(kernel='direct', p=2.0, num_features=R)
    torch.save(payload, path)  # as an ikgat 0.1 checkpoint holds it
    with warnings.catch_warnings():
        warnings.simplefilter('error', DeprecationWarning)
        checkpoint = load_checkpoint(path)
    assert checkpoint.conv_kwargs['num_spectral_points'] == R
    assert checkpoint.model.conv1.num_spectral_points == R
