import os
import os.path as osp

import pytest

from ikgat.datasets import cache_dir, data_root, load_planetoid


def test_root_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv('IKGAT_DATA', str(tmp_path / 'data'))
    assert data_root('/explicit') == '/explicit'
    assert data_root() == str(tmp_path / 'data')
    monkeypatch.delenv('IKGAT_DATA')
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    assert data_root() == cache_dir() == str(tmp_path / 'cache')


def test_loads_planetoid_without_writing_beside_raw(monkeypatch, tmp_path):
    root = os.environ.get('IKGAT_DATA')
    raw = osp.join(root or '', 'Planetoid', 'Cora', 'raw')
    if not root or not osp.isdir(raw):
        pytest.skip('the Planetoid raw files are not available')
    before = sorted(os.listdir(osp.join(root, 'Planetoid', 'Cora')))
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path))
    dataset = load_planetoid('cora')
    data = dataset[0]
    assert (data.num_nodes, data.num_edges) == (2708, 10556)
    assert int(data.train_mask.sum()) == 140
    assert int(data.val_mask.sum()) == 500
    assert int(data.test_mask.sum()) == 1000
    assert sorted(os.listdir(osp.join(root, 'Planetoid', 'Cora'))) == before
    assert osp.isdir(tmp_path / 'Planetoid' / 'Cora' / 'processed')


def test_missing_files_give_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    # Offline here: the download fails, and the error says what to set.
    monkeypatch.setattr('torch_geometric.datasets.Planetoid.download',
                        _no_network)
    with pytest.raises(RuntimeError, match='IKGAT_DATA.*Planetoid/CiteSeer'):
        load_planetoid('CiteSeer', root=str(tmp_path / 'empty'))


def test_unknown_name():
    with pytest.raises(ValueError, match="'Kora'"):
        load_planetoid('Kora')


def _no_network(*args, **kwargs):
    raise OSError('network unreachable')
