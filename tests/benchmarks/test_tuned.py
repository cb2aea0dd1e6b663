"""The tables from tuned configurations: studies that resume in a text
journal, evaluation runs that the search never used, paired comparisons,
and the fitting recipe that a trial and an evaluation run share."""
import csv
import json
import math

import pytest
import torch
from torch_geometric.data import Data

from benchmarks import tuned
from ikgat.data import load_dataset
from ikgat.training.fitting import fit_configuration

optuna = pytest.importorskip('optuna')

CHEAP = ['--epochs', '3', '--patience', '3', '--threads', '1']


def _fixed_splits(num_nodes=40, num_splits=10):
    masks = {key: torch.zeros(num_nodes, num_splits, dtype=torch.bool)
             for key in ('train_mask', 'val_mask', 'test_mask')}
    for split in range(num_splits):
        order = torch.randperm(num_nodes,
                               generator=torch.Generator().manual_seed(split))
        masks['train_mask'][order[:20], split] = True
        masks['val_mask'][order[20:30], split] = True
        masks['test_mask'][order[30:], split] = True
    return Data(x=torch.randn(num_nodes, 3), num_nodes=num_nodes, **masks)


def test_the_search_split_is_none_of_the_fixed_ones_and_keeps_their_sizes():
    data = _fixed_splits()
    split = tuned.search_split(data, seed=1_000_000)
    masks = [split.train_mask, split.val_mask, split.test_mask]
    assert all(mask.dim() == 1 for mask in masks)
    assert torch.stack(masks).sum(0).eq(1).all()  # a partition
    assert [int(mask.sum()) for mask in masks] == [20, 10, 10]
    for index in range(10):
        assert not torch.equal(split.train_mask, data.train_mask[:, index])
    again = tuned.search_split(data, seed=1_000_000)
    assert torch.equal(again.val_mask, split.val_mask)


def test_evaluation_runs_are_seeds_or_every_fixed_split():
    assert tuned.evaluation_runs(1, seeds=(0, 1, 2)) == [(0, 0), (1, 0),
                                                         (2, 0)]
    assert tuned.evaluation_runs(10) == [(i, i) for i in range(10)]


def test_paired_difference_and_interval():
    cell = {('0', '0'): 0.80, ('1', '0'): 0.82, ('2', '0'): 0.81,
            ('3', '0'): 0.90}
    base = {('0', '0'): 0.79, ('1', '0'): 0.80, ('2', '0'): 0.80}
    diff = tuned.paired(cell, base)
    # Seeds 0-2 only: differences 1, 2, 1 points.
    assert diff.n == 3 and diff.mean == pytest.approx(4 / 3)
    assert diff.std == pytest.approx(math.sqrt(1 / 3))
    assert diff.low < diff.mean < diff.high


def test_a_search_never_reads_the_test_mask(monkeypatch):
    dataset = load_dataset('Cora')
    seen = []

    def fake(model, data, **kwargs):
        seen.append('test_mask' in data)
        from ikgat.training.loop import TrainResult
        return TrainResult(0.5, 0.4, 1, 1, 0.0)

    monkeypatch.setattr('ikgat.training.fitting.train_node_classifier', fake)
    options = dict(hidden=4, dropout=0.0, lr=0.01, weight_decay=0.0)
    fit = fit_configuration(dataset, dataset.split(0), 'gat', options, 1, 1,
                            1, seed=0, device=torch.device('cpu'),
                            read_test=False)
    assert seen == [False] and math.isnan(fit.test_score)
    assert 'test_mask' in dataset.split(0)  # the dataset keeps it
    fit = fit_configuration(dataset, dataset.split(0), 'gat', options, 1, 1,
                            1, seed=0, device=torch.device('cpu'))
    assert seen == [False, True] and fit.test_score == 0.4


def test_fitting_a_stochastic_layer_scores_its_averaged_draws():
    dataset = load_dataset('Cora')
    options = dict(hidden=4, dropout=0.0, lr=0.01, weight_decay=0.0,
                   num_spectral_points=4, num_samples=2)
    runs = [fit_configuration(dataset, dataset.split(0), 'mikan', options, 1,
                              2, 2, seed=3, device=torch.device('cpu'))
            for _ in range(2)]
    assert runs[0] == runs[1]  # seeded, draws included
    assert 0 <= runs[0].test_score <= 1 and 0 <= runs[0].val_score <= 1


def test_transformer_layers_train_with_self_loops(monkeypatch):
    dataset = load_dataset('Cora')
    built = []
    from ikgat import models
    original = models.TwoLayerGAT.__init__

    def spy(self, *args, **kwargs):
        built.append(kwargs.get('self_loops'))
        original(self, *args, **kwargs)

    monkeypatch.setattr(models.TwoLayerGAT, '__init__', spy)
    options = dict(hidden=2, dropout=0.0, lr=0.01, weight_decay=0.0)
    for layer in ('transformerconv', 'gat'):
        fit_configuration(dataset, dataset.split(0), layer, options, 1, 1, 1,
                          seed=0, device=torch.device('cpu'))
    assert built == [True, False]


def test_studies_resume_and_evaluation_writes_paired_rows(tmp_path, capsys):
    paths = ['--configs', str(tmp_path / 'configs')]
    study = ['study', '--datasets', 'Cora', '--studies',
             str(tmp_path / 'studies.log'), *paths, *CHEAP]
    tuned.main(study + ['--models', 'gat', 'ikgat-direct', '--trials', '2'])
    tuned.main(study + ['--models', 'gat', '--trials', '3'])
    out = capsys.readouterr().out
    assert 'Cora-gat: 2 finished trial(s), 1 to run' in out
    assert '  trial 2: ' in out
    config = json.loads((tmp_path / 'configs' / 'Cora-ikgat-direct.json')
                        .read_text())
    # The model's fixed option holds in every trial.
    assert config['layer_options']['kernel'] == 'direct'
    results = str(tmp_path / 'evaluation.csv')
    evaluate = ['evaluate', '--datasets', 'Cora', '--models', 'gat',
                'ikgat-direct', '--seeds', '0', '1', '--results', results,
                *paths, *CHEAP]
    tuned.main(evaluate)
    tuned.main(evaluate)  # resumes: nothing left to run
    with open(results, newline='') as f:
        rows = list(csv.DictReader(f))
    assert [(r['model'], r['seed']) for r in rows] == [
        ('gat', '0'), ('gat', '1'), ('ikgat-direct', '0'),
        ('ikgat-direct', '1')]
    assert all(0 <= float(r['test_score']) <= 1 for r in rows)
    summary = str(tmp_path / 'tuned.md')
    tuned.main(['summary', '--results', results, '--out', summary, *paths,
                '--studies', str(tmp_path / 'studies.log')])
    text = open(summary).read()
    assert '| Cora-gat | ' in text and '| Cora-ikgat-direct | ' in text
    gat_study = next(line for line in text.splitlines()
                     if line.startswith('| Cora-gat | '))
    complete, pruned = gat_study.split('|')[2:4]
    assert int(complete) + int(pruned) == 3
    assert '| Cora | IKGATConv direct | accuracy | 2 |' in text
    assert 'vs gat, n=2' in text and '83.30 ± 0.70' in text
    assert '- Cora-ikgat-direct: ' in text


def test_evaluation_without_a_study_says_which_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match='benchmarks.tuned study '
                       '--datasets Cora --models mikan'):
        tuned.main(['evaluate', '--datasets', 'Cora', '--models', 'mikan',
                    '--configs', str(tmp_path), '--results',
                    str(tmp_path / 'e.csv')])


def test_a_summary_pairs_each_model_with_another_evaluation(tmp_path):
    # Two evaluations of IKGATConv direct (the second at another setting)
    # and GATConv's runs in the first only.
    def rows(model, scores):
        return [dict(dataset='Cora', model=model, layer='x', seed=str(seed),
                     split='0', score='accuracy', val_score='0.8',
                     test_score=str(score), commit='abc')
                for seed, score in enumerate(scores)]
    first = rows('gat', [0.80, 0.82, 0.81]) + rows('ikgat-direct',
                                                   [0.79, 0.80, 0.81])
    second = rows('ikgat-direct', [0.81, 0.82, 0.83])
    text = tuned.render_summary(second, str(tmp_path), against=first,
                                against_name='first.csv')
    line = next(row for row in text.splitlines()
                if row.startswith('| Cora | IKGATConv direct |'))
    cells = [cell.strip() for cell in line.split('|')]
    # Paired with GATConv's runs from the other file: +1.00 on 3 seeds;
    # with its own runs there: +2.00 exactly (each seed +2 points).
    assert cells[6].startswith('+1.00') and cells[6].endswith('n=3')
    assert cells[8].startswith('+2.00 [+2.00, +2.00]')
    assert 'Paired vs first.csv' in text
    assert '| Cora | GATConv |' not in text
    plain = tuned.render_summary(second, str(tmp_path))
    assert 'paired vs against' not in plain and 'vs gat' not in plain
