import math
import os.path as osp

import pytest
import torch
from torch_geometric.data import Data

from ikgat import IKGATConv, MIKANConv
from ikgat.models import TwoLayerGAT
from ikgat.training import train_node_classifier

pytest.importorskip('matplotlib')
pytest.importorskip('sklearn')

from ikgat import visualization as viz  # noqa: E402
from ikgat.checkpoints import load_checkpoint, save_checkpoint  # noqa: E402

HEADS, CHANNELS, R = 2, 3, 4


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tiny_graph(seed=0, num_nodes=24, num_edges=80, features=5, classes=3):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, features, generator=generator)
    edge_index = torch.randint(0, num_nodes, (2, num_edges),
                               generator=generator)
    y = torch.randint(0, classes, (num_nodes, ), generator=generator)
    masks = torch.arange(num_nodes) % 3
    return Data(x=x, edge_index=edge_index, y=y, train_mask=masks == 0,
                val_mask=masks == 1, test_mask=masks == 2)


def tiny_model(conv=IKGATConv, seed=0, **conv_kwargs):
    torch.manual_seed(seed)
    conv_kwargs.setdefault('num_spectral_points', R)
    return TwoLayerGAT(5, CHANNELS, 3, conv, heads=HEADS,
                       conv_kwargs=conv_kwargs).eval()


def assert_png(path):
    assert osp.isfile(path)
    with open(path, 'rb') as f:
        header = f.read(8)
    assert header == b'\x89PNG\r\n\x1a\n'
    assert osp.getsize(path) > 1000


def titles(fig):
    return [ax.get_title() for ax in fig.axes]


# --------------------------------------------------------------------------
# Spectral points
# --------------------------------------------------------------------------


def test_tsne_inputs_are_the_learned_points():
    model = tiny_model(kernel='direct', kernel_kwargs=dict(lengthscale=2.0))
    inputs = viz.spectral_tsne_inputs(model, num_reference=3000)
    w1, w2 = model.conv1.kernel.spectral_point_sets  # [H, R, 2C]
    assert inputs.layer == 'conv1'
    assert inputs.points.shape == (HEADS * 2 * R + 3000, 2 * CHANNELS)
    for h in range(HEADS):
        expected = torch.cat([w1[h], w2[h]])
        assert torch.equal(inputs.points[inputs.head == h], expected)
        assert torch.equal(inputs.point_set[inputs.head == h],
                           torch.tensor([0] * R + [1] * R))
    # Reference: GAT's Gaussian spectral density N(0, I / (2 l^2)), l = 2.
    reference = inputs.points[inputs.head == -1]
    assert reference.shape == (3000, 2 * CHANNELS)
    assert inputs.lengthscale == 2.0
    expected_std = 1 / (math.sqrt(2) * 2.0)
    assert reference.std(0).sub(expected_std).abs().max() < 0.05 * 2
    assert reference.mean(0).abs().max() < 0.02
    # Another layer by name:
    second = viz.spectral_tsne_inputs(model, 'conv2', num_reference=1)
    v1, v2 = model.conv2.kernel.spectral_point_sets  # [1, R, 2C]
    assert torch.equal(second.points[second.head == 0],
                       torch.cat([v1[0], v2[0]]))


def test_tsne_inputs_of_mikan_need_a_forward_pass():
    model = tiny_model(MIKANConv)
    data = tiny_graph()
    with pytest.raises(RuntimeError, match='pass x= and edge_index='):
        viz.spectral_tsne_inputs(model)
    inputs = viz.spectral_tsne_inputs(model, x=data.x,
                                      edge_index=data.edge_index)
    sets = model.conv1.spectral_points()  # the last (evaluation) forward
    assert len(sets) == 2 and sets[0].shape == (1, HEADS, R, 2 * CHANNELS)
    for h in range(HEADS):
        assert torch.equal(inputs.points[inputs.head == h],
                           torch.cat([sets[0][0, h], sets[1][0, h]]))
    assert (inputs.head == -1).sum() == 2 * R


def test_tsne_inputs_reject_kernels_without_points():
    with pytest.raises(ValueError, match='No layer with spectral points'):
        viz.spectral_tsne_inputs(tiny_model(kernel='rbf'))


def test_plot_spectral_tsne(tmp_path):
    model = tiny_model(kernel='direct')
    path = str(tmp_path / 'tsne.png')
    fig = viz.plot_spectral_tsne(model, path=path, seed=1)
    assert_png(path)
    (ax, ) = fig.axes
    assert ax.get_title() == 'Spectral points, t-SNE: conv1 (IKGATConv)'
    assert (ax.get_xlabel(), ax.get_ylabel()) == ('t-SNE 1', 't-SNE 2')
    # One scatter per head plus the reference, embedding exactly the inputs:
    inputs = viz.spectral_tsne_inputs(
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


def test_head_attention_std_by_hand():
    alpha = torch.tensor([[0.2, 0.4], [0.5, 0.5], [1.0, 0.0]])
    assert torch.allclose(viz.head_attention_std(alpha),
                          torch.tensor([0.1, 0.0, 0.5]))


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


# --------------------------------------------------------------------------
# Sparsity
# --------------------------------------------------------------------------


def test_sparsity_statistics_by_hand():
    # Node 0: one edge (alpha = 1); node 1: two edges (0.5, 0.5);
    # node 2: three edges (0.95, 0.045, 0.005); node 3: no incoming edge.
    alpha = torch.tensor([1.0, 0.5, 0.5, 0.95, 0.045, 0.005])
    index = torch.tensor([0, 1, 1, 2, 2, 2])
    stats = viz.sparsity_statistics(alpha, index, num_nodes=4)
    entropy_2 = -(0.95 * math.log(0.95) + 0.045 * math.log(0.045) +
                  0.005 * math.log(0.005))
    assert stats.entropy == pytest.approx((0 + math.log(2) + entropy_2) / 3)
    assert stats.share_above == pytest.approx(2 / 6)  # 1.0 and 0.95
    assert stats.share_below == pytest.approx(1 / 6)  # 0.005
    assert stats.num_weights == 6
    # Uniform attention over degrees 1, 2, 3:
    assert stats.uniform_entropy == pytest.approx(
        (0 + math.log(2) + math.log(3)) / 3)
    # Two heads: the second head is one-hot everywhere (entropy 0).
    two_heads = torch.stack(
        [alpha, torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0, 1.0])], dim=1)
    stats = viz.sparsity_statistics(two_heads, index, high=0.9, low=0.01)
    assert stats.entropy == pytest.approx((math.log(2) + entropy_2) / 6)
    assert stats.share_above == pytest.approx(5 / 12)
    assert stats.share_below == pytest.approx(4 / 12)
    with pytest.raises(ValueError, match=r"'index' must have shape"):
        viz.sparsity_statistics(alpha, index[:-1])
    with pytest.raises(ValueError, match=r'\[0, 1\]'):
        viz.sparsity_statistics(alpha * 2, index)


def test_plot_sparsity(tmp_path):
    data = tiny_graph()
    attention = {}
    for p in (1.0, 3.0):
        model = tiny_model(p=p)
        attention[p] = viz.layer_decompositions(model, data.x,
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
    stats = viz.sparsity_statistics(attention[1.0].alpha,
                                    attention[1.0].edge_index[1])
    assert f'entropy {stats.entropy:.3f}' in fig.axes[0].texts[0].get_text()
    # Labelled runs without a p: no statistics panel.
    fig = viz.plot_sparsity({'a': attention[1.0]})
    assert titles(fig) == ['a']


# --------------------------------------------------------------------------
# Terms during training
# --------------------------------------------------------------------------


def test_terms_recorder_records_the_decomposition_and_changes_nothing():
    data = tiny_graph()
    # MIKAN averaging 2 draws in evaluation: evaluating draws random numbers.
    model = tiny_model(MIKANConv, seed=3, num_samples=2).train()
    recorder = viz.AttentionTermsRecorder(model, data.x, data.edge_index)
    torch.manual_seed(5)
    train_node_classifier(model, data, epochs=3, patience=10,
                          on_epoch=recorder)
    log = recorder.log
    assert log['epoch'] == [1, 2, 3]
    assert set(log['layers']) == {'conv1', 'conv2'}
    # The last record is the decomposition of the final model:
    last = viz.layer_decompositions(model, data.x, data.edge_index)
    for name, decomposition in last.items():
        entry = log['layers'][name]
        assert entry['log_similarity_mean'][-1] == pytest.approx(
            float(decomposition.log_similarity.double().mean()))
        assert entry['log_magnitude_mean'][-1] == pytest.approx(
            float(decomposition.log_magnitude.double().mean()))
        assert all(len(v) == 3 for v in entry.values())
    # Recording restores the generators: the same run without it is equal.
    reference = tiny_model(MIKANConv, seed=3, num_samples=2).train()
    torch.manual_seed(5)
    train_node_classifier(reference, data, epochs=3, patience=10)
    for key, value in reference.state_dict().items():
        assert torch.equal(value, model.state_dict()[key]), key


def test_group_spread_by_hand():
    values = torch.tensor([[1.0], [3.0], [5.0]])
    index = torch.tensor([0, 0, 1])
    # Node 0: std of (1, 3) = 1; node 1: one edge, std 0; mean 0.5.
    assert viz._group_spread(values, index, 2) == pytest.approx(0.5)


def test_plot_terms(tmp_path):
    data = tiny_graph()
    model = tiny_model()
    recorder = viz.AttentionTermsRecorder(model, data.x, data.edge_index,
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
        heads=HEADS, out_heads=1, dropout=0.6)
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


def test_cli_plots_from_checkpoints(tmp_path, capsys):
    from ikgat.cli import main
    data = tiny_graph()
    model = tiny_model(MIKANConv)
    recorder = viz.AttentionTermsRecorder(model, data.x, data.edge_index)
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
                                          num_spectral_points=2)
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
