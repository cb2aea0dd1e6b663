"""OGB's datasets through ogb's own loader, split and Evaluator, read from a
read-only data root in OGB's layout (a tiny graph written by the test)."""
import os
import stat

import pytest
import torch

pytest.importorskip('ogb')
pytest.importorskip('pandas')
pytest.importorskip('sklearn')  # ogb's Evaluator imports it

from ikgat.data import load_dataset  # noqa: E402
from tests.data.ogb_files import NUM_NODES, write_ogbn  # noqa: E402


def _read_only(folder) -> None:
    for path, _, files in os.walk(folder):
        for name in files:
            os.chmod(os.path.join(path, name), stat.S_IRUSR)
        os.chmod(path, stat.S_IRUSR | stat.S_IXUSR)


@pytest.fixture
def ogb_root(tmp_path, monkeypatch):
    root = tmp_path / 'data'
    write_ogbn(root, 'ogbn-arxiv')
    write_ogbn(root, 'ogbn-products')
    _read_only(root)
    monkeypatch.setenv('IKGAT_CACHE', str(tmp_path / 'cache'))
    yield root
    for path, _, _ in os.walk(root):
        os.chmod(path, stat.S_IRWXU)


def test_arxiv_reads_ogbs_layout_without_writing_there(ogb_root, tmp_path):
    dataset = load_dataset('ogbn-arxiv', str(ogb_root))
    data = dataset.data
    assert data.num_nodes == NUM_NODES
    assert dataset.num_classes == 40  # ogbn-arxiv's, from ogb's master.csv
    assert dataset.num_splits == 1
    assert [int(data[key].sum()) for key in
            ('train_mask', 'val_mask', 'test_mask')] == [30, 15, 15]
    assert data.y.dim() == 1 and data.x.dtype == torch.float32
    assert dataset.batch_size is None  # full batch
    assert not (ogb_root / 'ogbn_arxiv' / 'processed').exists()
    assert (tmp_path / 'cache' / 'ogb' / 'ogbn_arxiv' / 'processed').is_dir()


def test_products_trains_in_minibatches(ogb_root):
    dataset = load_dataset('OGBN-Products', str(ogb_root))
    assert dataset.name == 'ogbn-products'
    assert (dataset.batch_size, dataset.fan_out) == (1024, (15, 10))


def test_the_score_is_ogbs_evaluator(ogb_root):
    dataset = load_dataset('ogbn-arxiv', str(ogb_root))
    data = dataset.data
    logits = torch.nn.functional.one_hot(data.y, 40).float()
    assert dataset.score.name == 'OGB acc'
    assert dataset.score(logits, data.y, data.test_mask) == 1.0
    assert dataset.score(-logits, data.y, data.test_mask) == 0.0


def test_a_missing_dataset_names_the_folder_and_where_ogb_publishes_it(
        tmp_path):
    with pytest.raises(ValueError) as caught:
        load_dataset('ogbn-arxiv', str(tmp_path))
    message = str(caught.value)
    assert str(tmp_path / 'ogbn_arxiv') in message
    assert 'http://snap.stanford.edu/ogb/data/nodeproppred/arxiv.zip' in (
        message)
