#!/bin/bash
# Second run of 2026-11-27: IKTransformerConv with per-node feature tables
# on CUDA (ikgat.nn.pair_tables) and the tables' kernels' new tiling.
# `IKGAT_GIT_COMMIT=<commit> bash benchmarks/results/cuda-2026-11-27-h100/run2.sh`
set -u
export PYTHONPATH=$PWD
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/timeline.txt"; }
log transformers
timeout 170 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv TransformerConv-compiled IKTransformerConv-rbf \
  IKTransformerConv-direct IKTransformerConv-direct-compiled \
  IKTransformerConv-implicit MIKANTransformerConv \
  --training-graphs --no-fused --rounds 10 --warmup 3 \
  --output "$OUT/gpu_speed_transformer.md" > "$OUT/gpu_speed_transformer.log" 2>&1
grep "^| arxiv" "$OUT/gpu_speed_transformer.md"; grep -v Warn "$OUT/gpu_speed_transformer.log" | tail -n 3
log tests
T="timeout 170 python -m pytest -q -p no:cacheprovider"
$T tests/nn/test_pair_tables.py tests/nn/test_triton_transformer.py > "$OUT/tests_kernels.txt" 2>&1 &
$T tests/nn/conv/test_ik_transformer_conv.py > "$OUT/tests_layers.txt" 2>&1 &
wait
log done
for f in "$OUT"/tests_*.txt; do echo "== $f"; grep -E "passed|failed|^FAILED|Error" "$f" | tail -n 12; done
