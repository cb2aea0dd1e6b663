r"""The whole CUDA study in one command, for a GPU machine:
``python -m benchmarks.cuda_study --output-dir DIR``.

    IKGAT_DATA=/path/to/data python -m benchmarks.cuda_study --output-dir gpu-results

Each part runs as its own process (one failing part does not stop the
others), writing under ``DIR``:

0. ``gpu_profile.md``: each GAT-family layer step at arxiv size under
   :mod:`torch.profiler`, kernel by kernel (:mod:`benchmarks.gpu_profile`);
1. ``gpu_speed.md``/``.json``: the layer study (:mod:`benchmarks.gpu_speed`)
   at Cora, PubMed and arxiv size, every layer eager and through
   :func:`torch.compile` (GATConv included), float32 and bf16 autocast, and
   the arxiv-size two-layer training step;
2. ``gpu_speed_dropout.md``: the same with attention dropout 0.6 (the GAT
   recipe) in training;
3. ``gpu_speed_products.md``: the products-size layer and two-layer
   training step (GATConv and IKGATConv ``rbf``/``direct``, eager and
   compiled; MIKANConv);
4. ``gat_recipe.csv``/``.md``: the GAT paper's protocol on Cora and PubMed
   (:mod:`benchmarks.planetoid`, 200 epochs, 3 seeds) for GATConv and the
   ikgat layers: milliseconds per epoch and test accuracy;
5. ``launches.md``: the operations per step on the CUDA path
   (:mod:`benchmarks.launches`, counted on the meta device);
6. ``gpu_speed_transformer.md``: the graph transformers' layer study
   (PyG's TransformerConv against IKTransformerConv ``rbf``, ``direct``,
   ``implicit`` and MIKANTransformerConv, eager, TransformerConv and
   ``direct`` compiled too; :data:`benchmarks.gpu_speed.TRANSFORMER_MODELS`)
   at Cora, PubMed and arxiv size: the measurement of issue #29's GPU
   target;
7. ``gpu_layers.json``: every layer row of 1, 2 and 6 beside the cost
   model's prediction (:mod:`benchmarks.gpu_layers`), to append to
   ``benchmarks/results/gpu_layers.json``;
8. ``summary.md``: what ran, each part's exit status and time, the GPU,
   the versions and the commit.

``--quick`` runs every part at toy sizes (on CPU, a smoke test of the
command itself: no number from it is a GPU number).  ``--parts`` runs some
of them and ``--graphs`` narrows the layer studies, for a GPU lent for
minutes (the whole study takes far longer): e.g. issue #29's target alone,

    python -m benchmarks.cuda_study --output-dir gpu-results \
        --parts transformers --graphs arxiv
"""
import argparse
import csv
import os
import os.path as osp
import platform
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from benchmarks.gpu_speed import TRANSFORMER_MODELS
from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import write_text

#: The layers of the GAT-recipe part (benchmarks.harness.registry names).
RECIPE_MODELS = ['gat', 'gat-rbf', 'ikan-direct', 'ikan', 'mikan']
PRODUCTS_MODELS = ['GATConv', 'GATConv-compiled', 'IKGATConv-rbf',
                   'IKGATConv-rbf-compiled', 'IKGATConv-direct',
                   'IKGATConv-direct-compiled', 'MIKANConv']
PRODUCTS_TRAINING = ['GATConv', 'GATConv-compiled', 'IKGATConv-rbf',
                     'IKGATConv-direct', 'IKGATConv-direct-compiled']


#: The layer studies' result files whose rows go to ``gpu_layers.json``
#: (:mod:`benchmarks.gpu_layers`; the attention dropout read from the name).
STUDY_FILES = ['gpu_speed.json', 'gpu_speed_dropout.json',
               'gpu_speed_transformer.json']

#: The short names of the parts (``--parts``), in the order they run.
PART_KEYS = {'profile': 'GAT-family profile', 'layers': 'layer study',
             'dropout': 'layer study, attention dropout 0.6',
             'products': 'products size', 'recipe': 'GAT recipe',
             'launches': 'launch counts', 'transformers': 'graph transformers'}
#: The graphs of the layer studies (``--graphs``).
LAYER_GRAPHS = ['cora', 'pubmed', 'arxiv']


def parts(out: str, quick: bool, graphs: Optional[List[str]] = None
          ) -> List[Tuple[str, List[str]]]:
    r"""(name, module and arguments) of every part; the layer studies on
    :obj:`graphs` (default :data:`LAYER_GRAPHS`)."""
    def path(name: str) -> str:
        return osp.join(out, name)

    if quick:
        layers = ['--smoke', '--graphs', 'tiny', '--rounds', '1']
        products = layers + ['--models', 'GATConv', 'IKGATConv-direct']
        recipe = ['--datasets', 'Cora', '--models', 'gat', 'ikan-direct',
                  '--seeds', '1', '--epochs', '2', '--patience', '2',
                  '--device', 'cpu']
        launches = ['--sizes', '200', '800', '--layers', 'IKGATConv-direct']
        transformers = layers + ['--models', 'TransformerConv',
                                 'IKTransformerConv-direct']
    else:
        layers = ['--graphs', *(graphs or LAYER_GRAPHS)]
        products = ['--graphs', 'products', '--rounds', '3', '--warmup', '1',
                    '--models', *PRODUCTS_MODELS, '--training-models',
                    *PRODUCTS_TRAINING]
        recipe = ['--datasets', 'Cora', 'PubMed', '--models',
                  *RECIPE_MODELS, '--seeds', '3', '--epochs', '200',
                  '--patience', '200', '--device', 'cuda']
        launches = []
        transformers = layers + ['--models', *TRANSFORMER_MODELS]
    profile = (['--smoke', '--graphs', 'tiny', '--warmup', '1', '--steps',
                '1', '--models', 'GATConv', 'IKGATConv-direct'] if quick
               else ['--graphs', 'arxiv'])
    return [
        # First, before the timings: where each layer step's time goes.
        ('GAT-family profile', ['benchmarks.gpu_profile', *profile,
                                '--output', path('gpu_profile.md')]),
        ('layer study', ['benchmarks.gpu_speed', *layers, '--output',
                         path('gpu_speed.md')]),
        ('layer study, attention dropout 0.6',
         ['benchmarks.gpu_speed', *layers, '--attention-dropout', '0.6',
          '--output', path('gpu_speed_dropout.md')]),
        ('products size', ['benchmarks.gpu_speed', *products, '--output',
                           path('gpu_speed_products.md')]),
        ('GAT recipe', ['benchmarks.planetoid', *recipe, '--results',
                        path('gat_recipe.csv'), '--no-progress']),
        ('launch counts', ['benchmarks.launches', *launches, '--output',
                           path('launches.md')]),
        ('graph transformers', ['benchmarks.gpu_speed', *transformers,
                                '--training-graphs', '--no-fused',
                                '--output',
                                path('gpu_speed_transformer.md')]),
    ]


def recipe_table(results: str) -> str:
    r"""Median milliseconds per epoch and mean test accuracy per dataset
    and model, from the GAT-recipe rows."""
    with open(results, newline='') as handle:
        rows = list(csv.DictReader(handle))
    groups: Dict[Tuple[str, str], List[dict]] = {}
    for row in rows:
        groups.setdefault((row['dataset'], row['model']), []).append(row)
    lines = ['| dataset | model | ms per epoch (median over seeds) | '
             'test accuracy (mean) | seeds |', '|---|---|---:|---:|---:|']
    for (dataset, model), runs in groups.items():
        per_epoch = statistics.median(
            1e3 * float(run['seconds']) / int(run['epochs']) for run in runs)
        accuracy = statistics.mean(float(run['test_acc']) for run in runs)
        lines.append(f'| {dataset} | {model} | {per_epoch:.1f} | '
                     f'{accuracy:.3f} | {len(runs)} |')
    return '\n'.join(lines) + '\n'


def device_name() -> str:
    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return f'no GPU ({platform.processor() or platform.machine()})'


def main(argv: Optional[List[str]] = None) -> List[Tuple[str, int]]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--output-dir', required=True,
                        help='folder for every result file (created)')
    parser.add_argument('--quick', action='store_true',
                        help='toy sizes on CPU: checks the command only')
    parser.add_argument('--parts', nargs='+', choices=list(PART_KEYS),
                        default=list(PART_KEYS), metavar='PART',
                        help=f'the parts to run, of {list(PART_KEYS)} '
                        f'(default: all; a GPU lent for minutes runs a few)')
    parser.add_argument('--graphs', nargs='+', choices=LAYER_GRAPHS,
                        default=LAYER_GRAPHS, metavar='GRAPH',
                        help=f'the graphs of the layer studies, of '
                        f'{LAYER_GRAPHS} (default: all)')
    args = parser.parse_args(argv)
    out = osp.abspath(args.output_dir)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as error:
        parser.error(f'cannot create --output-dir {args.output_dir!r}: '
                     f'{error}')
    import torch
    import torch_geometric
    if not args.quick and not torch.cuda.is_available():
        parser.error('no CUDA device; this study needs a GPU (--quick '
                     'checks the command on CPU)')
    statuses = []
    report = ['# The CUDA study', '',
              f'Device: {device_name()}; torch {torch.__version__}, '
              f'torch_geometric {torch_geometric.__version__}, Python '
              f'{platform.python_version()}; git commit {git_commit()}.',
              f'Command: `python -m benchmarks.cuda_study '
              f'{" ".join(argv if argv is not None else sys.argv[1:])}`.',
              '', '| part | command | exit status | seconds |',
              '|---|---|---:|---:|']
    chosen = {PART_KEYS[key] for key in args.parts}
    for name, command in parts(out, args.quick, args.graphs):
        if name not in chosen:
            continue
        print(f'cuda_study: {name}', file=sys.stderr, flush=True)
        start = time.perf_counter()
        status = subprocess.call([sys.executable, '-m', *command])
        seconds = time.perf_counter() - start
        statuses.append((name, status))
        report.append(f'| {name} | `python -m {" ".join(command)}` | '
                      f'{status} | {seconds:.0f} |')
    studies = [osp.join(out, name) for name in STUDY_FILES
               if osp.exists(osp.join(out, name))]
    if studies:
        from benchmarks import gpu_layers
        rows = osp.join(out, 'gpu_layers.json')
        gpu_layers.main([*studies, '--into', rows])
        report += ['', f'Layer rows beside the cost model\'s prediction: '
                   f'`gpu_layers.json`; append them to the committed '
                   f'`{gpu_layers.LAYERS_JSON}` with `python -m '
                   f'benchmarks.gpu_layers '
                   f'{" ".join(osp.basename(path) for path in studies)}` '
                   f'(from this folder\'s files).']
    recipe = osp.join(out, 'gat_recipe.csv')
    if osp.exists(recipe):
        table = recipe_table(recipe)
        write_text(osp.join(out, 'gat_recipe.md'), table)
        report += ['', '## GAT recipe', '', table]
    write_text(osp.join(out, 'summary.md'), '\n'.join(report) + '\n')
    return statuses


if __name__ == '__main__':
    failed = [name for name, status in main() if status != 0]
    sys.exit(1 if failed else 0)
