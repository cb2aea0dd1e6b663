r"""Every GPU layer measurement in one committed file, each beside the cost
model's prediction: ``benchmarks/results/gpu_layers.json``.

    python -m benchmarks.gpu_layers gpu-results/gpu_speed.json \
        gpu-results/gpu_speed_dropout.json

reads the layer rows of :mod:`benchmarks.gpu_speed` result files (the
CUDA study, :mod:`benchmarks.cuda_study`, writes them and runs this) and
appends one row per layer, graph and precision to :data:`LAYERS_JSON` (or
``--into``): the device, torch and Triton versions, the commit, the graph,
the model and whether it was compiled, the attention dropout, the median
milliseconds of a layer step (forward + backward), the peak MiB, and the
cost model's predicted milliseconds for the same step
(:mod:`benchmarks.gpu_model`, float32, without dropout; :obj:`None` for a
layer the model does not cover).  Rows are only appended; the file is
written atomically.
"""
import argparse
import functools
import json
import os.path as osp
import sys
from typing import List, Optional

from benchmarks import gpu_model
from ikgat.atomic_writes import check_writable, write_text_atomic

#: The committed rows.
LAYERS_JSON = osp.join('benchmarks', 'results', 'gpu_layers.json')


@functools.cache
def _compile_rows() -> tuple:
    # The compile check's rows, read once (the model's registers and SASS).
    return tuple(gpu_model.load_builds(gpu_model.COMPILE_JSON))


def predicted_ms(model: str, graph: dict) -> Optional[float]:
    r"""The cost model's layer step for a :mod:`benchmarks.gpu_speed` model
    name on a graph row (``graph``, ``nodes``, ``edges``, ``features``);
    :obj:`None` for the layers it does not model."""
    name = model.removesuffix('-compiled')
    size = gpu_model.Graph(graph['graph'], int(graph['nodes']),
                           int(graph['edges']), int(graph['features']))
    rows = _compile_rows()
    if name == 'GATConv':
        step = gpu_model.gatconv_step(size)
    elif name == 'TransformerConv':
        step = gpu_model.transformer_conv_step(size)
    elif name.startswith('IKGATConv-') and (
            name.split('-', 1)[1] in gpu_model.NUM_SETS):
        step = gpu_model.ikgat_layer(size, name.split('-', 1)[1], rows=rows)
    elif name.startswith('IKTransformerConv-') and (
            name.split('-', 1)[1] in gpu_model.NUM_SETS):
        step = gpu_model.transformer_layer(size, name.split('-', 1)[1],
                                           rows=rows)
    else:
        return None
    return round(step.total * 1e3, 3)


def rows_of_study(study: dict, dropout: float, source: str) -> List[dict]:
    r"""The rows of one :mod:`benchmarks.gpu_speed` result (its JSON), with
    the attention :obj:`dropout` it ran with and its file name
    :obj:`source`."""
    header = study['header']
    rows = []
    for layer in study.get('layers', []):
        measured = layer['ms']
        peak = layer.get('peak_bytes')
        rows.append(dict(
            device=header['device'], torch=header['torch'],
            triton=header['triton'], commit=header['git commit'],
            graph=layer['graph'], model=layer['model'].removesuffix(
                '-compiled'),
            compiled=layer['model'].endswith('-compiled'),
            precision=layer.get('precision', 'float32'), dropout=dropout,
            median_ms=measured,
            peak_mib=(round(peak / 2**20, 1) if isinstance(peak, int)
                      else peak),
            predicted_ms=predicted_ms(layer['model'], layer),
            source=source))
    return rows


def append_rows(rows: List[dict], path: str) -> int:
    r"""Append :obj:`rows` to the JSON list at :obj:`path` (created if
    missing), atomically; returns how many rows it holds."""
    existing = []
    if osp.exists(path):
        with open(path) as file:
            existing = json.load(file)
        if not isinstance(existing, list):
            raise ValueError(f'{path}: expected a JSON list of rows; move '
                             f'it aside or pass --into another file')
    existing += rows
    write_text_atomic(path, json.dumps(existing, indent=1) + '\n')
    return len(existing)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('studies', nargs='+', metavar='GPU_SPEED_JSON',
                        help='result files of benchmarks.gpu_speed (.json)')
    parser.add_argument('--dropout', type=float, nargs='+', default=None,
                        help='the attention dropout of each study (default: '
                        '0.6 for files named *dropout*, else 0)')
    parser.add_argument('--into', default=LAYERS_JSON,
                        help=f'the rows file to append to (default: '
                        f'{LAYERS_JSON})')
    args = parser.parse_args(argv)
    if args.dropout is not None and len(args.dropout) != len(args.studies):
        parser.error(f'--dropout takes one value per study ('
                     f'{len(args.studies)}), got {len(args.dropout)}')
    try:
        check_writable(args.into)
    except OSError as error:
        parser.error(f'--into: {error}')
    rows = []
    for index, path in enumerate(args.studies):
        try:
            with open(path) as file:
                study = json.load(file)
            study['header'], study['layers']
        except (OSError, ValueError, KeyError, TypeError) as error:
            parser.error(f'{path} is not a benchmarks.gpu_speed result '
                         f'(.json with a header and layers): {error!r}')
        dropout = (args.dropout[index] if args.dropout is not None else
                   0.6 if 'dropout' in osp.basename(path) else 0.0)
        rows += rows_of_study(study, dropout, osp.basename(path))
    try:
        total = append_rows(rows, args.into)
    except ValueError as error:
        parser.error(str(error))
    print(f'gpu_layers: {len(rows)} rows appended to {args.into} ({total} '
          f'in all)', file=sys.stderr)
    return total


if __name__ == '__main__':
    main()
