r"""Every Triton kernel the layers launch on CUDA, compiled for real GPUs on
a machine without one: ``python -m benchmarks.gpu_compile``.

    python -m benchmarks.gpu_compile --triton 3.6.0 \
        --output benchmarks/results/gpu_compile.md

Triton's interpreter (``TRITON_INTERPRET=1``, the tests' way of running the
kernels on CPU) checks values; it accepts kernels that Triton's compiler
rejects and says nothing of registers.  This check runs the compiler:

1. **Launches from real layer calls, as CUDA makes them.**  Every layer of
   :func:`benchmarks.launches.layer_names` is called, forward and backward
   in training and forward in evaluation, over a grid of shapes and options
   (:func:`layer_calls`: heads x channels, spectral points, attention
   dropout, edge features, bipartite inputs, a shared target row, returned
   attention weights, every edge block from sparse to dense
   neighbourhoods, evaluation draws), inside
   :func:`ikgat.ops.runtime.record_launches`: each launch is
   recorded (kernel, argument types and alignment as Triton specialises
   them, compile-time constants, options) and nothing runs, so the grid
   costs seconds; ``--jobs`` processes share the calls.  The tensors are
   on CPU, so every decision the layers take by device is taken as on CUDA
   (:func:`cuda_decisions`): the fused attention and the Triton node terms
   (``fused_attention='always'``, ``node_path='triton'``), and the
   transformer drop-ins' gathered tables
   (:func:`ikgat.ops.node_tables.uses_tables` judges a CUDA device); the
   drop-ins with spectral points are called again with
   :data:`ikgat.ops.node_tables.ENABLED` cleared (their points kernels).
   The node-term estimate with one slope and the transformer attention in
   float64 (which the layers do not fuse, but the operator takes) come from
   their public functions.  **Coverage:** a layer or option whose launches
   vanish fails the check (:data:`RULES`, :func:`coverage_failures`): every
   call launches a kernel, every layer its fused attention (and its Triton
   node terms, where it has them), and the calls with attention dropout,
   edge features, a shared target row, returned attention weights, tables
   or points launch the kernels' variants for them.  KEPGATConv, without a
   Triton path (PyG's softmax and propagate), is called once a mode and
   must launch nothing (:data:`WITHOUT_TRITON`).
2. **The compiler and ptxas.**  Each distinct launch is compiled with
   ``triton.compile(ASTSource(...), target=GPUTarget('cuda', cc, 32))`` for
   sm_90 (H100) and sm_80 (A100) with the launch's alignment hints
   (``tt.divisibility``: the pointers and integers divisible by 16, as
   Triton specialises them) and options, and the log of Triton's own
   ``ptxas -v`` run (``TRITON_DUMP_PTXAS_LOG``) gives the registers per
   thread and the spill bytes; the occupancy (blocks and warps per SM)
   follows from the registers, the warps and the shared memory.  Launches
   that are one build to Triton (its own cache key,
   :func:`build_key`: the kernel's source with its jitted dependencies, the
   signature, constants, alignment, options, the Triton and ptxas versions
   and the target) are compiled once; the table has a row per build.
   ``--triton VERSION`` compiles with another Triton too (downloaded once
   with pip into ``--cache``): CI's Triton and the oldest supported one
   (:data:`~ikgat.ops.runtime.MIN_TRITON`).
3. **The verdict.**  A build fails on a compile error or on any spill.
   Every launch is built as :func:`~ikgat.ops.runtime.launch`
   runs it, with ``.maxnreg`` :data:`MAX_REGISTERS`, and ptxas keeps to the
   cap: a kernel that needs more registers spills under it, so spill under
   the cap is the gate, and the registers are reported, not judged.  No
   kernel is excepted.  The command prints one table and exits with status
   1 on a failure (of a build, or of coverage).
4. **The verdict cache.**  Each build's result is stored under ``--cache``
   (``verdicts/`` of ``$IKGAT_CACHE/gpu_compile``, else of
   ``.cache/gpu_compile``) by
   :func:`build_key` and the check's own :data:`VERDICT_FORMAT`: a rerun
   compiles only the builds that changed, a clean machine (or
   ``--recompile``) compiles everything.  The verdicts of the committed
   results, :data:`STORED` (written with ``--output``), are read first: a
   clean clone compiles only the builds whose key is not there (a kernel,
   option or Triton version that changed since), so that CI checks every
   build in minutes; ``--stored ''`` (or ``--recompile``) leaves them out.
"""
import argparse
import contextlib
import hashlib
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
from typing import (
    Callable,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from ikgat.atomic_writes import check_writable
from ikgat.ops.runtime import MAX_REGISTERS

#: The targets: compute capability 9.0 (H100) and 8.0 (A100).
TARGETS = (90, 80)
#: The verdicts of the committed results, by :func:`build_key` (see the
#: module docstring).
STORED = osp.join('benchmarks', 'results', 'gpu_compile_verdicts.json')

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
#: The version of what a stored verdict holds and how it was read from the
#: compiler (part of its cache key): raise it when :func:`compile_launch`
#: changes.
VERDICT_FORMAT = 1
# Node counts not divisible by 16 (Triton specialises on it; real graphs
# have any count).
FEATURES, NODES = 16, 45

# H100 / A100 per SM: registers, threads, blocks, shared memory (bytes).
_SM_LIMITS = {90: (65536, 2048, 32, 228 * 1024),
              80: (65536, 2048, 32, 164 * 1024)}

#: The modules of the fused attention's kernels, and of the node terms'.
ATTENTION_MODULES = ('ikgat.ops.gat_attention_triton',
                     'ikgat.ops.transformer_attention_triton',
                     'ikgat.ops.transformer_fourier')
NODE_TERMS_MODULE = 'ikgat.ops.node_terms_triton'


def _constant(name: str, value) -> Callable[[dict], bool]:
    return lambda launch: launch['constexprs'].get(name) == value


#: What the calls of a layer must launch, by rule: the calls of a layer
#: that name a rule (:attr:`Call.rules`) must, together, make at least one
#: launch that it accepts, or the check fails naming the layer and the rule
#: (:func:`coverage_failures`).  Besides, every call must launch a kernel,
#: but those of :data:`NO_KERNEL`, which must launch none.
RULES: Dict[str, Tuple[str, Callable[[dict], bool]]] = {
    'fused attention': (
        'kernel of the fused attention (' + ', '.join(ATTENTION_MODULES)
        + ')', lambda launch: launch['module'] in ATTENTION_MODULES),
    'node terms': (f'kernel of the Triton node terms ({NODE_TERMS_MODULE})',
                   lambda launch: launch['module'] == NODE_TERMS_MODULE),
    'training': ('backward kernel', lambda launch: re.match(
        r'(backward|grad)_', launch['name']) is not None),
    'dropout': ('kernel with attention dropout (HAS_DROPOUT=True)',
                _constant('HAS_DROPOUT', True)),
    'edge': ('kernel with edge features (HAS_GATE=True)',
             _constant('HAS_GATE', True)),
    'shared target': ('kernel on one target row (BROADCAST=1)',
                      _constant('BROADCAST', 1)),
    'attention weights': ('kernel of the attention weights (alpha_kernel)',
                          lambda launch: launch['name'] == 'alpha_kernel'),
    'tables': ('kernel on gathered tables '
               '(ikgat.ops.transformer_attention_triton)',
               lambda launch: launch['module']
               == 'ikgat.ops.transformer_attention_triton'),
    'points': ('kernel on spectral points (ikgat.ops.transformer_fourier)',
               lambda launch: launch['module']
               == 'ikgat.ops.transformer_fourier'),
    'float64': ('float64 kernel', lambda launch: '*fp64' in
                launch['signature'].values()),
}
#: The rule of the calls that must launch no kernel: those of the layers
#: of :data:`WITHOUT_TRITON`.
NO_KERNEL = 'no kernel'
#: Layers without a Triton path on any device (KEPGATConv: PyG's softmax
#: and propagate): called once a mode, and they must launch nothing (a
#: layer that gains kernels fails the check until the grid calls it).
WITHOUT_TRITON = ('KEPGATConv', )


class Call(NamedTuple):
    r"""One call of the grid."""
    label: str  #: what it calls (layer, shape, mode, options)
    layer: str  #: the layer, or public function, it calls
    rules: Tuple[str, ...]  #: the :data:`RULES` its launches count for
    run: Callable[[], None]  #: the call itself


# ---------------------------------------------------------------------------
# 1. Launches from layer calls.


@contextlib.contextmanager
def cuda_decisions(tables: bool = True) -> Iterator[None]:
    r"""The layers take their CUDA decisions on CPU tensors: the fused
    attention of the transformer drop-ins takes the gathered tables of
    :mod:`ikgat.ops.node_tables` when :obj:`tables` (CUDA's default; the
    points kernels when :data:`~ikgat.ops.node_tables.ENABLED` is cleared):
    :func:`~ikgat.ops.node_tables.uses_tables` judges the tensor's twin on a
    CUDA device.  (The other device decisions are forced by the layers'
    options: ``fused_attention='always'``, ``node_path='triton'``.)"""
    from ikgat.ops import node_tables
    saved = node_tables.uses_tables, node_tables.ENABLED
    rule = saved[0]
    node_tables.uses_tables = lambda x: rule(_OnCuda(x))
    node_tables.ENABLED = tables
    try:
        yield
    finally:
        node_tables.uses_tables, node_tables.ENABLED = saved


class _OnCuda:
    r"""A tensor as a device rule sees it on CUDA."""
    def __init__(self, tensor):
        self._tensor = tensor

    @property
    def device(self):
        import torch
        return torch.device('cuda', 0)

    is_cuda = True

    def __getattr__(self, name):
        return getattr(self._tensor, name)


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


def _node_terms(name: str) -> bool:
    r"""Whether layer :obj:`name` is built with the Triton node terms."""
    from benchmarks.launches import is_transformer
    return _spectral(name) and not is_transformer(name) and (
        name != 'KEPGATConv')


def layer_calls(layers: List[str]) -> Iterator[Call]:
    r"""Every layer call of the grid (see the module docstring): the full
    grid of shapes x spectral points x modes at 8 in-edges, then each
    option varied alone at 8 heads x 8 channels and every degree of
    :data:`DEGREES`; the transformer drop-ins over :data:`TRANSFORMER_GRID`
    (implicit and MIKAN in evaluation only,
    :data:`TRANSFORMER_DRAWS_ONLY`), those with spectral points once on
    gathered tables (CUDA's path) and once on the points."""
    import torch

    from benchmarks.launches import is_transformer

    def call(name, heads, channels, training, dropout=0.0, points=64,
             degree=8, edge=False, bipartite=False, shared_target=False,
             attention=False, tables=None):
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
            with cuda_decisions(tables is not False):
                _step(layer, x, edge_index, training, edge_attr, attention)
        label = (f'{name} {heads}x{channels} '
                 + ('train' if training else 'eval')
                 + f' dropout={dropout:g} R={points} degree={degree}'
                 + ' edge' * edge + ' bipartite' * bipartite
                 + ' x_dst=None' * shared_target + ' alpha' * attention
                 + ('' if tables is None else
                    ' tables' if tables else ' points'))
        rules = (['fused attention'] + ['node terms'] * _node_terms(name)
                 + ['training'] * training + ['dropout'] * (dropout > 0)
                 + ['edge'] * edge + ['shared target'] * shared_target
                 + ['attention weights'] * attention
                 + ([] if tables is None else
                    ['tables' if tables else 'points']))
        return Call(label, name, tuple(rules), run)

    all_modes = [(True, dropout) for dropout in DROPOUTS] + [(False, 0.0)]
    for name in layers:
        if name in WITHOUT_TRITON:
            for training, dropout in ((True, 0.6), (False, 0.0)):
                label, layer, _, run = call(name, 8, 8, training, dropout)
                yield Call(label, layer, (NO_KERNEL, ), run)
            continue
        points_grid = SPECTRAL_POINTS if _spectral(name) else (64, )
        grid = [(heads, channels, points) for heads, channels in SHAPES
                for points in points_grid]
        modes, degrees = all_modes, DEGREES
        # The drop-ins with spectral points: on gathered tables (CUDA's
        # default), and on the points (node_tables.ENABLED cleared).
        table_modes = [None]
        if is_transformer(name):
            grid = [(heads, channels, points if _spectral(name) else 64)
                    for heads, channels, points in TRANSFORMER_GRID]
            degrees = TRANSFORMER_DEGREES
            if _spectral(name):
                table_modes = [True, False]
        if name in TRANSFORMER_DRAWS_ONLY:
            # Launches that IKTransformerConv-direct already makes: only
            # the evaluation draws (S H heads) are their own.
            modes, degrees = [(False, 0.0)], ()
        for tables in table_modes:
            for heads, channels, points in grid:
                for training, dropout in modes:
                    yield call(name, heads, channels, training, dropout,
                               points, tables=tables)
            if name in TRANSFORMER_DRAWS_ONLY:
                continue
            for training, dropout in modes:
                for degree in degrees:
                    yield call(name, 8, 8, training, dropout, degree=degree,
                               tables=tables)
                if is_transformer(name):
                    # Edge features, returned weights: the PyTorch path; a
                    # missing x_dst: no queries.
                    yield call(name, 8, 8, training, dropout, bipartite=True,
                               tables=tables)
                    continue
                # Each option at every degree: the edge block follows the
                # degree, and the options choose the kernels' variants.
                for degree in degrees:
                    for option in ('edge', 'bipartite', 'shared_target'):
                        yield call(name, 8, 8, training, dropout,
                                   degree=degree, **{option: True})
                    if training:
                        yield call(name, 8, 8, training, dropout,
                                   degree=degree, attention=True)
                        yield call(name, 8, 8, training, dropout,
                                   degree=degree, edge=True, attention=True)


def one_slope_calls() -> Iterator[Call]:
    r"""The node-term estimate with one slope, through its public
    function (the layers use two)."""
    import torch

    from ikgat.ops.node_terms import fused_fourier_log_similarity
    for heads, channels in SHAPES:
        def run(heads=heads, channels=channels):
            x = torch.randn(NODES, heads, channels, requires_grad=True)
            anchor = torch.randn(heads, 2 * channels, requires_grad=True)
            points = [torch.randn(heads, 64, 2 * channels,
                                  requires_grad=True)]
            fused_fourier_log_similarity(
                x, anchor, True, torch.ones(1), points, 1e-5,
                node_path='triton').sum().backward()
        yield Call(f'fused_fourier_log_similarity {heads}x{channels} T=1',
                   'fused_fourier_log_similarity', ('node terms', 'training'),
                   run)


def float64_calls() -> Iterator[Call]:
    r"""The transformer attention in float64 through its public function,
    on tables (both links) and on spectral points, with and without
    attention dropout: the layers fuse float32 only, but the operator takes
    float64, and Triton types each float64 launch anew (a loop-carried tile
    that turns float64, or a helper whose branches return other dtypes,
    does not build, where the interpreter runs it)."""
    import torch

    from ikgat.ops.transformer_attention import (
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
                rules = ('float64', 'training',
                         'points' if points else 'tables') + (
                             ('dropout', ) if dropout else ())
                yield Call(f'fused_transformer_attention float64 {link} '
                           f'R={points} dropout={dropout:g}',
                           'fused_transformer_attention float64', rules, run)


def all_calls(layers: List[str]) -> List[Call]:
    r"""The calls of the check: :func:`layer_calls`, then
    :func:`one_slope_calls` and :func:`float64_calls`."""
    return (list(layer_calls(layers)) + list(one_slope_calls())
            + list(float64_calls()))


def capture_part(layers: List[str], part: int = 0, parts: int = 1) -> dict:
    r"""Run every :obj:`parts`-th call of :func:`all_calls` from
    :obj:`part` on (on CPU tensors with ``TRITON_INTERPRET=1``, so that the
    layers take their Triton path, with :func:`cuda_decisions`; nothing is
    launched): ``{'calls': [{'index', 'label', 'layer',
    'rules', 'keys'}], 'launches': {key: launch}}``, the keys of each
    call's launches in order."""
    import warnings

    from ikgat.ops.runtime import record_launches
    calls = all_calls(layers)
    records, launches = [], {}
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for index in range(part, len(calls), parts):
            call = calls[index]
            with record_launches() as recorded:
                call.run()
            for launch in recorded:
                launches.setdefault(launch.key, dict(
                    launch._asdict(), aligned=list(launch.aligned),
                    key=launch.key))
            records.append(dict(index=index, label=call.label,
                                layer=call.layer, rules=list(call.rules),
                                keys=[launch.key for launch in recorded]))
    return dict(calls=records, launches=launches)


def merge_parts(parts: Sequence[dict]) -> Tuple[List[dict], List[dict]]:
    r"""The calls of :func:`capture_part`'s parts in the order of
    :func:`all_calls`, and the distinct launches (kernel, types,
    constants, alignment, options) in the order the calls first made them,
    each with its first call and the number of launches made."""
    calls = sorted((call for part in parts for call in part['calls']),
                   key=lambda call: call['index'])
    recorded = {key: launch for part in parts
                for key, launch in part['launches'].items()}
    distinct: OrderedDict[str, dict] = OrderedDict()
    for call in calls:
        for key in call['keys']:
            entry = distinct.setdefault(key, dict(
                recorded[key], calls=0, first=call['label']))
            entry['calls'] += 1
    return calls, list(distinct.values())


def coverage_failures(calls: Sequence[dict],
                      launches: Sequence[dict]) -> List[str]:
    r"""Why the captured launches do not cover the grid (empty if they
    do): calls of a layer that launched nothing, or a layer whose calls of
    a rule of :data:`RULES` made no launch it accepts (their launches
    vanished: the layer, or the option, no longer takes its Triton path),
    or a call of :data:`NO_KERNEL` that launched a kernel."""
    by_key = {launch['key']: launch for launch in launches}
    layers: OrderedDict[str, List[dict]] = OrderedDict()
    for call in calls:
        layers.setdefault(call['layer'], []).append(call)
    failures = []
    for layer, members in layers.items():
        silent = [call for call in members if NO_KERNEL in call['rules']]
        loud = [call for call in silent if call['keys']]
        if loud:
            names = sorted({by_key[key]['name'] for call in loud
                            for key in call['keys']})
            failures.append(f"{layer}: launched {', '.join(names)} (e.g. "
                            f"{loud[0]['label']}), but the grid expects no "
                            f"kernel of it (WITHOUT_TRITON): call it over "
                            f"the grid")
        members = [call for call in members if call not in silent]
        empty = [call for call in members if not call['keys']]
        if empty:
            failures.append(f"{layer}: {len(empty)} of its {len(members)} "
                            f"calls launched no kernel (e.g. "
                            f"{empty[0]['label']}): their launches vanished "
                            f"from the capture")
        if members and len(empty) == len(members):
            continue  # the whole layer vanished: said once
        rules: OrderedDict[str, List[dict]] = OrderedDict()
        for call in members:
            for rule in call['rules']:
                rules.setdefault(rule, []).append(call)
        for rule, group in rules.items():
            what, accepts = RULES[rule]
            if not any(accepts(by_key[key]) for call in group
                       for key in call['keys']):
                failures.append(f"{layer}: its {len(group)} calls with "
                                f"'{rule}' launched no {what} (e.g. "
                                f"{group[0]['label']})")
    return failures


# ---------------------------------------------------------------------------
# 2. The compiler and ptxas (a process without the interpreter).


def _source(launch: dict):
    r"""Triton's ``ASTSource`` of a recorded launch: the jitted kernel, its
    signature and constants, and its alignment hints as attributes."""
    from triton.compiler import ASTSource

    from ikgat.ops.runtime import jitted_kernel
    kernel = jitted_kernel(launch['module'], launch['name'])
    signature = launch['signature']
    attrs = {(index, ): [['tt.divisibility', 16]]
             for index, name in enumerate(signature)
             if name in launch['aligned']}
    return ASTSource(kernel, signature, constexprs=launch['constexprs'],
                     attrs=attrs)


def build_key(launch: dict, cc: int) -> str:
    r"""The build of :obj:`launch` for ``sm_<cc>`` as Triton's own cache
    names it (``triton.runtime.cache.get_cache_key``: Triton's version and
    sources, the kernel's source with its jitted dependencies
    (``JITFunction.cache_key``), the alignment attributes, signature and
    constants, the ptxas version and target, the options and the
    environment that Triton says changes a build), with
    :data:`VERDICT_FORMAT`: launches of one key are one build, and a
    stored verdict of the key is this build's."""
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import get_cache_key
    source = _source(launch)
    backend = make_backend(GPUTarget('cuda', cc, 32))
    options = backend.parse_options(dict(launch['options'],
                                         **source.parse_options()))
    key = get_cache_key(source, backend, options,
                        env_vars=get_cache_invalidating_env_vars())
    return hashlib.sha256(f'{VERDICT_FORMAT}-{key}'.encode()).hexdigest()


def compile_launch(launch: dict, cc: int) -> dict:
    r"""Compile one recorded launch for ``sm_<cc>``: registers, spill
    bytes, shared memory and warps from the ``ptxas -v`` log of Triton's own
    ptxas run (``TRITON_DUMP_PTXAS_LOG``, set by :func:`main`), or the
    compiler's error."""
    import io

    import triton
    from triton.backends.compiler import GPUTarget

    from ikgat.ops.runtime import build_error_reason
    result = dict(cc=cc, triton=triton.__version__)
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            compiled = triton.compile(
                _source(launch), target=GPUTarget('cuda', cc, 32),
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
                warps=int(compiled.metadata.num_warps),
                **sass_profile(compiled.asm['cubin']))


def sass_profile(cubin: bytes) -> dict:
    r"""The machine code's shape, for the cost model's issue term
    (:mod:`benchmarks.gpu_model`): ``instructions``, the SASS instructions
    of the kernel (each issued once per warp where it runs), and ``loops``,
    the ``[first, last]`` instruction indices of each loop (a backward
    branch), outermost first; from the ``nvdisasm`` that Triton bundles.
    Empty where it is missing."""
    import tempfile

    import triton
    nvdisasm = osp.join(osp.dirname(triton.__file__), 'backends', 'nvidia',
                        'bin', 'nvdisasm')
    if not osp.exists(nvdisasm):
        return {}
    with tempfile.NamedTemporaryFile(suffix='.cubin') as file:
        file.write(cubin)
        file.flush()
        sass = subprocess.run([nvdisasm, '-c', file.name], check=True,
                              capture_output=True, text=True).stdout
    labels, instructions = {}, []
    for line in sass.splitlines():
        label = re.match(r'\s*\.(L_x_\d+):', line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        instruction = re.search(r'/\*[0-9a-f]{4,}\*/\s+(.*?);', line)
        if instruction:
            instructions.append(instruction.group(1))
    loops = []
    for index, text in enumerate(instructions):
        branch = re.search(r'BRA.*\.(L_x_\d+)', text)
        # (not the branch to itself that ends a kernel)
        if branch and labels.get(branch.group(1), index) < index:
            loops.append([labels[branch.group(1)], index])
    loops.sort(key=lambda span: (span[0], -span[1]))
    return dict(instructions=len(instructions), loops=loops)


def _compile_one(job):
    return compile_launch(*job)


def _verdict_path(cache: str, key: str) -> str:
    return osp.join(cache, 'verdicts', key[:2], key + '.json')


def _load_verdict(cache: Optional[str], key: str) -> Optional[dict]:
    if cache is None:
        return None
    try:
        with open(_verdict_path(cache, key)) as file:
            return json.load(file)
    except (OSError, ValueError):  # none stored, or a torn file
        return None


def _store_verdict(cache: Optional[str], key: str, build: dict) -> None:
    if cache is None:
        return
    path = _verdict_path(cache, key)
    os.makedirs(osp.dirname(path), exist_ok=True)
    partial = f'{path}.{os.getpid()}.partial'
    with open(partial, 'w') as file:
        json.dump(build, file)
    os.replace(partial, path)


def load_stored(path: Optional[str]) -> Dict[str, dict]:
    r"""The verdicts of the committed results (:data:`STORED`) by build
    key; none if :obj:`path` is empty or missing."""
    if not path or not osp.exists(path):
        return {}
    with open(path) as file:
        return json.load(file)


def compile_all(launches: List[dict], targets, jobs: int,
                cache: Optional[str] = None, recompile: bool = False,
                stored: Optional[Dict[str, dict]] = None
                ) -> List[Dict[str, dict]]:
    r"""Every launch for every target: per launch, ``{'keys': {cc: key},
    'builds': {cc: build}}``.  Each distinct build (:func:`build_key`) is
    compiled once, :obj:`jobs` processes at a time, unless its verdict is
    in :obj:`stored` (the committed results) or stored under :obj:`cache`
    (and not :obj:`recompile`); what is compiled is stored there."""
    keys = [{cc: build_key(launch, cc) for cc in targets}
            for launch in launches]
    work: OrderedDict[str, Tuple[dict, int]] = OrderedDict()
    for launch, launch_keys in zip(launches, keys):
        for cc, key in launch_keys.items():
            work.setdefault(key, (launch, cc))
    stored = {} if recompile else stored or {}
    done = {} if recompile else {
        key: build for key in work
        for build in [stored.get(key) or _load_verdict(cache, key)]
        if build is not None}
    todo = [key for key in work if key not in done]

    def compiled() -> Iterator[dict]:
        if jobs <= 1 or len(todo) <= 1:
            yield from (_compile_one(work[key]) for key in todo)
            return
        with ProcessPoolExecutor(min(jobs, len(todo))) as pool:
            yield from pool.map(_compile_one, [work[key] for key in todo])

    start = time.perf_counter()
    for key, build in zip(todo, compiled()):  # stored as they come
        _store_verdict(cache, key, build)
        done[key] = build
    import triton
    print(f'gpu_compile: Triton {triton.__version__}: {len(launches)} '
          f'launches x {len(targets)} targets, {len(work)} builds: '
          f'{len(work) - len(todo)} stored verdicts, {len(todo)} compiled '
          f'in {time.perf_counter() - start:.1f} s ({jobs} processes)',
          file=sys.stderr, flush=True)
    return [dict(keys={str(cc): key for cc, key in launch_keys.items()},
                 builds={str(cc): done[key]
                         for cc, key in launch_keys.items()})
            for launch_keys in keys]


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
    r"""Why a build fails the check (:obj:`None` if it passes): a compile
    error, or any spill.  The registers are not judged: every launch is
    built under its register cap (``.maxnreg``, :data:`MAX_REGISTERS`),
    which ptxas keeps to by spilling, so the spill is the gate."""
    if 'error' in build:
        return build['error']
    if build['spill']:
        return f"spills {build['spill']} B"
    return None


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


# ---------------------------------------------------------------------------
# 3. Orchestration: capture in interpreter processes, compile in processes
# of one Triton each, one table.


def _run_phase(args: List[str], env: Dict[str, str]) -> None:
    subprocess.run([sys.executable, '-m', 'benchmarks.gpu_compile', *args],
                   env=env, check=True)


def capture(layers: List[str], jobs: int, env: Dict[str, str],
            folder: str) -> Tuple[List[dict], List[dict]]:
    r"""The calls and distinct launches of :func:`merge_parts`, the calls
    shared between :obj:`jobs` interpreter processes."""
    parts = max(1, jobs)
    paths = [osp.join(folder, f'capture-{part}.json')
             for part in range(parts)]
    processes = [subprocess.Popen(
        [sys.executable, '-m', 'benchmarks.gpu_compile', '--capture-to',
         path, '--part', f'{part}/{parts}', '--layers', *layers],
        env=dict(env, TRITON_INTERPRET='1'))
        for part, path in enumerate(paths)]
    codes = [process.wait() for process in processes]
    for process, code in zip(processes, codes):
        if code:
            raise subprocess.CalledProcessError(code, process.args)
    loaded = []
    for path in paths:
        with open(path) as file:
            loaded.append(json.load(file))
    return merge_parts(loaded)


def _version_key(version: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r'\d+', version)[:3])


def _unaligned(launch: dict) -> List[str]:
    r"""The pointer and integer arguments of :obj:`launch` not divisible by
    16 (Triton specialises the others)."""
    return [name for name, kind in launch['signature'].items()
            if (kind.startswith('*') or re.fullmatch(r'[iu](8|16|32|64)',
                                                      kind))
            and name not in launch['aligned']]


def table_rows(launches: List[dict],
               builds: Dict[str, List[Dict[str, dict]]], targets
               ) -> List[dict]:
    r"""One row per distinct build (the launches whose :func:`build_key`
    agree for the first Triton of :obj:`builds`, that is, for every
    target): its kernel, constants, alignment, first call and the build of
    each Triton version and target (``'3.9.0 sm_90'``), with the resident
    warps per SM and the verdict (:obj:`None`: pass)."""
    versions = sorted(builds, key=_version_key)
    first = next(iter(builds))
    groups: OrderedDict[tuple, List[int]] = OrderedDict()
    for index in range(len(launches)):
        key = tuple(builds[first][index]['keys'][str(cc)] for cc in targets)
        groups.setdefault(key, []).append(index)
    rows = []
    for indices in groups.values():
        launch = launches[indices[0]]
        row = dict(kernel=launch['name'], module=launch['module'],
                   constexprs=launch['constexprs'],
                   unaligned=_unaligned(launch), options=launch['options'],
                   first=launch['first'],
                   calls=sum(launches[index]['calls'] for index in indices),
                   launches=len(indices), builds={})
        for version in versions:
            for cc in targets:
                build = dict(builds[version][indices[0]]['builds'][str(cc)])
                if 'error' not in build:
                    build['resident_warps'] = build['warps'] * occupancy(
                        build['registers'], build['warps'], build['shared'],
                        cc)
                build['verdict'] = verdict(build)
                row['builds'][f'{version} sm_{cc}'] = build
        rows.append(row)
    return rows


def render(rows: List[dict], command: str, num_launches: Optional[int] = None
           ) -> Tuple[str, List[str]]:
    r"""The Markdown table (one row per distinct build, a column per
    Triton version and target: registers / spill bytes / resident warps
    per SM) and the failures."""
    import torch

    from benchmarks.harness.provenance import git_commit
    columns = list(rows[0]['builds']) if rows else []
    versions = list(OrderedDict.fromkeys(column.split()[0]
                                         for column in columns))
    if num_launches is None:
        num_launches = sum(row.get('launches', 1) for row in rows)
    failures = []
    lines = [
        '# Triton kernels compiled for sm_90 and sm_80', '',
        f'Command: `{command}`; git commit {git_commit()}; torch '
        f'{torch.__version__}; Triton {", ".join(versions)}; no GPU '
        f'(Triton\'s compiler and the ptxas it bundles).', '',
        'One row per distinct build of the launches that the layers made '
        'over the grid of `benchmarks/gpu_compile.py`, with the decisions '
        'CUDA takes (the first call that made it, and how many launches '
        'did); its constants, and its unaligned arguments: the pointers '
        'and integers not divisible by 16 (Triton specialises on it). Each '
        'cell: '
        'registers per thread / spill bytes / resident warps per SM (of '
        '64). The check: it compiles, and nothing spills under the '
        f'launch\'s register cap (`.maxnreg` {MAX_REGISTERS}, which ptxas '
        'keeps to by spilling).', '',
        '| kernel | constants | launched by (calls) | '
        + ' | '.join(columns) + ' | verdict |',
        '|---|---|---|' + '---:|' * len(columns) + '---|']
    for row in rows:
        name = row['kernel']
        constants = ', '.join(f'{key}={value}' for key, value in
                              row['constexprs'].items())
        if row.get('unaligned'):
            constants += '; unaligned: ' + ', '.join(row['unaligned'])
        cells, problems = [], []
        for column, build in row['builds'].items():
            cells.append('error' if 'error' in build else
                         f"{build['registers']} / {build['spill']} / "
                         f"{build['resident_warps']}")
            if build['verdict']:
                problems.append(f"{column}: {build['verdict']}")
        failures += [f"{row.get('module', '')}.{name}[{constants}] {problem}"
                     for problem in problems]
        status = '; '.join(problems) if problems else 'pass'
        lines.append(f"| `{name}` | {constants} | {row['first']} "
                     f"({row['calls']}) | " + ' | '.join(cells)
                     + f' | {status} |')
    lines += ['', f'{num_launches} launches, {len(rows)} builds x '
              f'{len(columns)} (Triton, target): '
              + (f'{len(failures)} failures.' if failures else
                 'all compile, none spills.')]
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
                        help='processes that capture, and that compile '
                        '(default: one per core)')
    parser.add_argument('--cache', default=osp.join(
        os.environ.get('IKGAT_CACHE', '.cache'), 'gpu_compile'),
        help='where other Triton versions are unpacked and the verdicts '
        'stored (default: $IKGAT_CACHE/gpu_compile, else '
        '.cache/gpu_compile)')
    parser.add_argument('--stored', default=STORED,
                        help='verdicts of the committed results, read '
                        'first and written with --output (default: '
                        f'{STORED}; \'\' for none)')
    parser.add_argument('--recompile', action='store_true',
                        help='compile every build, whatever is stored')
    parser.add_argument('--output', default=None,
                        help='also write the Markdown table here (and its '
                        'rows as JSON beside it, .json)')
    parser.add_argument('--capture-to', help=argparse.SUPPRESS)
    parser.add_argument('--part', default='0/1', help=argparse.SUPPRESS)
    parser.add_argument('--compile-from', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from benchmarks.launches import BASELINES, layer_names
    layers = args.layers or [name for name in layer_names()
                             if name not in BASELINES]
    unknown = sorted(set(layers) - set(layer_names()))
    if unknown:
        parser.error(f'unknown --layers {unknown}; choose from '
                     f'{layer_names()}')
    if args.capture_to:  # phase 1, in interpreter processes
        part, parts = map(int, args.part.split('/'))
        if parts > 1:  # one thread a process, one process a core
            import torch
            torch.set_num_threads(1)
        with open(args.capture_to, 'w') as file:
            json.dump(capture_part(layers, part, parts), file)
        return 0
    if args.compile_from:  # phase 2, in a process of one Triton
        with open(args.compile_from) as file:
            launches = json.load(file)
        with open(args.compile_from + '.out', 'w') as file:
            json.dump(compile_all(launches, args.targets, args.jobs,
                                  args.cache, args.recompile,
                                  load_stored(args.stored)), file)
        return 0
    if args.output is not None:
        try:
            check_writable(args.output)
        except OSError as error:
            parser.error(f'--output: {error}')
    env = {key: value for key, value in os.environ.items()
           if key != 'TRITON_INTERPRET'}
    env.setdefault('TRITON_DEFAULT_FP_FUSION', '1')  # Triton's default
    # Triton's own ptxas log, and a compilation every time (a kernel in
    # Triton's cache has no log):
    env.update(TRITON_DUMP_PTXAS_LOG='1', TRITON_ALWAYS_COMPILE='1')
    with tempfile.TemporaryDirectory() as folder:
        # Triton's artefacts of GPUs this machine lacks stay out of its
        # cache:
        env['TRITON_CACHE_DIR'] = osp.join(folder, 'triton')
        start = time.perf_counter()
        calls, launches = capture(layers, args.jobs, env, folder)
        coverage = coverage_failures(calls, launches)
        print(f'gpu_compile: capture {time.perf_counter() - start:.1f} s '
              f'({max(1, args.jobs)} processes): {len(calls)} calls, '
              f'{len(launches)} distinct launches', file=sys.stderr,
              flush=True)
        for failure in coverage:
            print(f'gpu_compile: FAIL {failure}', file=sys.stderr,
                  flush=True)
        recorded = osp.join(folder, 'launches.json')
        with open(recorded, 'w') as file:
            json.dump(launches, file)
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
                        '--cache', args.cache, '--stored', args.stored,
                        '--targets', *map(str, args.targets)]
                       + ['--recompile'] * args.recompile, phase_env)
            with open(recorded + '.out') as file:
                result = json.load(file)
            version = result[0]['builds'][str(args.targets[0])][
                'triton'] if result else 'none'
            builds[version] = result
    command = ' '.join(['python -m benchmarks.gpu_compile']
                       + (sys.argv[1:] if argv is None else list(argv)))
    rows = table_rows(launches, builds, args.targets) if launches else []
    text, failures = render(rows, command, len(launches))
    print(text)
    if args.output is not None:
        from benchmarks.harness.results import write_text
        write_text(args.output, text)
        write_text(osp.splitext(args.output)[0] + '.json',
                   json.dumps(rows, indent=1) + '\n')
        if args.stored:  # this run's verdicts, and only those
            verdicts = {key: result['builds'][cc]
                        for result_rows in builds.values()
                        for result in result_rows
                        for cc, key in result['keys'].items()}
            write_text(args.stored, json.dumps(verdicts, indent=0,
                                               sort_keys=True) + '\n')
    for failure in failures:
        print(f'gpu_compile: FAIL {failure}', file=sys.stderr)
    print(f'gpu_compile: {text.splitlines()[-1]}'
          + (f' {len(coverage)} coverage failures (above).' if coverage
             else ''), file=sys.stderr)
    return 1 if failures or coverage or not launches else 0


if __name__ == '__main__':
    sys.exit(main())
