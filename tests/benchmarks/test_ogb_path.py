"""The OGB path end to end (loader → training → Evaluator) on a tiny dataset
written in OGB's raw on-disk format, since ogbn-arxiv cannot be downloaded
here."""
import csv
import os

import pytest
import torch

pd = pytest.importorskip('pandas')
pytest.importorskip('ogb')
pytest.importorskip('sklearn')  # ogb's Evaluator imports it

from benchmarks.ogbn import OGB_COLUMNS, load_ogbn, run_ogb  # noqa: E402
from tests.helpers import needs_sampler  # noqa: E402

NUM_NODES, NUM_CLASSES, CHANNELS = 60, 3, 8


def _write(frame, path):
    pd.DataFrame(frame).to_csv(path, header=False, index=False,
                               compression='gzip', float_format='%.6f')


def write_tiny_ogbn(folder) -> dict:
    r"""Write a tiny directed citation graph laid out like ogbn-arxiv's
    download (``raw/`` files, ``split/time/`` indices, the release marker)
    and return the ``meta_dict`` that makes PygNodePropPredDataset read it:
    ogbn-arxiv's row of ogb's ``master.csv`` with another folder and class
    count."""
    master = pd.read_csv(
        os.path.join(os.path.dirname(__import__('ogb.nodeproppred').
                                     nodeproppred.__file__), 'master.csv'),
        index_col=0, keep_default_na=False)
    meta = {key: str(value) for key, value in master['ogbn-arxiv'].items()}
    meta.update({'dir_path': str(folder), 'num classes': str(NUM_CLASSES)})

    generator = torch.Generator().manual_seed(0)
    y = torch.arange(NUM_NODES) % NUM_CLASSES
    centers = torch.randn(NUM_CLASSES, CHANNELS, generator=generator)
    x = centers[y] + 0.5 * torch.randn(NUM_NODES, CHANNELS,
                                       generator=generator)
    src = torch.randint(0, NUM_NODES, (3 * NUM_NODES, ), generator=generator)
    shift = torch.randint(1, NUM_NODES // NUM_CLASSES, src.shape,
                          generator=generator) * NUM_CLASSES
    dst = (src + shift) % NUM_NODES  # same-class citations, one direction
    raw, split = folder / 'raw', folder / 'split' / meta['split']
    raw.mkdir(parents=True)
    split.mkdir(parents=True)
    _write(torch.stack([src, dst], 1).numpy(), raw / 'edge.csv.gz')
    _write([[NUM_NODES]], raw / 'num-node-list.csv.gz')
    _write([[src.numel()]], raw / 'num-edge-list.csv.gz')
    _write(x.numpy(), raw / 'node-feat.csv.gz')
    _write(y.view(-1, 1).numpy(), raw / 'node-label.csv.gz')
    _write((2000 + torch.arange(NUM_NODES) // 6).view(-1, 1).numpy(),
           raw / 'node_year.csv.gz')
    index = torch.randperm(NUM_NODES, generator=generator)
    for name, part in (('train', index[:30]), ('valid', index[30:45]),
                       ('test', index[45:])):
        _write(part.view(-1, 1).numpy(), split / f'{name}.csv.gz')
    (folder / f'RELEASE_v{meta["version"]}.txt').write_text('tiny\n')
    return meta


@pytest.fixture
def tiny_ogbn(tmp_path):
    return write_tiny_ogbn(tmp_path / 'ogbn_tiny')


def test_loader_reads_ogb_raw_format(tiny_ogbn):
    bench = load_ogbn('ogbn-arxiv', meta_dict=tiny_ogbn)
    data = bench.data
    assert (data.num_nodes, bench.num_features,
            bench.num_classes) == (NUM_NODES, CHANNELS, NUM_CLASSES)
    assert data.x.dtype == torch.float32 and data.y.shape == (NUM_NODES, )
    assert int(data.train_mask.sum()) == 30
    assert int(data.val_mask.sum()) == 15 and int(data.test_mask.sum()) == 15
    assert not (data.train_mask & data.test_mask).any()
    # arxiv is made undirected: every edge has its reverse.
    edges = set(map(tuple, data.edge_index.t().tolist()))
    assert all((j, i) in edges for i, j in edges)
    assert hasattr(data, 'node_year')


def test_loader_training_evaluator_end_to_end(tiny_ogbn, tmp_path):
    results = str(tmp_path / 'ogb.csv')
    rows = run_ogb('ogbn-arxiv', ['gat', 'ikan-direct'], [0],
                   results=results, tag='test', meta_dict=tiny_ogbn,
                   protocol_overrides=dict(epochs=25, patience=10, hidden=8,
                                           heads=2, lr=0.01),
                   device='cpu', progress=False)
    assert len(rows) == 2
    with open(results, newline='') as f:
        assert next(csv.reader(f)) == OGB_COLUMNS
    for row in rows:
        for key in ('train_acc', 'val_acc', 'test_acc'):
            assert 0.0 <= float(row[key]) <= 1.0
    # The separable tiny graph is learned well above chance (1/3):
    assert max(float(r['val_acc']) for r in rows) > 0.6
    # Resume skips them all.
    again = run_ogb('ogbn-arxiv', ['gat', 'ikan-direct'], [0],
                    results=results, tag='test', meta_dict=tiny_ogbn,
                    resume=True, device='cpu', progress=False)
    assert again == []


def test_evaluator_matches_training_loop(tiny_ogbn, tmp_path):
    from benchmarks.harness.registry import build_model, protocol_for
    from benchmarks.harness.runtime import seed_everything
    from benchmarks.ogbn import evaluate_ogb
    from ikgat.training import train_node_classifier

    bench = load_ogbn('ogbn-arxiv', meta_dict=tiny_ogbn)
    seed_everything(0)
    net = build_model('gat', bench.num_features, bench.num_classes,
                      protocol_for('ogbn', hidden=8, heads=2))
    result = train_node_classifier(net, bench.data, lr=0.01, epochs=20,
                                   patience=20, keep_best_state=True)
    net.load_state_dict(result.state_dict)
    accuracy = evaluate_ogb('ogbn-arxiv', net, bench.data)
    assert accuracy['valid'] == pytest.approx(result.val_acc, abs=1e-6)
    assert accuracy['test'] == pytest.approx(result.test_acc, abs=1e-6)


@pytest.mark.slow  # a benchmark's whole run, in smoke mode
@needs_sampler
def test_mini_batches_through_the_ogb_path(tiny_ogbn, tmp_path):
    # Neighbour-sampled training and layer-wise evaluation: the evaluator's
    # accuracies are those of the selected epoch.
    from benchmarks.ogbn import OGB_PROTOCOLS
    assert OGB_PROTOCOLS['ogbn-products']['batch_size'] == 1024
    rows = run_ogb('ogbn-arxiv', ['ikan-direct'], [0],
                   results=str(tmp_path / 'ogb.csv'), tag='mini',
                   meta_dict=tiny_ogbn,
                   protocol_overrides=dict(epochs=25, patience=25, hidden=8,
                                           heads=2, lr=0.01, batch_size=8,
                                           fan_out=(5, 5),
                                           eval_batch_size=16),
                   device='cpu', progress=False)
    assert float(rows[0]['val_acc']) >= 0.5  # chance is 1/3


def test_the_study_does_not_shadow_ogb():
    # benchmarks/ogbn.py is not named ogb.py: from the repository root,
    # ``import ogb`` finds the installed package.
    import ogb

    import benchmarks.ogbn  # noqa: F401
    assert 'site-packages' in ogb.__file__ or 'dist-packages' in ogb.__file__
