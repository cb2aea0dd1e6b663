"""``ikgat train --dataset`` over every family of datasets: the score, the
split and the training regime come from the dataset."""
import os
import os.path as osp

import pytest

from ikgat.cli import main
from tests.helpers import needs_sampler


def _train(capsys, *argv):
    main(['train', '--epochs', '2', '--hidden', '4', '--heads', '2',
          '--no-progress', *argv])
    return capsys.readouterr().out.strip().splitlines()


def test_minesweeper_trains_on_a_split_and_reports_roc_auc(
        capsys, monkeypatch, tmp_path):
    root = os.environ.get('IKGAT_DATA', '')
    if not osp.isdir(osp.join(root, 'HeterophilousGraphDataset',
                              'minesweeper')):
        pytest.skip('minesweeper is not in IKGAT_DATA')
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path))
    lines = _train(capsys, '--dataset', 'minesweeper', '--split', '2',
                   '--layer', 'gat')
    assert lines[0].startswith('ikgat train: GATConv on minesweeper: 10000 '
                               'nodes')
    assert 'test ROC-AUC ' in lines[1]
    assert 'validation ROC-AUC ' in lines[1]


def test_a_split_that_the_dataset_lacks_is_one_line(capsys):
    with pytest.raises(SystemExit) as caught:
        main(['train', '--dataset', 'Cora', '--split', '3'])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == ('ikgat train: error: Cora has 1 split(s), numbered 0 to '
                   '0 (got 3)')


def test_a_missing_ogb_dataset_is_one_line(capsys, tmp_path):
    pytest.importorskip('ogb')
    with pytest.raises(SystemExit) as caught:
        main(['train', '--dataset', 'ogbn-arxiv', '--root', str(tmp_path)])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(tmp_path / 'ogbn_arxiv') in err and 'arxiv.zip' in err


@needs_sampler
def test_ogbn_products_trains_in_minibatches(capsys, monkeypatch, tmp_path):
    pytest.importorskip('ogb')
    pytest.importorskip('sklearn')
    from tests.data.ogb_files import write_ogbn
    write_ogbn(tmp_path / 'data', 'ogbn-products')
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    lines = _train(capsys, '--dataset', 'ogbn-products', '--root',
                   str(tmp_path / 'data'), '--layer', 'gat')
    assert 'mini-batches of 1024 seeds, fan-out 15 10' in lines[0]
    assert 'test OGB acc ' in lines[1]
