r"""The Planetoid study (Cora, CiteSeer, PubMed; public split), in the
style of PyG's ``benchmark/citation``: the GAT paper's protocol over seeds,
one CSV row per run, a validation-only search over :math:`p`, :math:`R` and
:math:`\beta`, and the Markdown summary (:mod:`benchmarks.summary`).

    # final runs, hyperparameters from the validation search, resumable:
    python -m benchmarks.planetoid --datasets Cora CiteSeer --models gat \
        ikan-direct mikan --seeds 0-19 --from-search \
        benchmarks/results/search.csv --resume
    # the validation-only grid over p, R, beta:
    python -m benchmarks.planetoid search --datasets Cora --models ikan-direct
    # benchmarks/results/planetoid.md from benchmarks/results/planetoid.csv:
    python -m benchmarks.planetoid summary

Every flag: ``python -m benchmarks.planetoid planetoid --help``.

* :func:`run_benchmark` runs (dataset, model, seed) combinations and appends
  one CSV row per run, skipping finished rows with ``resume=True``.  The
  dataset loader is injectable (tests use a tiny graph).
* :func:`run_search` runs a small grid and
  :func:`benchmarks.summary.select_hyperparameters` picks, per dataset and
  model, the configuration with the best *mean validation accuracy*.  Search
  runs do not even record a test accuracy: the test split selects nothing.

Model selection inside a run follows the GAT protocol: early stopping on the
validation split, test accuracy read at the best validation epoch
(:func:`ikgat.training.train_node_classifier`).
"""
import argparse
import os.path as osp
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import product
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from benchmarks.harness.data import BenchData, load_planetoid_data
from benchmarks.harness.progress import Progress
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.registry import (
    DEFAULT_HYPERPARAMETERS,
    MODELS,
    SEARCH_GRID,
    add_regime_arguments,
    build_model,
    canonical_dataset,
    check_models,
    conv_factory,
    model_hyperparameters,
    protocol_for,
    regime_overrides,
    training_regime,
)
from benchmarks.harness.results import (
    MalformedResults,
    ResultsWriter,
    format_float,
    format_int,
    read_results,
    run_key,
    write_text,
)
from benchmarks.harness.runtime import (
    parse_seeds,
    resolve_device,
    seed_everything,
    set_threads,
)
from benchmarks.summary import (
    DEFAULT_RESULTS,
    DEFAULT_SEARCH_RESULTS,
    DEFAULT_SEARCH_SUMMARY,
    DEFAULT_SUMMARY,
    render_search_summary,
    render_summary,
    select_hyperparameters,
)
from ikgat.kernels.random_features import NODE_PATHS
from ikgat.training import train_node_classifier
from ikgat.training.checkpoints import save_checkpoint


def run_one(bench: BenchData, model: str, seed: int, protocol: Dict[str, Any],
            hyper: Dict[str, Optional[float]], device: torch.device,
            tag: str = '', record_test: bool = True,
            on_epoch: Optional[Callable[[int, float, float], None]] = None,
            checkpoint_dir: Optional[str] = None,
            node_path: str = 'eager') -> Dict[str, Any]:
    r"""Train one model from :obj:`seed` and return its results row; with
    :obj:`checkpoint_dir`, also save the best-validation weights there
    (readable by ``ikgat plot``)."""
    seed_everything(seed)
    net = build_model(model, bench.num_features, bench.num_classes, protocol,
                      p=hyper['p'], R=hyper['R'],
                      node_path=node_path).to(device)
    data = bench.data
    result = train_node_classifier(
        net, data, lr=protocol['lr'], weight_decay=protocol['weight_decay'],
        epochs=protocol['epochs'], patience=protocol['patience'],
        beta=float(hyper['beta'] or 0.0), on_epoch=on_epoch,
        keep_best_state=checkpoint_dir is not None,
        **training_regime(protocol, net, data, seed))
    row = dict(
        dataset=bench.name, model=model, tag=tag, seed=int(seed),
        p=format_float(hyper['p']), R=format_int(hyper['R']),
        beta=format_float(hyper['beta']), lr=repr(float(protocol['lr'])),
        weight_decay=repr(float(protocol['weight_decay'])),
        val_acc=f'{result.val_acc:.6f}',
        test_acc=f'{result.test_acc:.6f}' if record_test else '',
        epochs=result.epochs, best_epoch=result.best_epoch,
        seconds=f'{result.seconds:.3f}',
        num_parameters=sum(p.numel() for p in net.parameters()),
        device=str(device), git_commit=git_commit())
    if checkpoint_dir is not None:
        name = (f"{bench.name}_{model}_p{row['p'] or '-'}_R{row['R'] or '-'}"
                f"_seed{seed}_{tag or 'untagged'}.pt")
        save_checkpoint(osp.join(checkpoint_dir, name), net, bench.name,
                        conv_factory(model, hyper['p'], hyper['R'],
                                     node_path)[1],
                        info=row, state_dict=result.state_dict)
    return row


@dataclass
class RunPlan:
    r"""One planned run: dataset, model, seed, hyperparameters."""
    dataset: str
    model: str
    seed: int
    hyper: Dict[str, Optional[float]] = field(default_factory=dict)


def run_plans(plans: Sequence[RunPlan], results: str, tag: str,
              protocol_overrides: Optional[Dict[str, Any]] = None,
              resume: bool = True, device: str = 'auto',
              progress: bool = True, record_test: bool = True,
              load_dataset: Optional[Callable[[str], BenchData]] = None,
              root: Optional[str] = None,
              checkpoint_dir: Optional[str] = None,
              node_path: str = 'eager') -> List[Dict[str, Any]]:
    r"""Run :obj:`plans` (grouped by dataset, each dataset loaded once),
    appending each finished run to :obj:`results`.  With :obj:`resume`,
    plans whose :data:`KEY_COLUMNS` are already in :obj:`results` are
    skipped.  Returns the rows written by this call."""
    writer = ResultsWriter(results)
    done = {run_key(row) for row in read_results(results)} if resume else set()
    todo = []
    for plan in plans:
        key = run_key(dict(dataset=canonical_dataset(plan.dataset),
                           model=plan.model, seed=plan.seed, tag=tag,
                           **{k: plan.hyper.get(k) for k in ('p', 'R',
                                                              'beta')}))
        if key not in done:
            todo.append(plan)
            done.add(key)  # the same plan twice in one call runs once
    skipped = len(plans) - len(todo)
    if progress and skipped:
        print(f'resume: {skipped} of {len(plans)} runs are already in '
              f'{results}', file=sys.stderr)
    torch_device = resolve_device(device)
    loader = load_dataset or (lambda name: load_planetoid_data(name, root))
    rows: List[Dict[str, Any]] = []
    bar = Progress(len(todo), enabled=progress)
    try:
        by_dataset: Dict[str, List[RunPlan]] = OrderedDict()
        for plan in todo:
            by_dataset.setdefault(plan.dataset, []).append(plan)
        for dataset, dataset_plans in by_dataset.items():
            loaded = loader(dataset)
            bench = loaded._replace(data=loaded.data.to(torch_device))
            protocol = protocol_for(bench.name, **(protocol_overrides or {}))
            for plan in dataset_plans:
                label = f'{bench.name} {plan.model} seed={plan.seed}'
                bar.start_run(label, protocol['epochs'])
                row = run_one(bench, plan.model, plan.seed, protocol,
                              plan.hyper, torch_device, tag=tag,
                              record_test=record_test, on_epoch=bar.epoch,
                              checkpoint_dir=checkpoint_dir,
                              node_path=node_path)
                writer.write(row)
                rows.append(row)
                test = (f', test {float(row["test_acc"]):.4f}'
                        if row['test_acc'] else '')
                bar.end_run(f'{label} {hyper_label(plan.hyper)}: val '
                            f'{float(row["val_acc"]):.4f}{test}, '
                            f'{row["epochs"]} epochs, {row["seconds"]} s')
    finally:
        bar.close()
    return rows


def hyper_label(hyper: Dict[str, Optional[float]]) -> str:
    return ' '.join(f'{k}={v:g}' for k, v in hyper.items()
                    if v is not None) or '-'


def run_benchmark(datasets: Sequence[str], models: Sequence[str],
                  seeds: Sequence[int], results: str = DEFAULT_RESULTS,
                  tag: str = 'final', p: Optional[float] = None,
                  R: Optional[int] = None, beta: Optional[float] = None,
                  selected: Optional[Dict[Tuple[str, str], Dict[str, Any]]] =
                  None, protocol_overrides: Optional[Dict[str, Any]] = None,
                  resume: bool = False, device: str = 'auto',
                  progress: bool = True,
                  load_dataset: Optional[Callable[[str], BenchData]] = None,
                  root: Optional[str] = None,
                  checkpoint_dir: Optional[str] = None,
                  node_path: str = 'eager') -> List[Dict[str, Any]]:
    r"""Run every (dataset, model, seed) and append the rows to
    :obj:`results`.

    Hyperparameters: the explicit :obj:`p`, :obj:`R`, :obj:`beta` win, then
    the configuration :obj:`selected` by a search for that (dataset, model)
    (see :func:`select_hyperparameters`), then
    :data:`DEFAULT_HYPERPARAMETERS`.
    """
    check_models(models)
    plans = []
    for dataset in datasets:
        for model in models:
            chosen = (selected or {}).get((canonical_dataset(dataset), model),
                                          {})
            hyper = model_hyperparameters(
                model, p if p is not None else chosen.get('p'),
                R if R is not None else chosen.get('R'),
                beta if beta is not None else chosen.get('beta'))
            plans.extend(RunPlan(dataset, model, seed, hyper)
                         for seed in seeds)
    return run_plans(plans, results, tag, protocol_overrides, resume, device,
                     progress, True, load_dataset, root, checkpoint_dir,
                     node_path)


def search_configurations(model: str, grid: Optional[Dict[str, Sequence]] =
                          None) -> List[Dict[str, Optional[float]]]:
    r"""The grid points of :obj:`model`: only the axes that apply to it
    (``gat``, ``gat-rbf`` and ``rbf-only`` have a single point)."""
    grid = dict(SEARCH_GRID, **(grid or {}))
    spec = MODELS[model]
    axes = [list(grid['p']) if spec.uses_p and spec.fixed_p is None
            else [None],
            list(grid['R']) if spec.uses_num_features else [None],
            list(grid['beta']) if spec.variational else [None]]
    return [model_hyperparameters(model, p, R, beta)
            for p, R, beta in product(*axes)]


#: The models with more than one grid point (the default of ``search``).
SEARCHABLE_MODELS = [name for name, spec in MODELS.items()
                     if (spec.uses_p and spec.fixed_p is None)
                     or spec.uses_num_features or spec.variational]


def run_search(datasets: Sequence[str], models: Sequence[str],
               seeds: Sequence[int], results: str = DEFAULT_SEARCH_RESULTS,
               summary: Optional[str] = DEFAULT_SEARCH_SUMMARY,
               grid: Optional[Dict[str, Sequence]] = None,
               tag: str = 'search', **kwargs: Any) -> List[Dict[str, Any]]:
    r"""Run the grid of every model with a few seeds, append the rows to
    :obj:`results` (test accuracy left blank) and write the selection to
    :obj:`summary`.  Always resumes: finished grid points are skipped."""
    check_models(models)
    plans = [RunPlan(dataset, model, seed, hyper) for dataset in datasets
             for model in models
             for hyper in search_configurations(model, grid)
             for seed in seeds]
    kwargs.setdefault('resume', True)
    rows = run_plans(plans, results, tag, record_test=False, **{
        k: v for k, v in kwargs.items()
        if k in ('protocol_overrides', 'resume', 'device', 'progress',
                 'load_dataset', 'root', 'node_path')})
    if summary:
        write_text(summary, render_search_summary(read_results(results),
                                                  results=results, tag=tag))
    return rows


def _add_common_run_arguments(parser: argparse.ArgumentParser,
                              seeds_default: str,
                              models_default: Sequence[str]) -> None:
    parser.add_argument('--datasets', nargs='+',
                        default=['Cora', 'CiteSeer', 'PubMed'])
    default = ('all' if list(models_default) == list(MODELS) else
               ' '.join(models_default))
    parser.add_argument('--models', nargs='+', default=list(models_default),
                        choices=list(MODELS), metavar='MODEL',
                        help=f'any of {", ".join(MODELS)} (default: '
                        f'{default})')
    parser.add_argument('--seeds', default=seeds_default,
                        help='a count (20 = 0-19), a range (0-19) or a list '
                        f'(0,3,10-12) (default: {seeds_default})')
    parser.add_argument('--root', default=None,
                        help='folder holding Planetoid/<Name>/raw/ '
                        '(default: $IKGAT_DATA)')
    parser.add_argument('--device', default='auto',
                        help="'cpu', 'cuda' or 'auto' (default: auto)")
    parser.add_argument('--threads', type=int, default=None,
                        help='CPU threads of torch (default: torch\'s; 1 is '
                        'fastest on a shared, busy CPU)')
    parser.add_argument('--no-progress', action='store_true')
    parser.add_argument('--node-path', default='eager', choices=NODE_PATHS,
                        help='how random-feature kernels evaluate their '
                        'node-wise term: speed and memory only, the same '
                        'model (compile: torch.compile, fastest on CPU; '
                        'default: eager)')
    proto = parser.add_argument_group(
        'protocol (default: the GAT paper\'s, per dataset)')
    proto.add_argument('--lr', type=float, default=None)
    proto.add_argument('--weight-decay', type=float, default=None)
    proto.add_argument('--hidden', type=int, default=None)
    proto.add_argument('--heads', type=int, default=None)
    proto.add_argument('--out-heads', type=int, default=None)
    proto.add_argument('--dropout', type=float, default=None)
    proto.add_argument('--epochs', type=int, default=None)
    proto.add_argument('--patience', type=int, default=None)
    add_regime_arguments(proto)


def _protocol_overrides(args: argparse.Namespace) -> Dict[str, Any]:
    return dict(lr=args.lr, weight_decay=args.weight_decay,
                hidden=args.hidden, heads=args.heads,
                out_heads=args.out_heads, dropout=args.dropout,
                epochs=args.epochs, patience=args.patience,
                **regime_overrides(args))


def add_commands(parser: argparse.ArgumentParser) -> None:
    r"""Add the subcommands ``planetoid``, ``search`` and ``summary``."""
    commands = parser.add_subparsers(required=True, dest='bench_command')

    run = commands.add_parser(
        'planetoid', help='train models over seeds on the public Planetoid '
        'splits and append one CSV row per run')
    _add_common_run_arguments(run, '0-19', list(MODELS))
    run.add_argument('--p', type=float, default=None,
                     help='L^p magnitude exponent (default: from '
                     '--from-search, else 2)')
    run.add_argument('--num-features', type=int, default=None,
                     help='spectral points R (default: from --from-search, '
                     'else 64)')
    run.add_argument('--beta', type=float, default=None,
                     help='KL weight of variational models (default: from '
                     '--from-search, else 0.1)')
    run.add_argument('--from-search', default=None, metavar='CSV',
                     help='use the p, R, beta chosen on validation accuracy '
                     f'in this search CSV (e.g. {DEFAULT_SEARCH_RESULTS})')
    run.add_argument('--tag', default='final',
                     help="label of these runs, e.g. 'final' or 'smoke' "
                     '(default: final)')
    run.add_argument('--results', default=DEFAULT_RESULTS)
    run.add_argument('--save-checkpoints', default=None, metavar='DIR',
                     help='save each run\'s best-validation model in DIR, '
                     'for `ikgat plot`')
    run.add_argument('--resume', action='store_true',
                     help='skip runs already in --results')
    run.set_defaults(run=_run_planetoid)

    search = commands.add_parser(
        'search', help='grid over p, R, beta with a few seeds; choose by '
        'mean validation accuracy')
    _add_common_run_arguments(search, '100-102', SEARCHABLE_MODELS)
    search.add_argument('--grid-p', type=float, nargs='+',
                        default=list(SEARCH_GRID['p']))
    search.add_argument('--grid-num-features', type=int, nargs='+',
                        default=list(SEARCH_GRID['R']))
    search.add_argument('--grid-beta', type=float, nargs='+',
                        default=list(SEARCH_GRID['beta']))
    search.add_argument('--results', default=DEFAULT_SEARCH_RESULTS)
    search.add_argument('--summary', default=DEFAULT_SEARCH_SUMMARY)
    search.set_defaults(run=_run_search)

    summary = commands.add_parser(
        'summary', help='render the Markdown table of a results CSV')
    summary.add_argument('--results', default=DEFAULT_RESULTS)
    summary.add_argument('--tag', default='final')
    summary.add_argument('--output', default=DEFAULT_SUMMARY)
    summary.add_argument('--command', default=None,
                         help='the command of the runs, written at the top '
                         '(default: none; the reproduce section lists one '
                         'per cell)')
    summary.add_argument('--search-results', default=DEFAULT_SEARCH_RESULTS,
                         help='also rewrite search.md when this CSV exists')
    summary.set_defaults(run=_run_summary)


def _run_planetoid(args: argparse.Namespace) -> None:
    set_threads(args.threads)
    selected = None
    if args.from_search:
        if not osp.isfile(args.from_search):
            raise SystemExit(f'--from-search: {args.from_search} does not '
                             f'exist; run `python -m benchmarks.planetoid '
                             f'search` first')
        selected = select_hyperparameters(read_results(args.from_search))
        missing = [(canonical_dataset(d), m) for d in args.datasets
                   for m in args.models
                   if (canonical_dataset(d), m) not in selected
                   and len(search_configurations(m)) > 1]
        if missing:
            print(f'warning: no search results for {missing}; those use the '
                  f'defaults {DEFAULT_HYPERPARAMETERS} unless flags say '
                  f'otherwise', file=sys.stderr)
    run_benchmark(args.datasets, args.models, parse_seeds(args.seeds),
                  results=args.results, tag=args.tag, p=args.p,
                  R=args.num_features, beta=args.beta, selected=selected,
                  protocol_overrides=_protocol_overrides(args),
                  resume=args.resume, device=args.device,
                  progress=not args.no_progress, root=args.root,
                  checkpoint_dir=args.save_checkpoints,
                  node_path=args.node_path)


def _run_search(args: argparse.Namespace) -> None:
    set_threads(args.threads)
    run_search(args.datasets, args.models, parse_seeds(args.seeds),
               results=args.results, summary=args.summary,
               grid=dict(p=args.grid_p, R=args.grid_num_features,
                         beta=args.grid_beta),
               protocol_overrides=_protocol_overrides(args),
               device=args.device, progress=not args.no_progress,
               root=args.root, node_path=args.node_path)
    print(f'wrote {args.summary}')


def _run_summary(args: argparse.Namespace) -> None:
    if not osp.isfile(args.results):
        raise SystemExit(f'{args.results} does not exist: run '
                         f'`python -m benchmarks.planetoid` first')
    text = render_summary(read_results(args.results), tag=args.tag,
                          results=args.results, output=args.output,
                          command=args.command)
    write_text(args.output, text)
    print(f'wrote {args.output}')
    if args.search_results and osp.isfile(args.search_results):
        summary = osp.join(osp.dirname(args.search_results), 'search.md')
        write_text(summary, render_search_summary(
            read_results(args.search_results), results=args.search_results))
        print(f'wrote {summary}')


def main(argv: Optional[List[str]] = None) -> None:
    r"""``python -m benchmarks.planetoid [planetoid|search|summary] ...``;
    the subcommand defaults to ``planetoid``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ('planetoid', 'search', 'summary', '-h',
                                   '--help'):
        argv = ['planetoid'] + argv
    parser = argparse.ArgumentParser(prog='python -m benchmarks.planetoid',
                                     description=__doc__.split('\n\n')[0])
    add_commands(parser)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except MalformedResults as error:  # one line, as for a usage error
        print(f'error: {error}', file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == '__main__':
    main()
