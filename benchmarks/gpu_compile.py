r"""Every Triton kernel the layers launch, compiled for real GPUs on a
machine without one: ``python -m benchmarks.gpu_compile``.

    python -m benchmarks.gpu_compile --triton 3.6.0 \
        --output benchmarks/results/gpu_compile.md

Triton's interpreter (``TRITON_INTERPRET=1``, the tests' way of running the
kernels on CPU) checks values; it accepts kernels that Triton's compiler
rejects and says nothing of registers.  This check runs the compiler:

1. **Launches from real layer calls.**  Every layer of
   :func:`benchmarks.launches.layer_names` is called, forward and backward
   in training and forward in evaluation, over a grid of shapes and options
   (:func:`layer_calls`: heads x channels, spectral points, attention
   dropout, edge features, bipartite inputs, a shared target row, returned
   attention weights, every edge block from sparse to dense
   neighbourhoods, evaluation draws),
   forced onto the fused attention and the Triton node terms, inside
   :func:`ikgat.kernels.triton_runtime.record_launches`: each launch is
   recorded (kernel, argument types as Triton specialises them,
   compile-time constants) and nothing runs, so the grid costs seconds.
   The node-term estimate with one slope, the transformer attention
   on gathered ``'log_square'`` tables, and the transformer attention in
   float64 (which the layers do not fuse, but the operator takes), come
   from their public functions.
2. **The compiler and ptxas.**  Each distinct launch is compiled with
   ``triton.compile(ASTSource(...), target=GPUTarget('cuda', cc, 32))`` for
   sm_90 (H100) and sm_80 (A100) with the launch's options (every kernel
   is built with ``.maxnreg`` :data:`MAX_REGISTERS`), and the log of
   Triton's own ``ptxas -v`` run (``TRITON_DUMP_PTXAS_LOG``) gives the
   registers per thread and the spill bytes; the occupancy (blocks and
   warps per SM) follows from the registers, the warps and the shared
   memory.  Launches that differ only in Triton's alignment hints (which
   follow the sizes of the graph at hand) are compiled once.
   ``--triton VERSION`` compiles with another Triton too (downloaded once
   with pip into ``--cache``): CI's Triton and the oldest supported one
   (:data:`~ikgat.kernels.triton_runtime.MIN_TRITON`).
3. **The verdict.**  A build fails on a compile error, on any spill, or on
   more than :data:`MAX_REGISTERS` registers per thread.  No kernel is
   excepted: under ``.maxnreg`` a kernel that needs more registers spills,
   and fails.  The command prints one table and exits with status 1 on a
   failure.
"""
import argparse
import json
import os
import os.path as osp
import re
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from ikgat.durable import check_writable
from ikgat.kernels.triton_runtime import MAX_REGISTERS

#: The targets: compute capability 9.0 (H100) and 8.0 (A100).
TARGETS = (90, 80)

#: The grid (heads x channels; spectral points R; attention dropout).
SHAPES = ((8, 8), (1, 7), (4, 32), (1, 64), (8, 64))
SPECTRAL_POINTS = (16, 64, 128)
DROPOUTS = (0.0, 0.6)
#: In-edges per node, so that every edge block a graph can give the 8 x 8
#: layers is compiled: the block is the next power of two of the mean
#: in-degree (the GAT layers add a self-loop) up to a cap, so 1, 2, 4 and 8
#: give blocks of 2, 4, 8 (Cora's and PubMed's, mean degree 4-5 with the
#: self-loop) and 16, and 256 the cap.
DEGREES = (1, 2, 4, 8, 256)
#: The same for the transformer drop-ins (no self-loop added; every shape
#: of :data:`TRANSFORMER_GRID` also runs at degree 8): blocks of 2 and 4,
#: and the cap.
TRANSFORMER_DEGREES = (2, 4, 256)
#: Draws averaged in evaluation by the stochastic kernels.
NUM_SAMPLES = 4
#: The transformer drop-ins' grid (heads, channels, R): their kernels'
#: constants follow D (C, or 2R), C and the heads alone, so that three
#: points span them: the arxiv-size layer, one head (Triton specialises
#: H = 1) at the smallest R, and the widest tables (D = 256, C = 64, two
#: blocks of heads); then :data:`TRANSFORMER_DEGREES` and a bipartite
#: graph at 8 x 8.
TRANSFORMER_GRID = ((8, 8, 64), (1, 7, 16), (8, 64, 128))
#: IKTransformerConv's stochastic kernels: their tables, link and blocks
#: are direct's (D = 2R, 'log_square') in training and at every degree,
#: so that only their evaluation draws (S H heads in one pass) add
#: launches; the grid calls them in evaluation over the shapes alone.
TRANSFORMER_DRAWS_ONLY = ('IKTransformerConv-implicit',
                          'MIKANTransformerConv')
#: Tries at downloading another Triton's wheel (286 MB; a download that
#: drops is retried after a pause).
DOWNLOAD_ATTEMPTS = 3
# Node counts not divisible by 16 (Triton specialises on it; real graphs
# have any count).
FEATURES, NODES = 16, 45

# H100 / A100 per SM: registers, threads, blocks, shared memory (bytes).
_SM_LIMITS = {90: (65536, 2048, 32, 228 * 1024),
              80: (65536, 2048, 32, 164 * 1024)}


# ---------------------------------------------------------------------------
# 1. Launches from layer calls.


def _spectral(name: str) -> bool:
    from ikgat.kernels import KERNELS
    if name.startswith('MIKAN'):
        return True
    kernel = name.split('-', 1)[-1]
    return kernel in KERNELS and KERNELS[kernel].has_spectral_points


def _build(name: str, heads: int, channels: int, dropout: float,
           points: int = 64, edge_dim: Optional[int] = None,
           in_channels=FEATURES):
    r"""Layer :obj:`name` on its CUDA path (fused attention, Triton node
    terms)."""
    from ikgat import (
        IKGATConv,
        IKTransformerConv,
        KEPGATConv,
        MIKANConv,
        MIKANTransformerConv,
    )
    kwargs = dict(heads=heads, dropout=dropout, edge_dim=edge_dim)
    node_path = dict(node_path='triton')
    if name == 'MIKANTransformerConv':
        layer = MIKANTransformerConv(in_channels, channels,
                                     num_samples=NUM_SAMPLES,
                                     num_spectral_points=points, **kwargs)
    elif name.startswith('IKTransformerConv-'):
        kernel = name[len('IKTransformerConv-'):]
        layer = IKTransformerConv(
            in_channels, channels, kernel=kernel,
            num_spectral_points=points, kernel_kwargs=dict(
                num_samples=NUM_SAMPLES) if kernel == 'implicit' else None,
            **kwargs)
    elif name == 'KEPGATConv':
        layer = KEPGATConv(in_channels, channels, num_samples=NUM_SAMPLES,
                           **kwargs)
    elif name == 'MIKANConv':
        layer = MIKANConv(in_channels, channels, num_samples=NUM_SAMPLES,
                          num_spectral_points=points,
                          kernel_kwargs=node_path, **kwargs)
    else:
        kernel = name[len('IKGATConv-'):]
        kernel_kwargs = None
        if _spectral(name):
            kernel_kwargs = dict(node_path)
            if kernel == 'implicit':
                kernel_kwargs['num_samples'] = NUM_SAMPLES
        layer = IKGATConv(in_channels, channels, kernel=kernel,
                          num_spectral_points=points,
                          kernel_kwargs=kernel_kwargs, **kwargs)
    layer.fused_attention = 'always'
    return layer


def _graph(degree: int, num_src: int = NODES, num_dst: int = NODES):
    import torch
    dst = torch.arange(num_dst).repeat_interleave(degree)
    return torch.stack([torch.randint(0, num_src, (dst.numel(), )), dst])


def _step(layer, x, edge_index, training: bool, edge_attr=None,
          attention: bool = False) -> None:
    r"""One training step (forward and backward) or evaluation forward."""
    import torch
    layer.train(training)
    if not training:
        with torch.no_grad():
            layer(x, edge_index, edge_attr)
        return
    xs = (x, ) if torch.is_tensor(x) else tuple(
        part for part in x if part is not None)
    for part in xs:
        part.requires_grad_()
    if attention:
        out, (_, alpha) = layer(x, edge_index, edge_attr,
                                return_attention_weights=True)
        (out.sum() + alpha.sum()).backward()
    else:
        layer(x, edge_index, edge_attr).sum().backward()


def layer_calls(layers: List[str]
                ) -> Iterator[Tuple[str, Callable[[], None]]]:
    r"""(label, call) of every layer call of the grid (see the module
    docstring): the full grid of shapes x spectral points x modes at 8
    in-edges, then each option varied alone at 8 heads x 8 channels and
    every degree of :data:`DEGREES`; the
    transformer drop-ins over :data:`TRANSFORMER_GRID` (implicit and MIKAN
    in evaluation only, :data:`TRANSFORMER_DRAWS_ONLY`)."""
    import torch

    from benchmarks.launches import is_transformer

    def call(name, heads, channels, training, dropout=0.0, points=64,
             degree=8, edge=False, bipartite=False, shared_target=False,
             attention=False):
        def run():
            torch.manual_seed(0)
            layer = _build(name, heads, channels, dropout, points,
                           edge_dim=3 if edge else None,
                           in_channels=(FEATURES, FEATURES) if (
                               bipartite or shared_target) else FEATURES)
            num_dst = NODES // 2 + 1 if bipartite else NODES
            edge_index = _graph(degree, NODES, num_dst)
            x = torch.randn(NODES, FEATURES)
            if bipartite:
                x = (x, torch.randn(num_dst, FEATURES))
            elif shared_target:
                x = (x, None)
            edge_attr = (torch.randn(edge_index.size(1), 3) if edge
                         else None)
            _step(layer, x, edge_index, training, edge_attr, attention)
        label = (f'{name} {heads}x{channels} '
                 + ('train' if training else 'eval')
                 + f' dropout={dropout:g} R={points} degree={degree}'
                 + ' edge' * edge + ' bipartite' * bipartite
                 + ' x_dst=None' * shared_target + ' alpha' * attention)
        return label, run

    all_modes = [(True, dropout) for dropout in DROPOUTS] + [(False, 0.0)]
    for name in layers:
        points_grid = SPECTRAL_POINTS if _spectral(name) else (64, )
        grid = [(heads, channels, points) for heads, channels in SHAPES
                for points in points_grid]
        modes, degrees = all_modes, DEGREES
        if is_transformer(name):
            grid = [(heads, channels, points if _spectral(name) else 64)
                    for heads, channels, points in TRANSFORMER_GRID]
            degrees = TRANSFORMER_DEGREES
        if name in TRANSFORMER_DRAWS_ONLY:
            # Launches that IKTransformerConv-direct already makes: only
            # the evaluation draws (S H heads) are their own.
            modes, degrees = [(False, 0.0)], ()
        for heads, channels, points in grid:
            for training, dropout in modes:
                yield call(name, heads, channels, training, dropout, points)
        if name in TRANSFORMER_DRAWS_ONLY:
            continue
        for training, dropout in modes:
            for degree in degrees:
                yield call(name, 8, 8, training, dropout, degree=degree)
            if is_transformer(name):
                # Edge features, returned weights: the PyTorch path; a
                # missing x_dst: no queries.
                yield call(name, 8, 8, training, dropout, bipartite=True)
                continue
            # Each option at every degree: the edge block follows the
            # degree, and the options choose the kernels' variants.
            for degree in degrees:
                for option in ('edge', 'bipartite', 'shared_target'):
                    yield call(name, 8, 8, training, dropout, degree=degree,
                               **{option: True})
                if training:
                    yield call(name, 8, 8, training, dropout, degree=degree,
                               attention=True)
                    yield call(name, 8, 8, training, dropout, degree=degree,
                               edge=True, attention=True)


def one_slope_calls() -> Iterator[Tuple[str, Callable[[], None]]]:
    r"""The node-term estimate with one slope, through its public
    function (the layers use two)."""
    import torch

    from ikgat.kernels.fused_fourier import fused_fourier_log_similarity
    for heads, channels in SHAPES:
        def run(heads=heads, channels=channels):
            x = torch.randn(NODES, heads, channels, requires_grad=True)
            anchor = torch.randn(heads, 2 * channels, requires_grad=True)
            points = [torch.randn(heads, 64, 2 * channels,
                                  requires_grad=True)]
            fused_fourier_log_similarity(
                x, anchor, True, torch.ones(1), points, 1e-5,
                node_path='triton').sum().backward()
        yield f'fused_fourier_log_similarity {heads}x{channels} T=1', run


def gathered_table_calls() -> Iterator[Tuple[str, Callable[[], None]]]:
    r"""The transformer attention on gathered ``'log_square'`` tables,
    through its public function (the layers pass the random-feature
    kernels' points instead): D = 2R over :data:`TRANSFORMER_GRID`, with
    and without attention dropout."""
    import torch

    from ikgat.nn.triton_transformer import (
        LOG_SQUARE,
        fused_transformer_attention,
    )
    for heads, channels, points in TRANSFORMER_GRID:
        for dropout in DROPOUTS:
            def run(heads=heads, channels=channels, points=points,
                    dropout=dropout):
                u = torch.randn(NODES, heads, 2 * points, requires_grad=True)
                v = torch.randn(NODES, heads, 2 * points, requires_grad=True)
                s = torch.randn(NODES, heads, requires_grad=True)
                x = torch.randn(NODES, heads, channels, requires_grad=True)
                fused_transformer_attention(
                    u, v, s, x, _graph(8), NODES, LOG_SQUARE, 0.1, 1e-5,
                    dropout=dropout, use_triton=True).sum().backward()
            yield (f'fused_transformer_attention {heads}x{channels} '
                   f'D={2 * points} dropout={dropout:g}'), run


def float64_calls() -> Iterator[Tuple[str, Callable[[], None]]]:
    r"""The transformer attention in float64 through its public function,
    on tables (both links) and on spectral points, with and without
    attention dropout: the layers fuse float32 only, but the operator takes
    float64, and Triton types each float64 launch anew (a loop-carried tile
    that turns float64, or a helper whose branches return other dtypes,
    does not build, where the interpreter runs it)."""
    import torch

    from ikgat.nn.triton_transformer import (
        LINKS,
        LOG_SQUARE,
        fused_transformer_attention,
    )

    def randn(*shape):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    for points in (None, 16):
        for link in (LINKS if points is None else (LOG_SQUARE, )):
            for dropout in DROPOUTS:
                def run(points=points, link=link, dropout=dropout):
                    width = 8 if points else 16
                    fused_transformer_attention(
                        randn(NODES, 2, width), randn(NODES, 2, width),
                        randn(NODES, 2), randn(NODES, 2, 8), _graph(4),
                        NODES, link, 0.1, 1e-5, dropout=dropout,
                        use_triton=True, points=randn(
                            2, 2, points, width) if points else None
                    ).sum().backward()
                yield (f'fused_transformer_attention float64 {link} '
                       f'R={points} dropout={dropout:g}'), run


def capture(layers: List[str]) -> List[dict]:
    r"""The distinct launches of every call (run with
    ``TRITON_INTERPRET=1``, so that the layers take their Triton path on
    CPU tensors; nothing is launched)."""
    import warnings

    from ikgat.kernels.triton_runtime import record_launches
    distinct: OrderedDict[str, dict] = OrderedDict()
    calls = (list(layer_calls(layers)) + list(one_slope_calls())
             + list(gathered_table_calls()) + list(float64_calls()))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for label, run in calls:
            with record_launches() as launches:
                run()
            for launch in launches:
                entry = distinct.setdefault(launch.key, dict(
                    launch._asdict(), aligned=list(launch.aligned),
                    calls=0, first=label))
                entry['calls'] += 1
    print(f'gpu_compile: {len(calls)} layer calls, {len(distinct)} distinct '
          f'launches', file=sys.stderr, flush=True)
    return list(distinct.values())


# ---------------------------------------------------------------------------
# 2. The compiler and ptxas (a process without the interpreter).


def compile_launch(launch: dict, cc: int) -> dict:
    r"""Compile one recorded launch for ``sm_<cc>``: registers, spill
    bytes, shared memory and warps from the ``ptxas -v`` log of Triton's own
    ptxas run (``TRITON_DUMP_PTXAS_LOG``, set by :func:`main`), or the
    compiler's error."""
    import contextlib
    import io

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ikgat.kernels.triton_runtime import build_error_reason, jitted_kernel
    kernel = jitted_kernel(launch['module'], launch['name'])
    signature = launch['signature']
    attrs = {(index, ): [['tt.divisibility', 16]]
             for index, name in enumerate(signature)
             if name in launch['aligned']}
    result = dict(cc=cc, triton=triton.__version__)
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            compiled = triton.compile(
                ASTSource(kernel, signature, constexprs=launch['constexprs'],
                          attrs=attrs),
                target=GPUTarget('cuda', cc, 32),
                options=dict(launch['options']))
    except Exception as error:  # the compiler's verdict, reported
        return dict(result, error=build_error_reason(error))
    text = log.getvalue()
    registers = re.search(r'Used (\d+) registers', text)
    if registers is None:
        raise RuntimeError(f'gpu_compile: no ptxas log for {launch["name"]}'
                           f' (TRITON_DUMP_PTXAS_LOG unset?)')
    spills = re.findall(r'(\d+) bytes spill stores, (\d+) bytes spill loads',
                        text)
    return dict(result, registers=int(registers.group(1)),
                spill=max((int(a) + int(b) for a, b in spills), default=0),
                shared=int(compiled.metadata.shared),
                warps=int(compiled.metadata.num_warps))


def _compile_one(job):
    return compile_launch(*job)


def compile_all(launches: List[dict], targets, jobs: int
                ) -> List[Dict[int, dict]]:
    r"""Every launch for every target, :obj:`jobs` processes at a time:
    per launch, the build of each target."""
    work = [(launch, cc) for launch in launches for cc in targets]
    if jobs <= 1:
        results = [_compile_one(job) for job in work]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_compile_one, work))
    return [{cc: results[index * len(targets) + offset]
             for offset, cc in enumerate(targets)}
            for index in range(len(launches))]


def occupancy(registers: int, warps: int, shared: int, cc: int) -> int:
    r"""Resident blocks per SM: registers are allocated per warp in units of
    256, at most :math:`R_{SM}`; threads, blocks and shared memory bound
    it too."""
    sm_registers, sm_threads, sm_blocks, sm_shared = _SM_LIMITS[cc]
    per_warp = -(-registers * 32 // 256) * 256
    bounds = [sm_registers // (per_warp * warps), sm_threads // (32 * warps),
              sm_blocks]
    if shared:
        bounds.append(sm_shared // shared)
    return max(0, min(bounds))


def verdict(build: dict) -> Optional[str]:
    r"""Why a build fails the check (:obj:`None` if it passes)."""
    if 'error' in build:
        return build['error']
    if build['spill']:
        return f"spills {build['spill']} B"
    if build['registers'] > MAX_REGISTERS:
        return f"{build['registers']} registers > {MAX_REGISTERS}"
    return None


# ---------------------------------------------------------------------------
# 3. Orchestration: capture in an interpreter process, compile in one
# process per Triton, one table.


def triton_folder(version: str, cache: str) -> str:
    r"""A folder holding Triton :obj:`version` (unpacked from its wheel,
    downloaded once into :obj:`cache`), to put first on ``PYTHONPATH``."""
    folder = osp.join(cache, f'triton-{version}')
    if not osp.isdir(osp.join(folder, 'triton')):
        os.makedirs(cache, exist_ok=True)
        wheels = osp.join(cache, f'wheel-{version}')
        download = [sys.executable, '-m', 'pip', 'download', '-q',
                    '--no-deps', f'triton=={version}', '-d', wheels]
        for attempt in range(DOWNLOAD_ATTEMPTS):  # a dropped download
            if subprocess.run(download).returncode == 0:
                break
            if attempt + 1 == DOWNLOAD_ATTEMPTS:
                raise RuntimeError(f'gpu_compile: could not download '
                                   f'triton=={version} with pip '
                                   f'({DOWNLOAD_ATTEMPTS} attempts); '
                                   f'check the network or the index')
            time.sleep(30 * (attempt + 1))
        wheel = [name for name in os.listdir(wheels)
                 if name.endswith('.whl')][0]
        partial = folder + '.partial'
        subprocess.run([sys.executable, '-m', 'zipfile', '-e',
                        osp.join(wheels, wheel), partial], check=True)
        for root, _, files in os.walk(osp.join(partial, 'triton', 'backends')):
            for name in files:
                if osp.basename(root) == 'bin':
                    os.chmod(osp.join(root, name), 0o755)
        os.replace(partial, folder)
    return folder


def _run_phase(args: List[str], env: Dict[str, str]) -> None:
    subprocess.run([sys.executable, '-m', 'benchmarks.gpu_compile', *args],
                   env=env, check=True)


def _version_key(version: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r'\d+', version)[:3])


def table_rows(launches: List[dict],
               builds: Dict[str, List[Dict[int, dict]]], targets
               ) -> List[dict]:
    r"""One row per launch: its kernel, constants, first call and the
    build of each Triton version and target (``'3.9.0 sm_90'``), with the
    resident warps per SM and the verdict (:obj:`None`: pass)."""
    versions = sorted(builds, key=_version_key)
    rows = []
    for index, launch in enumerate(launches):
        row = dict(kernel=launch['name'], constexprs=launch['constexprs'],
                   first=launch['first'], calls=launch['calls'], builds={})
        for version in versions:
            for cc in targets:
                build = dict(builds[version][index][cc])
                if 'error' not in build:
                    build['resident_warps'] = build['warps'] * occupancy(
                        build['registers'], build['warps'], build['shared'],
                        cc)
                build['verdict'] = verdict(build)
                row['builds'][f'{version} sm_{cc}'] = build
        rows.append(row)
    return rows


def render(rows: List[dict], command: str) -> Tuple[str, List[str]]:
    r"""The Markdown table (one row per distinct launch, a column per
    Triton version and target: registers / spill bytes / resident warps
    per SM) and the failures."""
    import torch

    from benchmarks.harness.provenance import git_commit
    columns = list(rows[0]['builds']) if rows else []
    versions = list(OrderedDict.fromkeys(column.split()[0]
                                         for column in columns))
    failures = []
    lines = [
        '# Triton kernels compiled for sm_90 and sm_80', '',
        f'Command: `{command}`; git commit {git_commit()}; torch '
        f'{torch.__version__}; Triton {", ".join(versions)}; no GPU '
        f'(Triton\'s compiler and the ptxas it bundles).', '',
        'One row per distinct launch that the layers made over the grid of '
        '`benchmarks/gpu_compile.py` (the first call that made it, and how '
        'many calls did). Each cell: registers per thread / spill bytes / '
        'resident warps per SM (of 64). The check: it compiles, 0 spill, '
        f'at most {MAX_REGISTERS} registers.', '',
        '| kernel | constants | launched by (calls) | '
        + ' | '.join(columns) + ' | verdict |',
        '|---|---|---|' + '---:|' * len(columns) + '---|']
    for row in rows:
        name = row['kernel']
        constants = ', '.join(f'{key}={value}' for key, value in
                              row['constexprs'].items())
        cells, problems = [], []
        for column, build in row['builds'].items():
            cells.append('error' if 'error' in build else
                         f"{build['registers']} / {build['spill']} / "
                         f"{build['resident_warps']}")
            if build['verdict']:
                problems.append(f"{column}: {build['verdict']}")
        failures += [f'{name}[{constants}] {problem}' for problem in problems]
        status = '; '.join(problems) if problems else 'pass'
        lines.append(f"| `{name}` | {constants} | {row['first']} "
                     f"({row['calls']}) | " + ' | '.join(cells)
                     + f' | {status} |')
    lines += ['', f'{len(rows)} launches x {len(columns)} builds: '
              + (f'{len(failures)} failures.' if failures else
                 'all compile, none spills, all within the register '
                 'budget.')]
    return '\n'.join(lines) + '\n', failures


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--triton', nargs='*', default=[], metavar='VERSION',
                        help='also compile with these Triton versions '
                        '(downloaded with pip into --cache)')
    parser.add_argument('--targets', nargs='+', type=int,
                        default=list(TARGETS), metavar='CC',
                        help='compute capabilities (default: 90 80)')
    parser.add_argument('--layers', nargs='+', default=None, metavar='LAYER',
                        help='layers to call (default: every layer of '
                        'benchmarks.launches but its PyG baselines)')
    parser.add_argument('--jobs', type=int, default=os.cpu_count() or 1,
                        help='compiler processes (default: one per core)')
    parser.add_argument('--cache', default=osp.join(
        os.environ.get('IKGAT_CACHE', '.cache'), 'gpu_compile'),
        help='where other Triton versions are unpacked')
    parser.add_argument('--output', default=None,
                        help='also write the Markdown table here (and its '
                        'rows as JSON beside it, .json)')
    parser.add_argument('--capture-to', help=argparse.SUPPRESS)
    parser.add_argument('--compile-from', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from benchmarks.launches import BASELINES, layer_names
    layers = args.layers or [name for name in layer_names()
                             if name not in BASELINES]
    unknown = sorted(set(layers) - set(layer_names()))
    if unknown:
        parser.error(f'unknown --layers {unknown}; choose from '
                     f'{layer_names()}')
    if args.capture_to:  # phase 1, in an interpreter process
        with open(args.capture_to, 'w') as file:
            json.dump(capture(layers), file)
        return 0
    if args.compile_from:  # phase 2, in a process of one Triton
        with open(args.compile_from) as file:
            launches = json.load(file)
        with open(args.compile_from + '.out', 'w') as file:
            json.dump(compile_all(launches, args.targets, args.jobs), file)
        return 0
    if args.output is not None:
        try:
            check_writable(args.output)
        except OSError as error:
            parser.error(f'--output: {error}')
    env = {key: value for key, value in os.environ.items()
           if key != 'TRITON_INTERPRET'}
    env.setdefault('TRITON_DEFAULT_FP_FUSION', '1')  # Triton's default
    # Triton's own ptxas log, and a compilation every time (a cached kernel
    # has no log):
    env.update(TRITON_DUMP_PTXAS_LOG='1', TRITON_ALWAYS_COMPILE='1')
    with tempfile.TemporaryDirectory() as folder:
        recorded = osp.join(folder, 'launches.json')
        _run_phase(['--capture-to', recorded, '--layers', *layers],
                   dict(env, TRITON_INTERPRET='1'))
        with open(recorded) as file:
            launches = json.load(file)
        builds = {}
        sources = [None] + [triton_folder(version, args.cache)
                            for version in args.triton]
        for source in sources:
            phase_env = dict(env)
            if source is not None:
                phase_env['PYTHONPATH'] = os.pathsep.join(
                    [source] + [part for part in [env.get('PYTHONPATH')]
                                if part])
            _run_phase(['--compile-from', recorded, '--jobs', str(args.jobs),
                        '--targets', *map(str, args.targets)], phase_env)
            with open(recorded + '.out') as file:
                result = json.load(file)
            version = result[0][str(args.targets[0])]['triton'] if (
                result) else 'none'
            builds[version] = [{int(cc): build for cc, build in row.items()}
                               for row in result]
    command = ' '.join(['python -m benchmarks.gpu_compile']
                       + (sys.argv[1:] if argv is None else list(argv)))
    rows = table_rows(launches, builds, args.targets)
    text, failures = render(rows, command)
    print(text)
    if args.output is not None:
        from benchmarks.harness.results import write_text
        write_text(args.output, text)
        write_text(osp.splitext(args.output)[0] + '.json',
                   json.dumps(rows, indent=1) + '\n')
    for failure in failures:
        print(f'gpu_compile: FAIL {failure}', file=sys.stderr)
    print(f'gpu_compile: {text.splitlines()[-1]}', file=sys.stderr)
    return 1 if failures or not launches else 0


if __name__ == '__main__':
    sys.exit(main())
