"""The Planetoid study on a tiny synthetic graph (seconds)."""
import argparse
import csv
import math

import pytest
import torch

from benchmarks import planetoid as bench
from benchmarks.harness.data import BenchData
from benchmarks.harness.registry import (
    MODELS,
    add_regime_arguments,
    build_model,
    protocol_for,
    regime_overrides,
)
from benchmarks.harness.results import COLUMNS, ResultsWriter, read_results
from benchmarks.harness.statistics import mean_std_ci
from benchmarks.planetoid import run_benchmark, run_search
from benchmarks.summary import (
    ConfigStats,
    render_summary,
    searched_grids,
    select_hyperparameters,
    summarize,
)
from ikgat.data import toy_citation_graph
from ikgat.training import train_node_classifier
from tests.helpers import needs_sampler

# Models whose layers exist in every version of the package (``ikan`` and
# ``mikan`` are registered but built lazily).
CORE_MODELS = [name for name in MODELS if name not in ('ikan', 'mikan')]


def tiny_graph():
    return toy_citation_graph(num_nodes=48, num_classes=3, num_train=12,
                              num_val=18)


def tiny_loader(name: str) -> BenchData:
    data = tiny_graph()
    return BenchData(name, data, data.num_features, 3)


QUICK = dict(epochs=6, patience=3)

TRANSFORMER_LAYERS = {'transformer': 'TransformerConv',
                      'ikt-rbf': 'IKTransformerConv',
                      'ikt-direct': 'IKTransformerConv',
                      'ikt-implicit': 'IKTransformerConv',
                      'ikt-mikan': 'MIKANTransformerConv'}


@pytest.mark.slow  # a benchmark's whole run, in smoke mode
def test_end_to_end_writes_one_row_per_run(tmp_path):
    results = str(tmp_path / 'planetoid.csv')
    rows = run_benchmark(['Tiny'], CORE_MODELS, [0, 1], results=results,
                         tag='test', protocol_overrides=QUICK,
                         device='cpu', progress=False,
                         load_dataset=tiny_loader)
    assert len(rows) == 2 * len(CORE_MODELS)
    with open(results, newline='') as f:
        header = next(csv.reader(f))
    assert header == COLUMNS
    stored = read_results(results)
    assert [(r['model'], int(r['seed'])) for r in stored] == [
        (model, seed) for model in CORE_MODELS for seed in (0, 1)]
    for row in stored:
        assert row['dataset'] == 'Tiny' and row['tag'] == 'test'
        assert 0.0 <= float(row['val_acc']) <= 1.0
        assert 0.0 <= float(row['test_acc']) <= 1.0
        assert 1 <= int(row['best_epoch']) <= int(row['epochs']) <= 6
        assert float(row['seconds']) > 0 and int(row['num_parameters']) > 0
        assert row['git_commit'] and row['device'] == 'cpu'
        spec = MODELS[row['model']]
        # p, R, beta are filled exactly where they apply:
        assert bool(row['p']) == (spec.uses_p or spec.fixed_p is not None)
        assert bool(row['R']) == spec.uses_num_features
        assert bool(row['beta']) == spec.variational
    assert {r['p'] for r in stored if r['model'] == 'gat-rbf'} == {'2.0'}
    assert {r['R'] for r in stored if r['R']} == {'64'}


@pytest.mark.slow  # whole benchmark runs, twice
def test_resume_skips_finished_runs(tmp_path):
    results = str(tmp_path / 'planetoid.csv')
    common = dict(results=results, tag='test', protocol_overrides=QUICK,
                  device='cpu', progress=False, load_dataset=tiny_loader)
    first = run_benchmark(['Tiny'], ['gat', 'ika'], [0, 1], **common)
    assert len(first) == 4
    # Everything done: nothing runs, nothing is appended.
    assert run_benchmark(['Tiny'], ['gat', 'ika'], [0, 1], resume=True,
                         **common) == []
    # One more seed and another R: only those run.
    more = run_benchmark(['Tiny'], ['gat', 'ika'], [0, 1, 2], resume=True,
                         **common)
    assert sorted((r['model'], r['seed']) for r in more) == [('gat', 2),
                                                             ('ika', 2)]
    other_r = run_benchmark(['Tiny'], ['ika'], [0], R=32, resume=True,
                            **common)
    assert [(r['model'], r['R']) for r in other_r] == [('ika', '32')]
    # Another tag is another run.
    tagged = run_benchmark(['Tiny'], ['gat'], [0], resume=True,
                           **dict(common, tag='other'))
    assert len(tagged) == 1
    assert len(read_results(results)) == 4 + 2 + 1 + 1
    # Without --resume the run is repeated; the summary counts it once.
    run_benchmark(['Tiny'], ['gat'], [0], **common)
    cells, duplicates = summarize(read_results(results), tag='test')
    assert duplicates == 1
    assert {(c.model, c.R): c.test.n for c in cells} == {
        ('gat', ''): 3, ('ika', '64'): 3, ('ika', '32'): 1}


def test_rows_are_flushed_as_runs_finish(tmp_path):
    results = str(tmp_path / 'planetoid.csv')
    seen = []

    def loader(name):
        return tiny_loader(name)

    real_run_one = bench.run_one

    def spy(*args, **kwargs):
        seen.append(len(read_results(results)))
        return real_run_one(*args, **kwargs)

    bench.run_one, saved = spy, bench.run_one
    try:
        run_benchmark(['Tiny'], ['gat'], [0, 1, 2], results=results,
                      tag='t', protocol_overrides=QUICK, device='cpu',
                      progress=False, load_dataset=loader)
    finally:
        bench.run_one = saved
    assert seen == [0, 1, 2]


def test_gat_rbf_gives_gat_predictions_without_dropout():
    data = tiny_graph()
    protocol = protocol_for('Cora', dropout=0.0)
    predictions, logits = {}, {}
    for model in ('gat', 'gat-rbf'):
        torch.manual_seed(7)
        net = build_model(model, data.num_features, 3, protocol)
        if model == 'gat':
            initial = {k: v.clone() for k, v in net.state_dict().items()}
        else:
            # The same seed gives the same initial weights (no copying):
            state = net.state_dict()
            for key, value in initial.items():
                assert torch.equal(state[key], value), key
        result = train_node_classifier(net, data, lr=0.01, epochs=30,
                                       patience=30, keep_best_state=True)
        net.load_state_dict(result.state_dict)
        net.eval()
        with torch.no_grad():
            logits[model] = net(data.x, data.edge_index)
        predictions[model] = logits[model].argmax(-1)
        predictions[model + ' result'] = (result.val_acc, result.test_acc,
                                          result.best_epoch, result.epochs)
    torch.testing.assert_close(logits['gat-rbf'], logits['gat'], rtol=1e-4,
                               atol=1e-5)
    assert torch.equal(predictions['gat-rbf'], predictions['gat'])
    assert predictions['gat-rbf result'] == predictions['gat result']


def test_protocol_follows_the_gat_paper():
    cora, pubmed = protocol_for('cora'), protocol_for('PubMed')
    assert (cora['lr'], cora['weight_decay'], cora['heads'], cora['hidden'],
            cora['out_heads'], cora['dropout'],
            cora['patience']) == (0.005, 5e-4, 8, 8, 1, 0.6, 100)
    assert (pubmed['lr'], pubmed['weight_decay'],
            pubmed['out_heads']) == (0.01, 1e-3, 8)
    assert protocol_for('CiteSeer', lr=0.1, epochs=None)['lr'] == 0.1
    with pytest.raises(ValueError, match='Unknown protocol'):
        protocol_for('Cora', learning_rate=0.1)


def test_variational_models_build_their_layers():
    from ikgat import IKGATConv, MIKANConv
    from ikgat.kernels import ImplicitSpectralKernel
    for name in ('ikan', 'mikan'):
        spec = MODELS[name]
        assert spec.variational and spec.uses_num_features
    ikan = build_model('ikan', 12, 3, protocol_for('Cora'), R=8)
    assert isinstance(ikan.conv1, IKGATConv)
    assert isinstance(ikan.conv1.kernel, ImplicitSpectralKernel)
    assert ikan.conv1.kernel.num_features == 8
    mikan = build_model('mikan', 12, 3, protocol_for('Cora'), R=8)
    assert isinstance(mikan.conv1, MIKANConv)
    assert mikan.conv1.kernel.raw_correlation is not None


def test_node_path_changes_the_evaluation_not_the_model():
    data = tiny_graph()
    for name in ('ika', 'ikan-direct', 'mikan'):
        outputs = []
        for node_path in ('eager', 'plain'):
            torch.manual_seed(0)
            net = build_model(name, 12, 3, protocol_for('Cora'), R=8,
                              node_path=node_path).eval()
            assert net.conv1.kernel.node_path == node_path
            assert net.conv2.kernel.node_path == node_path
            outputs.append(net(data.x, data.edge_index))
        torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-4,
                                   atol=1e-5)
    with pytest.raises(ValueError, match="'node_path' 'fast'"):
        build_model('ika', 12, 3, protocol_for('Cora'), node_path='fast')


def _row(dataset, model, seed, val, test, p='', R='', beta='', tag='final'):
    return dict(dataset=dataset, model=model, tag=tag, seed=str(seed), p=p,
                R=R, beta=beta, lr='0.005', weight_decay='0.0005',
                val_acc=str(val), test_acc=str(test), epochs='200',
                best_epoch='100', seconds='2.5', num_parameters='1000',
                device='cpu', git_commit='abc')


def test_selection_reads_validation_only():
    rows = []
    for seed in range(3):
        # p=1.5: better validation, worse test; p=3: the reverse.
        rows.append(_row('Cora', 'ikan-direct', seed, 0.80, 0.70, '1.5',
                         '64', tag='search'))
        rows.append(_row('Cora', 'ikan-direct', seed, 0.79, 0.90, '3.0',
                         '64', tag='search'))
        rows.append(_row('Cora', 'ikan-direct', seed, 0.80, 0.95, '2.0',
                         '64', tag='search'))
        # Tie with p=2 at R=64: the smaller R wins.
        rows.append(_row('Cora', 'ikan-direct', seed, 0.80, 0.10, '2.0',
                         '32', tag='search'))
    chosen = select_hyperparameters(rows)[('Cora', 'ikan-direct')]
    assert (chosen['p'], chosen['R'], chosen['beta']) == (2.0, 32, None)
    assert chosen['n'] == 3
    # Test accuracies are ignored entirely:
    blank = [dict(r, test_acc='') for r in rows]
    assert select_hyperparameters(blank) == select_hyperparameters(rows)


@pytest.mark.slow  # a grid of benchmark runs
def test_search_runs_grid_without_test_and_feeds_final_runs(tmp_path):
    results = str(tmp_path / 'search.csv')
    summary = str(tmp_path / 'search.md')
    rows = run_search(['Tiny'], ['gat', 'ika'], [100, 101], results=results,
                      summary=summary, grid=dict(p=[1.5, 2.0], R=[32]),
                      protocol_overrides=QUICK, device='cpu',
                      progress=False, load_dataset=tiny_loader)
    # gat has nothing to search (1 point), ika has 2 p x 1 R:
    assert len(rows) == (1 + 2) * 2
    assert all(r['test_acc'] == '' and r['tag'] == 'search' for r in rows)
    text = open(summary).read()
    assert '**yes**' in text and 'test' not in text.split('\n## ')[1]
    chosen = select_hyperparameters(read_results(results))
    final = run_benchmark(['Tiny'], ['ika'], [0],
                          results=str(tmp_path / 'final.csv'),
                          selected=chosen, protocol_overrides=QUICK,
                          device='cpu', progress=False,
                          load_dataset=tiny_loader)
    pick = chosen[('Tiny', 'ika')]
    assert (float(final[0]['p']), int(final[0]['R'])) == (pick['p'],
                                                          pick['R'])


def test_summary_markdown_compares_with_our_gat():
    rows = []
    for seed, (gat, direct, rbf) in enumerate([(0.81, 0.84, 0.80),
                                               (0.82, 0.85, 0.83),
                                               (0.83, 0.84, 0.82),
                                               (0.82, 0.85, 0.81),
                                               (0.81, 0.84, 0.82)]):
        rows.append(_row('Cora', 'gat', seed, 0.8, gat))
        rows.append(_row('Cora', 'ikan-direct', seed, 0.8, direct, '2.5',
                         '64'))
        rows.append(_row('Cora', 'gat-rbf', seed, 0.8, rbf, '2.0'))
        rows.append(_row('Cora', 'gat', seed, 0.8, 0.5, tag='smoke'))
    text = render_summary(rows, tag='final', results='r.csv',
                          output='r.md')
    gat = mean_std_ci([81, 82, 83, 82, 81])
    assert f'{gat.mean:.2f} ± {gat.std:.2f}' in text  # smoke rows excluded
    assert f'[{gat.low:.2f}, {gat.high:.2f}]' in text
    assert '83.0 ± 0.7 (GAT)' in text and '83.3 ± 0.7 (IKAN-direct)' in text
    assert ('ikan-direct (84.40 ± 0.55, n=5) is 2.60 points above our gat'
            in text)
    assert 'the 95% CIs do not overlap: ikan-direct is better here' in text
    assert 'gat-rbf (81.60 ± 1.14, n=5) is 0.20 points below our gat' in text
    assert 'the 95% CIs overlap' in text
    assert "Against the paper's 83.3: at or above (+1.10)" in text
    assert ('python -m benchmarks.planetoid --datasets Cora --models '
            'ikan-direct --seeds 0-4 --p 2.5 --num-features 64 --tag final '
            '--results r.csv --resume') in text
    assert ('python -m benchmarks.planetoid summary --results r.csv '
            '--tag final') in text
    assert '--models gat-rbf --seeds 0-4 --tag final' in text  # p is fixed
    # Cells are ordered by the models table whatever the row order:
    assert text.index('| gat-rbf |') < text.index('| ikan-direct |')


def test_cli_summary_and_results_schema_errors(tmp_path, capsys):
    from benchmarks.planetoid import main
    results = tmp_path / 'planetoid.csv'
    with open(results, 'w', newline='') as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for seed in range(3):
            writer.writerow(_row('Cora', 'gat', seed, 0.8, 0.82))
    output = tmp_path / 'planetoid.md'
    main(['summary', '--results', str(results), '--output',
          str(output), '--search-results', ''])
    assert '## Cora' in output.read_text()
    bad = tmp_path / 'bad.csv'
    bad.write_text('dataset,model,seed,p,R,beta,tag,acc\n')
    with pytest.raises(ValueError, match='has the columns'):
        ResultsWriter(str(bad))


def test_saved_checkpoints_rebuild_the_trained_models(tmp_path):
    from ikgat.training.checkpoints import load_checkpoint

    checkpoints = tmp_path / 'checkpoints'
    rows = run_benchmark(['Tiny'], ['gat', 'ikan-direct', 'mikan'], [0],
                         results=str(tmp_path / 'r.csv'), tag='test',
                         protocol_overrides=QUICK, device='cpu',
                         progress=False, load_dataset=tiny_loader,
                         checkpoint_dir=str(checkpoints))
    files = sorted(path.name for path in checkpoints.iterdir())
    assert files == [
        'Tiny_gat_p-_R-_seed0_test.pt', 'Tiny_ikan-direct_p2.0_R64_seed0_test.pt',
        'Tiny_mikan_p2.0_R64_seed0_test.pt'
    ]
    data = tiny_graph()
    for name, row in zip(files, rows):
        checkpoint = load_checkpoint(str(checkpoints / name))
        with torch.no_grad():
            out = checkpoint.model(data.x, data.edge_index)
        val_acc = float((out[data.val_mask].argmax(-1) ==
                         data.y[data.val_mask]).float().mean())
        assert math.isclose(val_acc, float(row['val_acc']), abs_tol=1e-6)


@pytest.mark.parametrize('model', ['gat-rbf', *TRANSFORMER_LAYERS])
def test_a_saved_checkpoint_computes_what_the_trained_model_did(
        model, tmp_path, monkeypatch):
    # `--save-checkpoints` through run_one: the rebuilt model, with what it
    # was built with (the transformer family's self-loops included), gives
    # the saved model's outputs with the saved weights.
    from ikgat.training.checkpoints import load_checkpoint
    saved = []
    original = bench.save_checkpoint

    def spy(path, net, *args, **kwargs):
        saved.append((path, net, kwargs['state_dict']))
        return original(path, net, *args, **kwargs)

    monkeypatch.setattr(bench, 'save_checkpoint', spy)
    run_benchmark(['Tiny'], [model], [0], results=str(tmp_path / 'r.csv'),
                  tag='test', protocol_overrides=QUICK, device='cpu',
                  progress=False, load_dataset=tiny_loader,
                  checkpoint_dir=str(tmp_path / 'checkpoints'))
    [(path, net, state_dict)] = saved
    net.load_state_dict(state_dict)
    net.eval()
    checkpoint = load_checkpoint(path)
    assert checkpoint.model.self_loops == MODELS[model].self_loops
    data = tiny_graph()
    with torch.no_grad():
        torch.testing.assert_close(
            checkpoint.model(data.x, data.edge_index),
            net(data.x, data.edge_index), rtol=0, atol=0)


@needs_sampler
def test_mini_batch_regime_from_the_protocol(tmp_path, monkeypatch):
    # --batch-size/--fan-out reach the training loop as mini-batches and
    # layer-wise inference.
    seen = []
    original = bench.train_node_classifier

    def spy(*args, **kwargs):
        seen.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(bench, 'train_node_classifier', spy)
    results = str(tmp_path / 'mini.csv')
    parser = argparse.ArgumentParser()
    add_regime_arguments(parser)
    args = parser.parse_args(['--batch-size', '4', '--fan-out', '3', '-1'])
    rows = run_benchmark(['Tiny'], ['gat', 'ikan-direct'], [0],
                         results=results, tag='mini',
                         protocol_overrides=dict(QUICK,
                                                 **regime_overrides(args)),
                         device='cpu', progress=False,
                         load_dataset=tiny_loader)
    assert len(rows) == 2
    batches = [batch for batch, _ in seen[0]['batches'](1)]
    assert [batch.batch_size for batch in batches] == [4, 4, 4]
    assert seen[0]['inference']().shape == (48, 3)
    full = protocol_for('Cora')
    assert full['batch_size'] is None and bench.training_regime(
        full, None, None, 0) == {}


def test_transformer_family_swaps_the_layer_and_adds_self_loops():
    for name, layer in TRANSFORMER_LAYERS.items():
        spec = MODELS[name]
        assert spec.family == 'transformer' and spec.self_loops
        net = build_model(name, 12, 3, protocol_for('PubMed'), R=8)
        assert type(net.conv1).__name__ == layer
        assert net.self_loops
        # the GAT recipe: 8 heads x 8 concatenated, 8 averaged outputs.
        assert (net.conv1.heads, net.conv1.out_channels,
                net.conv1.concat) == (8, 8, True)
        assert (net.conv2.heads, net.conv2.concat) == (8, False)
        assert net.conv1.dropout == 0.6
    assert not any(spec.self_loops for spec in MODELS.values()
                   if spec.family == 'gat')
    assert MODELS['ikt-rbf'].fixed_p == 2.0
    assert build_model('ikt-direct', 12, 3, protocol_for('Cora'),
                       R=8).conv1.kernel.num_spectral_points == 8


def test_transformer_and_ikt_rbf_start_equal_and_compute_the_same():
    data = tiny_graph()
    outputs = []
    for name in ('transformer', 'ikt-rbf'):
        torch.manual_seed(0)
        net = build_model(name, data.num_features, 3,
                          protocol_for('Cora')).eval()
        outputs.append(net(data.x, data.edge_index))
    torch.testing.assert_close(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)


def test_self_loops_are_one_per_node():
    from torch_geometric.nn import TransformerConv

    from ikgat.models import TwoLayerGAT
    seen = []

    class Recording(TransformerConv):
        def forward(self, x, edge_index, *args, **kwargs):
            seen.append(edge_index)
            return super().forward(x, edge_index, *args, **kwargs)

    net = TwoLayerGAT(4, 2, 3, Recording, heads=2, self_loops=True).eval()
    edge_index = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 2]])
    net(torch.randn(5, 4), edge_index)
    for used in seen:
        loops = used[0] == used[1]
        assert sorted(used[0, loops].tolist()) == [0, 1, 2, 3, 4]
        assert used.size(1) == 3 + 5
    with pytest.raises(ValueError, match='self_loops=False'):
        net(torch.randn(5, 4), torch.sparse_coo_tensor(
            edge_index, torch.ones(4), (5, 5)))


def test_summary_writes_the_command_of_the_runs_at_the_top(tmp_path):
    results = str(tmp_path / 'runs.csv')
    run_benchmark(['Tiny'], ['transformer', 'ikt-rbf'], [0, 1],
                  results=results, tag='test', protocol_overrides=QUICK,
                  device='cpu', progress=False, load_dataset=tiny_loader)
    text = render_summary(read_results(results), tag='test',
                          results=results, command='python -m x --y')
    assert text.splitlines()[2] == 'Command of the runs: `python -m x --y`'
    assert 'self-loop per node' in text
    assert 'compared with our own transformer run' in text
    assert 'No `gat` runs' not in text


def test_searched_grids_cover_exactly_the_searched_configurations():
    """The Reproduce lines of search.md: a full product is one grid; a
    line of p at one R and a line of R at p = 2 are two grids, not their
    product."""
    def stats(p, R, beta=''):
        return ConfigStats('PubMed', 'ikt-direct', p, R, beta,
                           mean_std_ci([80.0, 80.0]), [100, 101])

    cross = [stats('1.5', '64'), stats('2.0', '64'), stats('3.0', '64'),
             stats('2.0', '32'), stats('2.0', '128')]
    assert searched_grids(cross) == [(['1.5', '2.0', '3.0'], ['64'], []),
                                     (['2.0'], ['32', '128'], [])]
    full = [stats(p, R, '0.1') for R in ('64', '32') for p in ('3.0', '2.0')]
    assert searched_grids(full) == [(['2.0', '3.0'], ['32', '64'], ['0.1'])]
    for grids, group in ((searched_grids(cross), cross),
                         (searched_grids(full), full)):
        covered = {(p, R, beta) for ps, rs, betas in grids for p in ps
                   for R in rs for beta in (betas or [''])}
        assert covered == {(s.p, s.R, s.beta) for s in group}
