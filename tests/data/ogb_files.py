r"""A tiny node-classification dataset written in OGB's on-disk format (the
layout of OGB's zip files: ``raw/`` csv files, ``split/<kind>/`` indices
and the release marker), under the name of a real ``ogbn`` dataset so that
ogb's own loader reads it as that dataset."""
import os.path as osp

import torch

NUM_NODES, NUM_CLASSES, CHANNELS = 60, 3, 8


def ogb_meta(name: str) -> dict:
    import ogb.nodeproppred
    import pandas as pd
    master = pd.read_csv(
        osp.join(osp.dirname(ogb.nodeproppred.__file__), 'master.csv'),
        index_col=0, keep_default_na=False)
    return {key: str(value) for key, value in master[name].items()}


def _write(rows, path) -> None:
    import pandas as pd
    pd.DataFrame(rows).to_csv(path, header=False, index=False,
                              compression='gzip', float_format='%.6f')


def write_ogbn(root, name: str = 'ogbn-arxiv'):
    r"""Write a 60-node graph of 3 classes as :obj:`name` under the data
    root :obj:`root` (``root/ogbn_arxiv/...``) and return its folder."""
    meta = ogb_meta(name)
    folder = root / '_'.join(name.split('-'))
    generator = torch.Generator().manual_seed(0)
    y = torch.arange(NUM_NODES) % NUM_CLASSES
    centers = torch.randn(NUM_CLASSES, CHANNELS, generator=generator)
    x = centers[y] + 0.5 * torch.randn(NUM_NODES, CHANNELS,
                                       generator=generator)
    src = torch.randint(0, NUM_NODES, (3 * NUM_NODES, ), generator=generator)
    shift = torch.randint(1, NUM_NODES // NUM_CLASSES, src.shape,
                          generator=generator) * NUM_CLASSES
    dst = (src + shift) % NUM_NODES  # same-class edges, one direction
    raw, split = folder / 'raw', folder / 'split' / meta['split']
    raw.mkdir(parents=True)
    split.mkdir(parents=True)
    _write(torch.stack([src, dst], 1).numpy(), raw / 'edge.csv.gz')
    _write([[NUM_NODES]], raw / 'num-node-list.csv.gz')
    _write([[src.numel()]], raw / 'num-edge-list.csv.gz')
    _write(x.numpy(), raw / 'node-feat.csv.gz')
    _write(y.view(-1, 1).numpy(), raw / 'node-label.csv.gz')
    for extra in meta['additional node files'].split(','):
        if extra != 'None':
            _write((torch.arange(NUM_NODES) // 6).view(-1, 1).numpy(),
                   raw / f'{extra}.csv.gz')
    index = torch.randperm(NUM_NODES, generator=generator)
    for part, nodes in (('train', index[:30]), ('valid', index[30:45]),
                        ('test', index[45:])):
        _write(nodes.view(-1, 1).numpy(), split / f'{part}.csv.gz')
    (folder / f'RELEASE_v{meta["version"]}.txt').write_text('tiny\n')
    return folder
