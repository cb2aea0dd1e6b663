import json
import math

import pytest

from benchmarks import gpu_model
from benchmarks.gpu_model import (
    ARXIV,
    H100,
    Graph,
    KernelCost,
    attention_kernels,
    find_build,
    ikgat_layer,
    mean_tiles,
    node_term_kernels,
    occupancy,
    predict,
)

TINY = Graph('tiny', nodes=4, edges=8, features=16)


def _row(kernel, constexprs, registers, warps=4, shared=0):
    return dict(kernel=kernel, constexprs=constexprs, first='test', calls=1,
                builds={'3.6.0 sm_90': dict(registers=255, spill=0, shared=0,
                                            warps=4, resident_warps=8,
                                            verdict=None, cc=90,
                                            triton='3.6.0'),
                        '3.9.0 sm_90': dict(registers=registers, spill=0,
                                            shared=shared, warps=warps,
                                            resident_warps=None, verdict=None,
                                            cc=90, triton='3.9.0'),
                        '3.9.0 sm_80': dict(registers=1, spill=0, shared=0,
                                            warps=4, resident_warps=64,
                                            verdict=None, cc=80,
                                            triton='3.9.0')})


def test_mean_tiles_by_hand():
    # One edge per tile: E[1 + K] = 1 + lambda; no other edge: one tile.
    assert mean_tiles(3.0, 1) == pytest.approx(4.0)
    assert mean_tiles(0.0, 8) == 1.0
    # lambda = 1, B = 2: ceil((1 + k)/2) = 1 for k <= 1, 2 for k = 2, 3...
    p0 = p1 = math.exp(-1)
    assert mean_tiles(1.0, 2) == pytest.approx(
        (p0 + p1) + 2 * (1 - p0 - p1) + sum(
            math.exp(-1) / math.factorial(k) * (math.ceil((1 + k) / 2) - 2)
            for k in range(4, 30)))


def test_forward_bytes_on_a_tiny_graph():
    # 4 nodes, 8 edges + 4 self-loops = 12; 1 head x 8 channels, int32.
    forward = attention_kernels(TINY, heads=1, channels=8)[0]
    assert forward.kernel == 'forward_kernel' and forward.grid == (4, )
    # Per target: rowptr 4, its scores 12, out 32, max and den 8 = 56;
    # per edge: index 4, the source's scores (12 -> one 32-byte sector)
    # and features (32) = 68.
    assert forward.bytes == 4 * 56 + 12 * 68
    # BLOCK_E from the wrapper's rule: degree ceil(12/4) = 3 -> 4.
    assert forward.constexprs['BLOCK_E'] == 4
    assert forward.constexprs['BLOCK_C'] == 8


def test_node_term_counts_by_hand():
    # 16 nodes, 1 head, C = 8, R = 16, one set: mR = 16 -> B_R = 16,
    # B_N = 512/16 = 32 (one block, half padding), T = 2.
    estimate = node_term_kernels(16, heads=1, channels=8, points=16,
                                 sets=1)[0]
    assert estimate.grid == (1, 1)
    assert estimate.bytes == 16 * 8 * 4 + 2 * 16 * 2 * 4
    issued = 32 * 16
    assert estimate.flops == issued * (2 * 8 + 25 + 4 * 2) + 3 * 16 * 2
    assert estimate.transcendentals == 16 * 2


def test_occupancy_from_registers():
    assert occupancy(64, 4, 0) == 8  # 64 x 128 threads: 8 blocks, 32 warps
    assert occupancy(255, 4, 0) == 2  # the node-term backward before #28
    assert occupancy(16, 4, 0) == 16  # bounded by 2,048 threads
    assert occupancy(64, 4, 100 * 1024) == 2  # bounded by shared memory


def test_find_build_newest_triton_sm90_and_nearest_block():
    forward = attention_kernels(ARXIV)[0]
    assert forward.constexprs['BLOCK_E'] == 8
    exact = dict(forward.constexprs)
    rows = [_row('forward_kernel', dict(exact, BLOCK_E=16), 40),
            _row('forward_kernel', exact, 96),
            _row('forward_kernel', dict(exact, HAS_DROPOUT=True), 120)]
    build, how = find_build(rows, forward)
    assert (build['registers'], how) == (96, 'exact')
    build, how = find_build(rows[:1], forward)
    assert (build['registers'], how) == (40, 'BLOCK_E=16')
    assert find_build(rows[2:], forward) == (None, 'none')
    cost = predict(forward, rows)
    assert cost.registers == 96 and cost.resident_blocks == 5
    assert cost.resident_warps == 20


def test_prediction_formula():
    cost = KernelCost('k', 'k', (132 * 4, ), {}, bytes=2.8e9, flops=0,
                      transcendentals=0, round_trips=132 * 4 * 10,
                      registers=None)
    predict(cost)  # 64 registers assumed: 8 blocks per SM
    assert cost.times['memory'] == pytest.approx(1e-3)
    # 528 programs all resident, 10 round trips each:
    assert cost.times['latency'] == pytest.approx(10 * H100.latency)
    assert cost.predicted == pytest.approx(1e-3 + H100.launch)
    assert cost.bound == 'memory'


def test_more_edges_never_predict_less_time_at_the_same_launch():
    # With the wrapper's block constants fixed, time grows with the edges;
    # the block rule itself may lower it where B_E doubles (fewer tiles).
    previous = {}
    for edges in range(100_000, 3_000_000, 100_000):
        graph = Graph('g', 169_343, edges, 128)
        for cost in attention_kernels(graph):
            predict(cost)
            key = (cost.kernel, tuple(sorted(cost.constexprs.items())))
            if key in previous:
                assert cost.predicted >= previous[key][0]
                assert cost.bytes > previous[key][1]
            previous[key] = (cost.predicted, cost.bytes)
    steps = [ikgat_layer(Graph('g', 1000, edges, 16), 'direct').total
             for edges in (4000, 5000, 6000, 7000)]  # B_E stays 8
    assert steps == sorted(steps)


def test_main_writes_the_report(tmp_path):
    rows = [_row('backward_dst_kernel', dict(
        BROADCAST=0, HAS_GATE=False, NEED_GATE_GRAD=False, BLOCK_E=8,
        BLOCK_H=8), 31)]
    fixture = tmp_path / 'gpu_compile.json'
    fixture.write_text(json.dumps(rows))
    output = tmp_path / 'gpu_model.md'
    text = gpu_model.main(['--compile-json', str(fixture), '--output',
                           str(output)])
    assert output.read_text() == text
    assert text.startswith('# Predicted H100 time of every Triton kernel')
    assert 'python -m benchmarks.gpu_model --compile-json' in text
    for part in ('## Check against the H100 study', '| `forward_kernel` |',
                 '| `grad_points_kernel` |', 'products, IKGATConv-direct',
                 '| 31 | 64 |'):
        assert part in text


def test_fourier_pair_kernels_follow_the_wrappers_tiling_and_gather_vectors():
    # The random-feature transformer kernels: the grid and blocks are the
    # wrapper's own, and computing the features inside moves a fraction of
    # the bytes of gathering 2R-wide tables, for more FLOPs (sin, cos and
    # the angles of every edge, head and point).
    from ikgat.ops.transformer_fourier import forward_kernel, fourier_tiling
    costs = gpu_model.fourier_pair_kernels(ARXIV, points=64, sets=2)
    assert [c.kernel for c in costs] == [
        forward_kernel.__name__, 'backward_dst_kernel', 'backward_src_kernel']
    tile = fourier_tiling(ARXIV.edges, ARXIV.nodes, 8, 64, 8)
    # R = 64 in chunks:
    assert tile['BLOCK_R'] * tile['CHUNKS'] == 64
    for cost in costs:
        assert cost.grid == (ARXIV.nodes, 8 // tile['BLOCK_H'])
        for name in ('BLOCK_E', 'BLOCK_R', 'CHUNKS'):
            assert cost.constexprs[name] == tile[name]
        assert cost.warps == tile['num_warps']
        # At least 2 sets x (angle 2D + sin and cos) per edge, head, point:
        assert cost.flops >= ARXIV.edges * 8 * 64 * 2 * (
            2 * 8 + gpu_model.OPS['sincos']['flops'])
    gathered = gpu_model.table_kernels(ARXIV, family='direct')
    assert sum(c.bytes for c in costs) < sum(c.bytes for c in gathered) / 3
    assert sum(c.flops for c in costs) > 10 * sum(c.flops for c in gathered)
    # Fixed points (rff) store no angle gradients:
    fixed = gpu_model.fourier_pair_kernels(ARXIV, learned=False)
    assert fixed[0].bytes == costs[0].bytes
    assert fixed[1].bytes == costs[1].bytes - ARXIV.nodes * 8 * 2 * 64 * 4


def test_transformer_step_predictions_rank_as_their_work():
    # rbf gathers 8 floats and computes little; direct computes 2mR angles
    # per edge and head: slower than rbf, and both finite and positive.
    rbf = gpu_model.transformer_layer(ARXIV, 'rbf')
    direct = gpu_model.transformer_layer(ARXIV, 'direct')
    eager = gpu_model.transformer_conv_step(ARXIV)
    assert 0 < rbf.total < direct.total
    assert math.isfinite(direct.total) and eager.total > 0


def test_transformer_random_feature_kernels_follow_the_layers_cuda_path():
    # On CUDA the layer gives the gathered-table kernels per-node tables
    # (ikgat.ops.node_tables): the model prices those kernels, with the
    # tiling the wrapper takes for tables, and both sides' table passes;
    # tables=False prices the points kernels instead.
    from ikgat.ops.transformer_attention_triton import table_tiling
    tables = gpu_model.transformer_kernels(ARXIV, family='direct')
    for cost in tables:
        tile = table_tiling(ARXIV.edges, ARXIV.nodes, 8, 128, 8,
                            forward=cost.kernel == 'forward_kernel')
        assert cost.constexprs['LOG_SQUARE'] is True
        assert cost.constexprs['BLOCK_D'] == 128
        for name in ('BLOCK_E', 'BLOCK_H'):
            assert cost.constexprs[name] == tile[name]
        assert cost.warps == tile['num_warps']
        # One 2R-wide row of every head gathered per edge, at least:
        assert cost.bytes >= ARXIV.edges * 8 * 128 * 4
    points = gpu_model.transformer_kernels(ARXIV, family='direct',
                                           tables=False)
    assert [c.constexprs.get('CHUNKS') for c in points] != [None] * 3
    # Forward: read x, write the table; backward: read x and the table's
    # gradient, write dL/da (read twice more) and dL/dx.
    n, f32 = 10, 4
    x, table, angles = n * 8 * 8 * f32, n * 8 * 128 * f32, n * 8 * 128 * f32
    assert gpu_model.node_table_bytes(n) == 3 * x + 2 * table + 3 * angles
    with_tables = gpu_model.transformer_layer(ARXIV, 'direct')
    without = gpu_model.transformer_layer(ARXIV, 'direct', tables=False)
    assert with_tables.other_bytes - without.other_bytes == (
        2 * gpu_model.node_table_bytes(ARXIV.nodes)
        - 2 * ARXIV.nodes * 8 * (2 * 64 + 8) * 4)
    # Narrower tables gather fewer bytes: the step shrinks with R.
    assert gpu_model.transformer_layer(ARXIV, 'direct', points=32).total \
        < with_tables.total


def test_program_instructions_count_each_loop_by_its_trips():
    # 100 instructions; the main loop is 10..59 (50), with two loops inside
    # it, 20..29 and 40..44 (15: an unrolled loop and its remainder, one
    # iteration of 5), one nested deeper (21..22, inside the first: part of
    # it), and a loop after it, 70..79, counted once.
    build = dict(instructions=100, loops=[[10, 59], [20, 29], [21, 22],
                                          [40, 44], [70, 79]])
    outside = 100 - 50
    assert gpu_model.program_instructions(build, 1.0, 1.0) == 100 - 10
    assert gpu_model.program_instructions(build, 3.0, 1.0) == (
        outside + 3 * (35 + 5))
    assert gpu_model.program_instructions(build, 3.0, 8.0) == (
        outside + 3 * (35 + 8 * 5))
    assert gpu_model.program_instructions(dict(instructions=7), 5.0,
                                          2.0) == 7
    assert gpu_model.program_instructions(dict(registers=40), 5.0,
                                          2.0) is None


def test_the_issue_term_is_the_warp_instructions_at_the_issue_rate():
    cost = KernelCost('forward_kernel', 'test', (1000, ), {}, bytes=0,
                      flops=0, transcendentals=0, round_trips=0, warps=4,
                      loop_trips=(2.5, 1.0))
    row = _row('forward_kernel', {}, 64)
    row['builds']['3.9.0 sm_90'].update(instructions=300,
                                        loops=[[100, 199]])
    predict(cost, [row], H100)
    assert cost.warp_instructions == pytest.approx(
        4 * 1000 * (200 + 2.5 * 100))
    assert cost.times['issue'] == pytest.approx(
        cost.warp_instructions / (4 * H100.sms * H100.clock))
    assert cost.bound == 'issue'
