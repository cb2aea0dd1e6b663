#!/bin/bash
# Third run of this session: the tests that failed on the second (float64
# launches; dropout repeats), the operator's paths (paths.py) and the
# transformer layer study after the points-gradient change.
set -u
export PYTHONPATH=$PWD
S=benchmarks/results/cuda-2026-11-26-h100
T="timeout 120 python -m pytest -q -p no:cacheprovider"
$T tests/nn/test_triton_transformer.py > /tmp/t1.txt 2>&1 &
$T tests/nn/test_fused_dropout.py > /tmp/t2.txt 2>&1 &
timeout 150 python $S/paths.py > "$OUT/paths.md" 2> /tmp/paths.err
wait
for f in /tmp/t1.txt /tmp/t2.txt; do echo "== $f"; grep -E "passed|failed|Error" "$f" | tail -n 8; done > "$OUT/tests.txt"
cat "$OUT/tests.txt"; tail -n 5 /tmp/paths.err; head -n 12 "$OUT/paths.md"
timeout 120 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv IKTransformerConv-rbf IKTransformerConv-direct \
  IKTransformerConv-implicit MIKANTransformerConv \
  --training-graphs --no-fused --output "$OUT/gpu_speed_transformer.md" 2>&1 | grep -v Warning | tail -n 8
