r"""What every command pays before it does anything: a fresh Python process
that imports ikgat against one that imports PyG, and ``ikgat --help``.

    python -m benchmarks.startup --rounds 7

Each round starts every command once, in a fresh process, one after the
other (interleaved rounds, so that a busier moment of the machine falls on
all of them); the report gives each command's median wall time and the
ratios of the pairs :data:`PAIRS`: ``import ikgat`` against ``import
torch_geometric`` (ikgat loads torch, PyG and its layers only when a name
is first used), and the imports a user's model starts with, ``from ikgat
import IKGATConv`` against ``from torch_geometric.nn import GATConv``.
The targets: at most 1.1 times PyG's import, and ``ikgat --help`` within
a second.

The commands run with Python's byte-code cache on (without
``PYTHONDONTWRITEBYTECODE``), as after ``pip install``, which compiles
every module; the untimed first round writes a checkout's caches.  Without
them a checkout recompiles ikgat's modules at every start (about 0.15 s
here) while torch's and PyG's come compiled.
"""
import argparse
import os
import os.path as osp
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Sequence, Tuple

from benchmarks.harness.provenance import git_commit
from benchmarks.harness.results import write_text

RESULTS = osp.join(osp.dirname(__file__), 'results', 'startup.md')

#: Each command's name and its arguments.
COMMANDS: Dict[str, List[str]] = {
    'import torch_geometric': [sys.executable, '-c',
                               'import torch_geometric'],
    'import ikgat': [sys.executable, '-c', 'import ikgat'],
    'from torch_geometric.nn import GATConv': [
        sys.executable, '-c', 'from torch_geometric.nn import GATConv'],
    'from ikgat import IKGATConv': [sys.executable, '-c',
                                    'from ikgat import IKGATConv'],
    'ikgat --help': [sys.executable, '-m', 'ikgat.cli', '--help'],
}

#: (command, its PyG counterpart) pairs whose ratio the report gives.
PAIRS: Tuple[Tuple[str, str], ...] = (
    ('import ikgat', 'import torch_geometric'),
    ('from ikgat import IKGATConv', 'from torch_geometric.nn import GATConv'),
)


def wall_time(arguments: Sequence[str]) -> float:
    r"""Seconds from starting :obj:`arguments` to its exit; a failing
    command raises with its error output."""
    environment = dict(os.environ)
    environment.pop('PYTHONDONTWRITEBYTECODE', None)
    start = time.perf_counter()
    done = subprocess.run(list(arguments), capture_output=True, text=True,
                          env=environment)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f'{" ".join(arguments)} failed '
                           f'({done.returncode}): {done.stderr.strip()}')
    return seconds


def measure(commands: Dict[str, List[str]], rounds: int
            ) -> Dict[str, List[float]]:
    r"""Each command's wall times over :obj:`rounds` interleaved rounds,
    after one untimed round (the file cache)."""
    times: Dict[str, List[float]] = {name: [] for name in commands}
    for round_index in range(rounds + 1):
        for name, arguments in commands.items():
            seconds = wall_time(arguments)
            if round_index:
                times[name].append(seconds)
    return times


def report(times: Dict[str, List[float]], command: str) -> str:
    r"""The Markdown report of :func:`measure`'s times."""
    medians = {name: statistics.median(values)
               for name, values in times.items()}
    rounds = len(next(iter(times.values())))
    lines = [
        '# Start-up: importing ikgat against importing PyG', '',
        f'Command: `{command}`; commit {git_commit()}; Python '
        f'{sys.version.split()[0]}. Each command in a fresh process with '
        f'the byte-code cache on, {rounds} interleaved rounds after an '
        f'untimed one; medians.', '',
        '| command | median s | min s | max s |', '|---|---:|---:|---:|']
    for name, values in times.items():
        lines.append(f'| `{name}` | {medians[name]:.2f} | {min(values):.2f} '
                     f'| {max(values):.2f} |')
    lines += ['', '| ratio | of the medians | of the fastest runs | target |',
              '|---|---:|---:|---|']
    for name, baseline in PAIRS:
        if name in medians and baseline in medians:
            fastest = min(times[name]) / min(times[baseline])
            lines.append(f'| `{name}` / `{baseline}` | '
                         f'{medians[name] / medians[baseline]:.2f}x | '
                         f'{fastest:.2f}x | ≤ 1.1x |')
    return '\n'.join(lines) + '\n'


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--rounds', type=int, default=7)
    parser.add_argument('--output', default=RESULTS)
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f'--rounds must be at least 1 (got {args.rounds})')
    argv_text = ' '.join(sys.argv[1:] if argv is None else argv)
    text = report(measure(COMMANDS, args.rounds),
                  f'python -m benchmarks.startup {argv_text}'.strip())
    write_text(args.output, text)
    print(text)
    return text


if __name__ == '__main__':
    main()
