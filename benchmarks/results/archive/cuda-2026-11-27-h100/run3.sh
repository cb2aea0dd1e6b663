#!/bin/bash
# Third run of 2026-11-27: the per-node tables traced whole by an outer
# torch.compile (their recomputing backward), and the tables' tests on CUDA.
# `IKGAT_GIT_COMMIT=<commit> bash benchmarks/results/cuda-2026-11-27-h100/run3.sh`
set -u
export PYTHONPATH=$PWD
timeout 100 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv TransformerConv-compiled IKTransformerConv-direct \
  IKTransformerConv-direct-compiled \
  --training-graphs --no-fused --rounds 10 --warmup 3 \
  --output "$OUT/gpu_speed_transformer.md" > "$OUT/gpu_speed_transformer.log" 2>&1
grep "^| arxiv" "$OUT/gpu_speed_transformer.md"
timeout 60 python -m pytest -q -p no:cacheprovider tests/nn/test_pair_tables.py > "$OUT/tests_pair_tables.txt" 2>&1
grep -E "passed|failed|^FAILED|Error" "$OUT/tests_pair_tables.txt" | tail -n 12
