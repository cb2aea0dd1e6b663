"""PyG's heterophilous graphs from the read-only data root: their 10 fixed
splits and their ROC-AUC score."""
import os
import os.path as osp

import pytest
import torch

from ikgat.data import load_dataset
from ikgat.data.scores import ROCAUC


def _data_root() -> str:
    root = os.environ.get('IKGAT_DATA', '')
    if not osp.isfile(osp.join(root, 'HeterophilousGraphDataset',
                               'minesweeper', 'raw', 'minesweeper.npz')):
        pytest.skip('the heterophilous graphs are not in IKGAT_DATA')
    return root


def test_minesweeper_has_ten_splits_and_scores_by_roc_auc(monkeypatch,
                                                         tmp_path):
    root = _data_root()
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path))
    before = os.listdir(osp.join(root, 'HeterophilousGraphDataset',
                                 'minesweeper'))
    dataset = load_dataset('Minesweeper')
    assert dataset.name == 'minesweeper'
    assert dataset.num_classes == 2 and dataset.num_splits == 10
    assert dataset.score.name == 'ROC-AUC'
    data = dataset.split(3)
    assert data.train_mask.dim() == 1
    assert torch.equal(data.train_mask, dataset.data.train_mask[:, 3])
    assert not (data.train_mask & data.test_mask).any()
    assert os.listdir(osp.join(root, 'HeterophilousGraphDataset',
                               'minesweeper')) == before
    with pytest.raises(ValueError, match='numbered 0 to 9'):
        dataset.split(10)


def test_a_missing_graph_names_the_folder_and_the_source(tmp_path):
    with pytest.raises(ValueError) as caught:
        load_dataset('tolokers', str(tmp_path))
    message = str(caught.value)
    assert str(tmp_path / 'HeterophilousGraphDataset' / 'tolokers' / 'raw') \
        in message
    assert 'heterophilous-graphs' in message


def test_roc_auc_ranks_the_positive_class():
    y = torch.tensor([0, 1, 0, 1])
    mask = torch.ones(4, dtype=torch.bool)
    logits = torch.tensor([[2., 0.], [0., 2.], [1., 0.], [0., 1.]])
    assert ROCAUC()(logits, y, mask) == 1.0
    assert ROCAUC()(logits.flip(-1), y, mask) == 0.0
