r"""Full-batch node classification on OGB's ``ogbn-arxiv`` and
``ogbn-products`` through ``ogb``'s own
:class:`~ogb.nodeproppred.PygNodePropPredDataset` and
:class:`~ogb.nodeproppred.Evaluator` (``pip install ikgat[ogb]``), run as
``python -m benchmarks.ogbn`` (this module is not named ``ogb``: that would
shadow the ``ogb`` package).

The model is the two-layer GAT-style network of the Planetoid harness with
any layer of its models table.  ``ogbn-arxiv`` is a directed citation graph
and is made undirected first, as in OGB's own GNN baselines.  Early stopping
on the ``valid`` split; the parameters of the best validation epoch are
restored and the :class:`Evaluator` reports train / valid / test accuracy.

The defaults of :data:`OGB_PROTOCOLS` are a GAT-style starting point, not
tuned settings.  ``ogbn-products`` (2.4M nodes, 62M edges) trains in
neighbour-sampled mini-batches by default (full batch needs a large GPU);
``--batch-size`` and ``--fan-out`` set the regime of any dataset.
"""
import argparse
import os.path as osp
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from benchmarks.harness.data import BenchData
from benchmarks.harness.progress import Progress
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.registry import (
    FULL_BATCH,
    MODELS,
    add_regime_arguments,
    build_model,
    check_models,
    model_hyperparameters,
    regime_overrides,
    training_regime,
)
from benchmarks.harness.results import (
    COLUMNS,
    RESULTS_DIR,
    ResultsWriter,
    format_float,
    format_int,
    read_results,
    run_key,
)
from benchmarks.harness.runtime import (
    parse_seeds,
    resolve_device,
    seed_everything,
    set_threads,
)
from benchmarks.planetoid import hyper_label
from ikgat.training import train_node_classifier

OGB_PROTOCOLS: Dict[str, Dict[str, Any]] = {
    'ogbn-arxiv': dict(lr=0.005, weight_decay=0.0, hidden=32, heads=4,
                       out_heads=1, dropout=0.5, epochs=500, patience=100,
                       **FULL_BATCH),
    # Full batch needs a large GPU; mini-batches of PyG's products example:
    'ogbn-products': dict(lr=0.005, weight_decay=0.0, hidden=32, heads=4,
                          out_heads=1, dropout=0.5, epochs=300,
                          patience=50,
                          **dict(FULL_BATCH, batch_size=1024,
                                 fan_out=(15, 10))),
}
#: Datasets stored as directed graphs that the benchmark makes undirected.
MAKE_UNDIRECTED = ('ogbn-arxiv', )

#: The Planetoid columns with the train accuracy of the best epoch.
OGB_COLUMNS = COLUMNS[:COLUMNS.index('val_acc')] + ['train_acc'] + \
    COLUMNS[COLUMNS.index('val_acc'):]
DEFAULT_OGB_RESULTS = osp.join(RESULTS_DIR, 'ogb.csv')


def default_ogb_root() -> str:
    r"""``$IKGAT_CACHE/ogb`` (or the user cache): OGB writes ``processed/``
    beside the downloaded files, so the root must be writable."""
    from ikgat.data import cache_dir
    return osp.join(cache_dir(), 'ogb')


def _load_dataset(name: str, root: str, meta_dict: Optional[dict]):
    from ogb.nodeproppred import PygNodePropPredDataset
    from torch_geometric.data import Data
    from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
    from torch_geometric.data.storage import GlobalStorage

    # ogb 1.3.6 reads its processed file with a bare torch.load, which is
    # weights_only since torch 2.6; allow the PyG classes that file holds.
    with torch.serialization.safe_globals(
            [Data, DataEdgeAttr, DataTensorAttr, GlobalStorage]):
        return PygNodePropPredDataset(name, root=root, meta_dict=meta_dict)


def load_ogbn(name: str, root: Optional[str] = None,
              meta_dict: Optional[dict] = None) -> BenchData:
    r"""Load an ``ogbn`` node-classification dataset with its official split
    as a graph with ``train_mask``, ``val_mask`` and ``test_mask``
    (``y`` flattened to one label per node).

    Args:
        name (str): ``'ogbn-arxiv'`` or ``'ogbn-products'``.
        root (str, optional): Where OGB downloads and processes the data.
            (default: :func:`default_ogb_root`)
        meta_dict (dict, optional): OGB's ``meta_dict`` to read a dataset
            from ``meta_dict['dir_path']`` instead of downloading (used by
            the tests with a tiny dataset in OGB's raw format).
    """
    try:
        import ogb  # noqa: F401
    except ImportError as error:
        raise ImportError("The OGB benchmark needs the 'ogb' package: "
                          "pip install 'ikgat[ogb]'") from error
    from torch_geometric.utils import to_undirected

    dataset = _load_dataset(name, root or default_ogb_root(), meta_dict)
    data = dataset[0]
    split = dataset.get_idx_split()
    if name in MAKE_UNDIRECTED:
        data.edge_index = to_undirected(data.edge_index,
                                        num_nodes=data.num_nodes)
    data.y = data.y.view(-1)
    for key, part in (('train_mask', 'train'), ('val_mask', 'valid'),
                      ('test_mask', 'test')):
        mask = torch.zeros(data.num_nodes, dtype=torch.bool)
        mask[split[part]] = True
        data[key] = mask
    data.x = data.x.float()
    return BenchData(name, data, data.num_features, dataset.num_classes)


@torch.no_grad()
def evaluate_ogb(name: str, model: torch.nn.Module, data,
                 inference: Optional[Callable[[], torch.Tensor]] = None
                 ) -> Dict[str, float]:
    r"""Accuracy of :obj:`model` on the three splits by OGB's
    :class:`~ogb.nodeproppred.Evaluator` of :obj:`name`, from
    :obj:`inference` (e.g. layer-wise) or one forward pass."""
    from ogb.nodeproppred import Evaluator
    evaluator = Evaluator(name)
    model.eval()
    with torch.no_grad():
        logits = (inference() if inference is not None else
                  model(data.x, data.edge_index))
    y_pred = logits.argmax(dim=-1, keepdim=True)
    y_true = data.y.view(-1, 1)
    return {part: evaluator.eval({'y_true': y_true[mask],
                                  'y_pred': y_pred[mask]})['acc']
            for part, mask in (('train', data.train_mask),
                               ('valid', data.val_mask),
                               ('test', data.test_mask))}


def run_ogb(name: str, models: Sequence[str], seeds: Sequence[int],
            results: str = DEFAULT_OGB_RESULTS, tag: str = 'final',
            p: Optional[float] = None, R: Optional[int] = None,
            beta: Optional[float] = None,
            protocol_overrides: Optional[Dict[str, Any]] = None,
            root: Optional[str] = None, meta_dict: Optional[dict] = None,
            resume: bool = False, device: str = 'auto', progress: bool = True,
            load_dataset: Optional[Callable[[], BenchData]] = None
            ) -> List[Dict[str, Any]]:
    r"""Train each model from each seed on :obj:`name`, full batch, and
    append one row per run (the Planetoid columns plus ``train_acc``) to
    :obj:`results`."""
    check_models(models)
    protocol = dict(OGB_PROTOCOLS.get(name, OGB_PROTOCOLS['ogbn-arxiv']))
    protocol.update({k: v for k, v in (protocol_overrides or {}).items()
                     if v is not None})
    writer = ResultsWriter(results, OGB_COLUMNS)
    done = {run_key(r) for r in read_results(results)} if resume else set()
    plans: List[Tuple[str, int, Dict[str, Optional[float]]]] = []
    for model in models:
        hyper = model_hyperparameters(model, p, R, beta)
        for seed in seeds:
            key = run_key(dict(dataset=name, model=model, seed=seed, tag=tag,
                               **hyper))
            if key not in done:
                done.add(key)
                plans.append((model, seed, hyper))
    if not plans:
        return []
    torch_device = resolve_device(device)
    bench = (load_dataset() if load_dataset is not None else
             load_ogbn(name, root, meta_dict))
    data = bench.data.to(torch_device)
    rows: List[Dict[str, Any]] = []
    bar = Progress(len(plans), enabled=progress)
    try:
        for model, seed, hyper in plans:
            label = f'{name} {model} seed={seed}'
            bar.start_run(label, protocol['epochs'])
            seed_everything(seed)
            net = build_model(model, bench.num_features, bench.num_classes,
                              protocol, p=hyper['p'],
                              R=hyper['R']).to(torch_device)
            regime = training_regime(protocol, net, data, seed)
            result = train_node_classifier(
                net, data, lr=protocol['lr'],
                weight_decay=protocol['weight_decay'],
                epochs=protocol['epochs'], patience=protocol['patience'],
                beta=float(hyper['beta'] or 0.0), keep_best_state=True,
                on_epoch=bar.epoch,
                **regime)
            net.load_state_dict(result.state_dict)
            accuracy = evaluate_ogb(name, net, data, regime.get('inference'))
            row = dict(
                dataset=name, model=model, tag=tag, seed=seed,
                p=format_float(hyper['p']), R=format_int(hyper['R']),
                beta=format_float(hyper['beta']),
                lr=repr(float(protocol['lr'])),
                weight_decay=repr(float(protocol['weight_decay'])),
                train_acc=f'{accuracy["train"]:.6f}',
                val_acc=f'{accuracy["valid"]:.6f}',
                test_acc=f'{accuracy["test"]:.6f}', epochs=result.epochs,
                best_epoch=result.best_epoch,
                seconds=f'{result.seconds:.3f}',
                num_parameters=sum(p.numel() for p in net.parameters()),
                device=str(torch_device), git_commit=git_commit())
            writer.write(row)
            rows.append(row)
            bar.end_run(f'{label} {hyper_label(hyper)}: valid '
                        f'{accuracy["valid"]:.4f}, test '
                        f'{accuracy["test"]:.4f}, {result.epochs} epochs, '
                        f'{row["seconds"]} s')
    finally:
        bar.close()
    return rows


def add_ogb_arguments(parser: argparse.ArgumentParser) -> None:
    r"""The flags of ``python -m benchmarks.ogbn``."""
    parser.add_argument('--dataset', default='ogbn-arxiv',
                        choices=sorted(OGB_PROTOCOLS))
    parser.add_argument('--models', nargs='+', default=['gat'],
                        choices=list(MODELS), metavar='MODEL',
                        help=f'any of {", ".join(MODELS)} (default: gat)')
    parser.add_argument('--seeds', default='0-4',
                        help='a count, a range (0-4) or a list '
                        '(default: 0-4)')
    parser.add_argument('--root', default=None,
                        help='where OGB downloads and processes the data '
                        '(default: $IKGAT_CACHE/ogb or ~/.cache/ikgat/ogb)')
    parser.add_argument('--p', type=float, default=None)
    parser.add_argument('--num-features', type=int, default=None)
    parser.add_argument('--beta', type=float, default=None)
    parser.add_argument('--tag', default='final')
    parser.add_argument('--results', default=DEFAULT_OGB_RESULTS)
    parser.add_argument('--resume', action='store_true')
    parser.add_argument('--device', default='auto')
    parser.add_argument('--threads', type=int, default=None,
                        help='CPU threads of torch (default: torch\'s)')
    parser.add_argument('--no-progress', action='store_true')
    proto = parser.add_argument_group('protocol (default: OGB_PROTOCOLS)')
    for flag, kind in (('lr', float), ('weight-decay', float),
                       ('hidden', int), ('heads', int), ('out-heads', int),
                       ('dropout', float), ('epochs', int),
                       ('patience', int)):
        proto.add_argument(f'--{flag}', type=kind, default=None)
    add_regime_arguments(proto)
    parser.set_defaults(run=_run_ogb_command)


def _run_ogb_command(args: argparse.Namespace) -> None:
    set_threads(args.threads)
    overrides = dict(lr=args.lr, weight_decay=args.weight_decay,
                     hidden=args.hidden, heads=args.heads,
                     out_heads=args.out_heads, dropout=args.dropout,
                     epochs=args.epochs, patience=args.patience,
                     **regime_overrides(args))
    rows = run_ogb(args.dataset, args.models, parse_seeds(args.seeds),
                   results=args.results, tag=args.tag, p=args.p,
                   R=args.num_features, beta=args.beta,
                   protocol_overrides=overrides, root=args.root,
                   resume=args.resume, device=args.device,
                   progress=not args.no_progress)
    print(f'{len(rows)} runs appended to {args.results}', file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> None:
    r"""``python -m benchmarks.ogbn ...``."""
    parser = argparse.ArgumentParser(prog='python -m benchmarks.ogbn',
                                     description=__doc__.split('\n\n')[0])
    add_ogb_arguments(parser)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == '__main__':
    main()
