r"""Exactness report: the figures behind IKGATConv's correctness claims.

* ``kernel='rbf', p=2`` against PyG's GATConv with tied weights on Cora
  (attention weights and outputs, float32 and float64);
* the node-wise fast path against the plain edge-wise evaluation of every
  kernel (:func:`ikgat.reference.edge_wise_attention`) on Cora;
* the stationary random-feature kernel (``rff``) against the exact RBF
  attention as the number of spectral points R grows;
* IKTransformerConv with ``kernel='rbf', p=2`` against PyG's
  TransformerConv with its state dict, for every combination of ``beta``,
  ``root_weight``, ``concat``, ``edge_dim`` and bipartite inputs, on random
  graphs with isolated nodes and repeated edges (outputs and attention
  weights, float32).

Run from the repository root::

    IKGAT_DATA=../shared/data python -m benchmarks.exactness
"""
import argparse
import itertools
import os.path as osp
import platform
import time

import torch
import torch_geometric.transforms as T
from torch_geometric.nn import GATConv, TransformerConv

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import RESULTS_DIR, write_text
from ikgat import IKGATConv, IKTransformerConv
from ikgat.data import load_planetoid
from ikgat.kernels import KERNELS
from ikgat.reference import edge_wise_attention


def gat_difference(data, dtype):
    torch.manual_seed(0)
    gat = GATConv(data.num_features, 8, heads=8).to(dtype)
    conv = IKGATConv(data.num_features, 8, heads=8, kernel='rbf',
                     p=2.0).to(dtype)
    conv.load_state_dict(gat.state_dict(), strict=False)
    x = data.x.to(dtype)
    out_gat, (_, alpha_gat) = gat(x, data.edge_index,
                                  return_attention_weights=True)
    out, (_, alpha) = conv(x, data.edge_index, return_attention_weights=True)
    return ((alpha - alpha_gat).abs().max().item(),
            (out - out_gat).abs().max().item())


@torch.no_grad()
def factorisation_difference(data, kernel, p):
    torch.manual_seed(0)
    conv = IKGATConv(data.num_features, 8, heads=8, kernel=kernel, p=p,
                     add_self_loops=False).eval()
    out, (_, alpha) = conv(data.x, data.edge_index,
                           return_attention_weights=True)
    ref_out, ref_alpha = edge_wise_attention(conv, data.x, data.edge_index)
    return ((alpha - ref_alpha).abs().max().item(),
            (out - ref_out).abs().max().item())


@torch.no_grad()
def rff_errors(data, sizes, seeds):
    torch.manual_seed(0)
    exact = IKGATConv(data.num_features, 8, heads=8, kernel='rbf').eval()
    _, (_, alpha_rbf) = exact(data.x, data.edge_index,
                              return_attention_weights=True)
    rows = []
    for num_features in sizes:
        conv = IKGATConv(data.num_features, 8, heads=8, kernel='rff',
                         num_spectral_points=num_features).eval()
        conv.load_state_dict(exact.state_dict(), strict=False)
        maxima, means = [], []
        for seed in range(seeds):
            conv.redraw_spectral_points(torch.Generator().manual_seed(seed))
            _, (_, alpha) = conv(data.x, data.edge_index,
                                 return_attention_weights=True)
            error = (alpha - alpha_rbf).abs()
            maxima.append(error.max().item())
            means.append(error.mean().item())
        rows.append((num_features, sum(means) / seeds, sum(maxima) / seeds))
    return rows


def random_graph(seed, num_src=7, num_dst=7, edge_dim=None):
    r"""A random graph whose last source and last target have no edge, with
    three repeated edges; source features of 5 channels, target features
    of 6 (bipartite layers), edge features of :obj:`edge_dim`."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src - 1, (12, ), generator=generator)
    dst = torch.randint(0, num_dst - 1, (12, ), generator=generator)
    edge_index = torch.cat([torch.stack([src, dst]),
                            torch.stack([src[:3], dst[:3]])], dim=1)
    x_src = torch.randn(num_src, 5, generator=generator)
    x_dst = torch.randn(num_dst, 6, generator=generator)
    edge_attr = None if edge_dim is None else torch.randn(
        edge_index.size(1), edge_dim, generator=generator)
    return x_src, x_dst, edge_index, edge_attr


@torch.no_grad()
def transformer_difference(beta, root_weight, concat, edge_dim, bipartite,
                           seeds):
    r"""The largest difference of outputs and attention weights between
    TransformerConv and IKTransformerConv (``rbf``, p = 2, its state dict)
    over :obj:`seeds` random graphs, 2 heads x 4 channels."""
    options = dict(heads=2, beta=beta, root_weight=root_weight,
                   concat=concat, edge_dim=edge_dim)
    in_channels = (5, 6) if bipartite else 5
    torch.manual_seed(0)
    reference = TransformerConv(in_channels, 4, **options)
    conv = IKTransformerConv(in_channels, 4, kernel='rbf', p=2.0, **options)
    conv.load_state_dict(reference.state_dict(), strict=False)
    worst = 0.0
    for seed in range(seeds):
        x_src, x_dst, edge_index, edge_attr = random_graph(
            seed, edge_dim=edge_dim)
        x = (x_src, x_dst) if bipartite else x_src
        out, (_, alpha) = reference(x, edge_index, edge_attr,
                                    return_attention_weights=True)
        ours, (_, our_alpha) = conv(x, edge_index, edge_attr,
                                    return_attention_weights=True)
        plain = conv(x, edge_index, edge_attr)  # the fused-capable path
        worst = max(worst, (ours - out).abs().max().item(),
                    (our_alpha - alpha).abs().max().item(),
                    (plain - out).abs().max().item())
    return worst


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default=osp.join(RESULTS_DIR,
                                                  'exactness.md'))
    parser.add_argument('--seeds', type=int, default=5)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    data = load_planetoid('Cora', transform=T.NormalizeFeatures())[0]
    lines = [
        '# Exactness report', '',
        'Command: `IKGAT_DATA=../shared/data python -m benchmarks.exactness`',
        f'Machine: {platform.machine()}, torch {torch.__version__}; ikgat '
        f'commit {git_commit()}', '',
        '## `kernel="rbf", p=2` against GATConv (tied weights, Cora, 8 heads × 8)',
        '', '| dtype | max abs diff of attention | max abs diff of output |',
        '|---|---|---|'
    ]
    for dtype in (torch.float32, torch.float64):
        alpha, out = gat_difference(data, dtype)
        lines.append(f'| {str(dtype)[6:]} | {alpha:.2e} | {out:.2e} |')
    lines += [
        '', '## Node-wise fast path against the edge-wise evaluation '
        '(Cora, float32)', '', '| kernel | p | max abs diff of attention | '
        'max abs diff of output |', '|---|---|---|---|'
    ]
    for kernel in sorted(KERNELS):
        for p in (1.0, 2.0, 3.0):
            alpha, out = factorisation_difference(data, kernel, p)
            lines.append(f'| {kernel} | {p} | {alpha:.2e} | {out:.2e} |')
    lines += [
        '', f'## `rff` (w ~ N(0, I/2)) against exact RBF attention on Cora '
        f'(mean over {args.seeds} draws)', '',
        '| R | mean abs error of attention | max abs error of attention |',
        '|---|---|---|'
    ]
    for num_features, mean, maximum in rff_errors(
            data, (16, 64, 256, 1024, 4096), args.seeds):
        lines.append(f'| {num_features} | {mean:.2e} | {maximum:.2e} |')
    lines += [
        '', '## IKTransformerConv `kernel="rbf", p=2` against TransformerConv '
        f'(its state dict; {args.seeds} random graphs each, float32)', '',
        'Random graphs of 7 nodes, the last source and target isolated, '
        'three edges repeated; 2 heads x 4 channels. The largest absolute '
        'difference of the outputs (with and without returned weights) and '
        'of the attention weights.', '',
        '| beta | root_weight | concat | edge_dim | bipartite | max abs '
        'diff |', '|---|---|---|---|---|---|'
    ]
    for beta, root_weight, concat, edge_dim, bipartite in itertools.product(
            (False, True), (False, True), (False, True), (None, 3),
            (False, True)):
        worst = transformer_difference(beta, root_weight, concat, edge_dim,
                                       bipartite, args.seeds)
        lines.append(f'| {beta} | {root_weight} | {concat} | {edge_dim} | '
                     f'{bipartite} | {worst:.2e} |')
    lines += ['', f'Took {time.perf_counter() - start:.0f} s.']
    text = '\n'.join(lines) + '\n'
    write_text(args.out, text)
    print(text)


if __name__ == '__main__':
    main()
