import os
import os.path as osp
import shutil

import pytest
import torch

from ikgat.data import cache_dir, data_root, load_planetoid


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
    monkeypatch.delenv('IKGAT_DATA', raising=False)
    # Offline here: the download fails, and the error says what to set.
    monkeypatch.setattr('torch_geometric.datasets.Planetoid.download',
                        _no_network)
    with pytest.raises(RuntimeError, match='IKGAT_DATA.*Planetoid/CiteSeer'):
        load_planetoid('CiteSeer')


@pytest.mark.parametrize('via_environment', [False, True])
def test_a_given_data_folder_is_not_downloaded_into(monkeypatch, tmp_path,
                                                    via_environment):
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setattr('torch_geometric.datasets.Planetoid.download',
                        _must_not_download)
    folder = str(tmp_path / 'empty')
    if via_environment:
        monkeypatch.setenv('IKGAT_DATA', folder)
    with pytest.raises(ValueError, match='empty.*lacks the CiteSeer raw'):
        load_planetoid('CiteSeer', root=None if via_environment else folder)


def _raw_copy(tmp_path) -> str:
    root = os.environ.get('IKGAT_DATA')
    raw = osp.join(root or '', 'Planetoid', 'Cora', 'raw')
    if not root or not osp.isdir(raw):
        pytest.skip('the Planetoid raw files are not available')
    copy = tmp_path / 'data' / 'Planetoid' / 'Cora' / 'raw'
    shutil.copytree(raw, copy)
    return str(tmp_path / 'data')


@pytest.mark.parametrize('part', ['x', 'graph', 'ally'])
def test_a_truncated_raw_file_is_named(monkeypatch, tmp_path, part):
    root = _raw_copy(tmp_path)
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    path = osp.join(root, 'Planetoid', 'Cora', 'raw', f'ind.cora.{part}')
    with open(path, 'rb') as file:
        head = file.read()[:100]
    with open(path, 'wb') as file:
        file.write(head)
    with pytest.raises(ValueError, match=rf'ind\.cora\.{part} is damaged'):
        load_planetoid('Cora', root=root)


def test_a_damaged_processed_file_is_rebuilt(monkeypatch, tmp_path):
    root = _raw_copy(tmp_path)
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    expected = load_planetoid('Cora', root=root)[0]
    processed = tmp_path / 'cache' / 'Planetoid' / 'Cora' / 'processed'
    (processed / 'data.pt').write_bytes(b'\x80\x02 cut off')
    data = load_planetoid('Cora', root=root)[0]
    assert data.num_edges == expected.num_edges
    assert torch.equal(data.x, expected.x)


def test_unknown_name():
    with pytest.raises(ValueError, match="'Kora'"):
        load_planetoid('Kora')


def _no_network(*args, **kwargs):
    raise OSError('network unreachable')


def _must_not_download(*args, **kwargs):
    raise AssertionError('a given data folder must not be downloaded into')
