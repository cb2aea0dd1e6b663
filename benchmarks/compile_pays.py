r"""Where compiling the CPU random-feature terms pays: the first call's cost
on a machine without Inductor's cache against the time each later step
saves, for the node tables of ``IKTransformerConv(kernel='direct')``
(:mod:`ikgat.ops.compiled_features`) and the node terms of
``IKGATConv(kernel='direct')`` (:mod:`ikgat.ops.node_terms`), 8 heads x
8, forward and backward, at Cora, CiteSeer and PubMed size, and the first
epoch of ``ikgat train --dataset Cora --layer transformer`` with a cold
cache::

    IKGAT_DATA=../shared/data python -m benchmarks.compile_pays \
        --output benchmarks/results/compile_pays.md

Each measurement runs in a fresh process with an empty Inductor cache
(``TORCHINDUCTOR_CACHE_DIR`` in a temporary folder) and one thread:
eager (:data:`ikgat.ops.compiled_features.ENABLED` off), then compiled
(the layer's threshold at 0: :data:`~ikgat.ops.compiled_features.
MIN_ANGLES`, :data:`~ikgat.ops.node_terms.COMPILE_FROM_ANGLES`).  The
steps that repay the first compilation are its extra time over a compiled
step divided by the saving per step; the thresholds are set between the
sizes that repay it within a run of the GAT recipe (a few hundred steps)
and those that do not.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

#: (label, nodes, edges, features): Cora's, CiteSeer's and PubMed's sizes.
GRAPHS = (('Cora', 2708, 10556, 1433), ('CiteSeer', 3327, 9104, 3703),
          ('PubMed', 19717, 88648, 500))
#: The layers whose CPU terms compile.
LAYERS = ('IKTransformerConv', 'IKGATConv')
STEPS = 7


def _measure(layer: str, nodes: int, edges: int, features: int,
             compiled: bool) -> dict:
    r"""In this process: the first step and the median of :data:`STEPS`
    later steps (seconds)."""
    import torch

    import ikgat
    import ikgat.ops.compiled_features as compiled_features
    import ikgat.ops.node_terms as node_terms
    torch.set_num_threads(1)
    compiled_features.ENABLED = compiled
    compiled_features.MIN_ANGLES = 0
    node_terms.COMPILE_FROM_ANGLES = 0
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(nodes, features, generator=generator)
    edge_index = torch.randint(0, nodes, (2, edges), generator=generator)
    torch.manual_seed(0)
    conv = getattr(ikgat, layer)(features, 8, heads=8,
                                 kernel='direct').train()

    def step() -> float:
        start = time.perf_counter()
        conv.zero_grad()
        conv(x, edge_index).square().mean().backward()
        return time.perf_counter() - start

    first = step()
    later = sorted(step() for _ in range(STEPS))
    return dict(first=first, step=later[STEPS // 2])


def _fresh_process(args: List[str], cache: str) -> str:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, OMP_NUM_THREADS='1')
    return subprocess.run(args, env=env, check=True, capture_output=True,
                          text=True).stdout


def measure() -> Dict[str, dict]:
    rows = {}
    for layer in LAYERS:
        for label, nodes, edges, features in GRAPHS:
            for compiled in (False, True):
                with tempfile.TemporaryDirectory() as cache:
                    out = _fresh_process(
                        [sys.executable, '-m', 'benchmarks.compile_pays',
                         '--one', json.dumps([layer, nodes, edges, features,
                                              compiled])], cache)
                key = layer, label, compiled
                rows[key] = json.loads(out.strip().splitlines()[-1])
                print(f'compile_pays: {key}: {rows[key]}', file=sys.stderr,
                      flush=True)
    with tempfile.TemporaryDirectory() as cache:
        out = _fresh_process(
            [sys.executable, '-m', 'ikgat.cli', 'train', '--dataset', 'Cora',
             '--layer', 'transformer', '--epochs', '1', '--threads', '1'],
            cache)
    match = re.search(r'1 epochs in ([\d.]+) s', out)
    rows['first epoch'] = dict(seconds=float(match.group(1)) if match
                               else None, line=out.strip().splitlines()[-1])
    return rows


def report(rows: Dict, command: str) -> str:
    from benchmarks.harness.measurement import machine_info
    from benchmarks.harness.provenance import git_commit
    lines = ['# Where compiling the CPU random-feature terms pays', '',
             f'Command: `{command}`; git commit {git_commit()}.', '',
             *machine_info(), '',
             "Each layer with `kernel='direct'`, 8 heads x 8, forward and "
             'backward, one thread, each row in a fresh process with an empty '
             'Inductor cache: `IKTransformerConv` compiles its node tables, '
             '`IKGATConv` its node terms.', '',
             '| layer | graph | eager step | compiled step | saved a step | '
             'first compiled call, extra | steps to repay it |',
             '|---|---|---:|---:|---:|---:|---:|']
    for layer in LAYERS:
        for label, *_ in GRAPHS:
            eager = rows[layer, label, False]
            compiled = rows[layer, label, True]
            saved = eager['step'] - compiled['step']
            extra = compiled['first'] - compiled['step']
            repay = f'{extra / saved:.0f}' if saved > 0 else 'never'
            lines.append(f"| {layer} | {label} | "
                         f"{1e3 * eager['step']:.1f} ms | "
                         f"{1e3 * compiled['step']:.1f} ms | "
                         f"{1e3 * saved:.1f} ms | {extra:.1f} s | {repay} |")
    first = rows['first epoch']
    lines += ['', f"First epoch of `ikgat train --dataset Cora --layer "
              f"transformer --epochs 1 --threads 1`, empty Inductor cache: "
              f"{first['seconds']} s (`{first['line']}`)."]
    return '\n'.join(lines) + '\n'


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--output', default=None,
                        help='also write the Markdown table here')
    parser.add_argument('--one', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_measure(*json.loads(args.one))))
        return 0
    if args.output is not None:
        from ikgat.atomic_writes import check_writable
        try:
            check_writable(args.output)
        except OSError as error:
            parser.error(f'--output: {error}')
    command = ' '.join(['python -m benchmarks.compile_pays']
                       + (sys.argv[1:] if argv is None else list(argv)))
    text = report(measure(), command)
    print(text)
    if args.output is not None:
        from benchmarks.harness.results import write_text
        write_text(args.output, text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
