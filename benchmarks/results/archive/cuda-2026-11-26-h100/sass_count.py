r"""Record of this session (not maintained, linted or imported; runs on CPU,
no GPU): the warp-instructions the three random-feature kernels issue per
arxiv-size step, from their SASS (Triton 3.6, sm_90) and the loops' trip
counts, for each tiling of the sweep (run2_sweep.md), beside the measured
layer step.

    TRITON_INTERPRET=1 python sass_count.py capture /tmp/arxiv.json
    PYTHONPATH=<Triton 3.6 folder> python sass_count.py count /tmp/arxiv.json

(The Triton 3.6 folder: ``.cache/gpu_compile/triton-3.6.0`` of
``python -m benchmarks.gpu_compile --triton 3.6.0``.)  A program's
instructions: its SASS outside the edge loop (loops over the sets of points
counted twice, m = 2), plus the edge loop's body (inner loops twice) times
the expected tiles per node, E[ceil(deg / BLOCK_E)] for Poisson degrees of
mean E/N; times the warps and the N programs.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import warnings

warnings.simplefilter('ignore')
N, E, SETS = 169343, 1166243, 2
DEG = E / N
VARIANTS = {'default': {}, 'E2 w2': dict(BLOCK_E=2, num_warps=2),
            'E2 w1': dict(BLOCK_E=2, num_warps=1),
            'E4 w4': dict(BLOCK_E=4, num_warps=4),
            'E4 w2': dict(BLOCK_E=4, num_warps=2),
            'E8 w4': dict(BLOCK_E=8, num_warps=4),
            'E8 w8': dict(BLOCK_E=8, num_warps=8),
            'R32x2 E2 w4': dict(BLOCK_R=32, CHUNKS=2, BLOCK_E=2, num_warps=4)}
#: run2_sweep.md, one layer forward + backward (ms).
MEASURED = {'default': 59.580, 'E2 w2': 55.125, 'E2 w1': 58.403,
            'E4 w4': 52.601, 'E4 w2': 52.175, 'E8 w4': 55.617,
            'E8 w8': 66.366, 'R32x2 E2 w4': 56.002}


def capture(path):
    import torch

    import benchmarks.gpu_compile as gc
    from ikgat.kernels.triton_runtime import record_launches
    torch.manual_seed(0)
    layer = gc._build('IKTransformerConv-direct', 8, 8, 0.0, 64)
    nodes = 400
    edge_index = torch.randint(0, nodes, (2, int(nodes * DEG)))
    with record_launches() as launches:
        gc._step(layer, torch.randn(nodes, gc.FEATURES), edge_index, True)
    json.dump([dict(l._asdict(), aligned=list(l.aligned)) for l in launches
               if 'fourier_pairs' in l.module], open(path, 'w'), default=str)


def tiles(block):
    total, p = 0.0, math.exp(-DEG)
    for k in range(80):
        if k > 0:
            p *= DEG / k
        total += p * math.ceil(k / block)
    return total


def warp_instructions(launch, over):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from ikgat.kernels.triton_runtime import jitted_kernel
    constants, options = dict(launch['constexprs']), dict(launch['options'])
    for key, value in over.items():
        if key == 'num_warps':
            options[key] = value
        else:
            constants[key] = value
    attrs = {(i, ): [['tt.divisibility', 16]]
             for i, name in enumerate(launch['signature'])
             if name in launch['aligned']}
    compiled = triton.compile(
        ASTSource(jitted_kernel(launch['module'], launch['name']),
                  launch['signature'], constexprs=constants, attrs=attrs),
        target=GPUTarget('cuda', 90, 32), options=options)
    with tempfile.NamedTemporaryFile(suffix='.cubin', delete=False) as f:
        f.write(compiled.asm['cubin'])
    nvdisasm = os.path.join(os.path.dirname(triton.__file__),
                            'backends/nvidia/bin/nvdisasm')
    sass = subprocess.run([nvdisasm, '-c', f.name], capture_output=True,
                          text=True).stdout
    labels, instructions = {}, []
    for line in sass.splitlines():
        label = re.match(r'\s*\.(L_x_\d+):', line)
        if label:
            labels[label.group(1)] = len(instructions)
            continue
        instruction = re.search(r'/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
        if instruction:
            instructions.append(instruction.group(2))
    loops = []
    for index, text in enumerate(instructions):
        branch = re.search(r'BRA.*\.(L_x_\d+)', text)
        if branch and labels.get(branch.group(1), 10**9) < index:
            loops.append((labels[branch.group(1)], index))
    main = max(loops, key=lambda ab: ab[1] - ab[0])
    inner = [ab for ab in loops
             if ab != main and main[0] <= ab[0] and ab[1] <= main[1]]
    outer = [ab for ab in loops if ab != main and ab not in inner]
    size = lambda ab: ab[1] - ab[0] + 1  # noqa: E731
    body = size(main) + sum(map(size, inner)) * (SETS - 1)
    rest = len(instructions) - size(main) + sum(map(size, outer)) * (SETS - 1)
    return options['num_warps'] * (rest + tiles(constants['BLOCK_E']) * body) * N


def count(path):
    launches = json.load(open(path))
    print('| tiling | warp-instructions per step (G) | at 4 per clock per SM '
          '(ms) | measured layer step (ms) |')
    print('|---|---:|---:|---:|')
    for name, over in VARIANTS.items():
        total = sum(warp_instructions(launch, over) for launch in launches)
        issue_ms = total / (132 * 4 * 1.755e9) * 1e3
        print(f'| {name} | {total / 1e9:.2f} | {issue_ms:.1f} | '
              f'{MEASURED[name]:.1f} |', flush=True)


if __name__ == '__main__':
    (capture if sys.argv[1] == 'capture' else count)(sys.argv[2])
