r"""Where a layer step's time goes on a GPU, kernel by kernel, before any
change is made to it: ``python -m benchmarks.gpu_profile``.

    python -m benchmarks.gpu_profile --graphs arxiv \
        --output gpu-results/gpu_profile.md

For each layer (by default the GAT family and the GATConv it replaces,
eager and compiled), one layer step (forward + backward, as
:mod:`benchmarks.gpu_speed` times it, with attention dropout 0.6 by
default: the GAT recipe) is run :obj:`--warmup` times, then
:obj:`--steps` times under :mod:`torch.profiler`.  Per step it reports
the device time of every kernel (the largest first, with its calls and
mean), the kernels launched, the device time in all, and the host time
(the wall time of issuing the steps, before the device is waited for).
``--smoke`` profiles the CPU path on a toy graph: a rehearsal of the
command, no GPU number.
"""
import argparse
import os
import sys
import time
from typing import Dict, List, Optional

import torch

from benchmarks.gpu_speed import (
    GRAPHS,
    SMOKE_GRAPHS,
    build_model,
    layer_step,
    synthetic_graph,
)
from benchmarks.harness.provenance import git_commit
from ikgat.atomic_writes import check_writable, write_text_atomic

#: The layers profiled by default: the GAT family, and GATConv eager and
#: compiled (the issue's yardstick).
GAT_FAMILY = ['GATConv', 'GATConv-compiled', 'IKGATConv-rbf',
              'IKGATConv-direct', 'IKGATConv-implicit', 'MIKANConv']
#: Kernels listed per layer (the rest summed in one line).
TOP = 12


def _device_time(average) -> float:
    r"""Self device time of a profiler average, µs (the attribute's name
    changed across torch versions)."""
    for name in ('self_device_time_total', 'self_cuda_time_total'):
        value = getattr(average, name, None)
        if value is not None:
            return float(value)
    return 0.0


def profile_step(step, steps: int, device: torch.device) -> Dict:
    r"""The profile of :obj:`steps` calls of :obj:`step`, per step: kernel
    rows (name, calls, device µs), kernels launched, device and host
    ms."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU]
    if device.type == 'cuda':
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        host = time.perf_counter() - start
        if device.type == 'cuda':
            torch.cuda.synchronize(device)
    averages = prof.key_averages()
    if device.type == 'cuda':
        kernels = [(a.key, a.count / steps, _device_time(a) / steps)
                   for a in averages if _device_time(a) > 0]
        launches = sum(a.count for a in averages
                       if 'LaunchKernel' in a.key) / steps
    else:  # the CPU path: its operators' own time stands in
        kernels = [(a.key, a.count / steps, a.self_cpu_time_total / steps)
                   for a in averages if a.self_cpu_time_total > 0]
        launches = 0.0
    kernels.sort(key=lambda row: -row[2])
    return dict(kernels=kernels, launches=launches,
                device_ms=sum(row[2] for row in kernels) / 1e3,
                host_ms=host * 1e3 / steps)


def markdown(header: Dict[str, str], profiles: Dict[str, Dict],
             device: torch.device) -> str:
    unit = 'device' if device.type == 'cuda' else 'CPU (self)'
    out = ['# Where a layer step\'s time goes, kernel by kernel', '']
    out += [f'- {key}: {value}' for key, value in header.items()]
    out += ['', '| layer | ' + unit + ' ms per step | host ms per step | '
            'kernels launched per step |', '|---|---:|---:|---:|']
    for name, result in profiles.items():
        out.append(f"| {name} | {result['device_ms']:.3f} | "
                   f"{result['host_ms']:.3f} | {result['launches']:.0f} |")
    for name, result in profiles.items():
        out += ['', f'## {name}', '', f'| kernel | calls per step | {unit} '
                'µs per step | mean µs |', '|---|---:|---:|---:|']
        rows = result['kernels']
        for key, calls, micros in rows[:TOP]:
            label = key if len(key) <= 90 else key[:87] + '...'
            out.append(f'| `{label}` | {calls:g} | {micros:.1f} | '
                       f'{micros / max(calls, 1e-9):.1f} |')
        rest = rows[TOP:]
        if rest:
            out.append(f'| ({len(rest)} others) | '
                       f'{sum(row[1] for row in rest):g} | '
                       f'{sum(row[2] for row in rest):.1f} | |')
    return '\n'.join(out) + '\n'


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--models', nargs='+', default=GAT_FAMILY,
                        metavar='MODEL', help='benchmarks.gpu_speed model '
                        f'names (default: {GAT_FAMILY})')
    parser.add_argument('--graphs', nargs='+', default=['arxiv'],
                        metavar='GRAPH', help='graph sizes (default: arxiv)')
    parser.add_argument('--attention-dropout', type=float, default=0.6)
    parser.add_argument('--warmup', type=int, default=3)
    parser.add_argument('--steps', type=int, default=5)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--smoke', action='store_true',
                        help='the CPU path on a toy graph (a rehearsal)')
    parser.add_argument('--output', required=True,
                        help='the Markdown report')
    args = parser.parse_args(argv)
    try:
        check_writable(args.output)
    except OSError as error:
        parser.error(f'--output: {error}')
    catalogue = SMOKE_GRAPHS if args.smoke else GRAPHS
    unknown = [graph for graph in args.graphs if graph not in catalogue]
    if unknown:
        parser.error(f'unknown graphs {unknown}; choose from '
                     f'{sorted(catalogue)}')
    if args.smoke:
        os.environ.setdefault('TRITON_INTERPRET', '1')
    elif not torch.cuda.is_available():
        parser.error('no CUDA device; --smoke rehearses the command on CPU')
    device = torch.device('cpu' if args.smoke else 'cuda')
    header = {'device': torch.cuda.get_device_name() if device.type == 'cuda'
              else 'CPU (smoke: no GPU number)',
              'torch': torch.__version__, 'git commit': git_commit(),
              'command': 'python -m benchmarks.gpu_profile '
              + ' '.join(argv if argv is not None else sys.argv[1:]),
              'protocol': f'{args.warmup} warm-up steps, {args.steps} '
              f'profiled; attention dropout {args.attention_dropout}'}
    profiles = {}
    for graph in args.graphs:
        nodes, edges, features, _ = catalogue[graph]
        x, edge_index = synthetic_graph(nodes, edges, features, device,
                                        args.seed)
        for name in args.models:
            torch.manual_seed(args.seed)
            model = build_model(name, features,
                                attention_dropout=args.attention_dropout
                                ).to(device).train()
            step = layer_step(model, x, edge_index, device, 'float32')
            for _ in range(args.warmup):
                step()
            profiles[f'{graph} {name}'] = profile_step(step, args.steps,
                                                       device)
            print(f'gpu_profile: {graph} {name}', file=sys.stderr,
                  flush=True)
            del model, step
    text = markdown(header, profiles, device)
    write_text_atomic(args.output, text)
    return text


if __name__ == '__main__':
    main()
