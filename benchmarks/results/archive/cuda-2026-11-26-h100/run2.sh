#!/bin/bash
# Second run of this session, after the fixes: the tests that failed on the
# first (with their files), the tile sweep (sweep.py: variants compiled in
# parallel, then timed in one process) and the transformer layer study.
set -u
export PYTHONPATH=$PWD
S=benchmarks/results/cuda-2026-11-26-h100
T="timeout 150 python -m pytest -q -p no:cacheprovider"
$T tests/nn/test_triton_transformer.py > /tmp/t1.txt 2>&1 &
$T tests/nn/test_fused_dropout.py tests/kernels/test_triton_fourier.py > /tmp/t2.txt 2>&1 &
$T tests/nn/conv/test_ik_transformer_conv.py > /tmp/t3.txt 2>&1 &
for v in default "E2 w2" "E2 w1" "E4 w4" "E4 w2" "E8 w4" "E8 w8" "R32x2 E2 w4"; do
  timeout 200 python $S/sweep.py warm "$v" > "/tmp/warm_$v.txt" 2>&1 &
done
wait
for f in /tmp/t1.txt /tmp/t2.txt /tmp/t3.txt /tmp/warm_*.txt; do echo "== $f"; grep -E "passed|failed|Error|error" "$f" | tail -n 8; done > "$OUT/tests_and_warm.txt"
cat "$OUT/tests_and_warm.txt"
timeout 120 python $S/sweep.py time > "$OUT/sweep.md" 2> /tmp/sweep.err; tail -n 5 /tmp/sweep.err; cat "$OUT/sweep.md"
timeout 150 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv IKTransformerConv-rbf IKTransformerConv-direct \
  IKTransformerConv-implicit MIKANTransformerConv \
  --training-graphs --no-fused --output "$OUT/gpu_speed_transformer.md" 2>&1 | grep -v Warning | tail -n 12
