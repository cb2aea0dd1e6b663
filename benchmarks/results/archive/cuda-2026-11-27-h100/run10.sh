#!/bin/bash
# Tenth run of 2026-11-27: the node tables in Triton as tiles by tl.dot
# (ikgat.nn.triton_pair_tables) against main's compiled passes (study10.py),
# the layers against TransformerConv (benchmarks.gpu_speed), and the CUDA
# tests of the tables, the transformer kernels and layers, and the test
# changed after run 8.
# `IKGAT_GIT_COMMIT=<commit> bash benchmarks/results/cuda-2026-11-27-h100/run9.sh`
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
S=benchmarks/results/cuda-2026-11-27-h100
log() { echo "== $(date -u +%T) $*"; }
{ nvidia-smi -L; python -c "import platform, torch, torch_geometric, triton; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'torch_geometric', torch_geometric.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
log study
timeout 150 python $S/study10.py > "$OUT/study10.md" 2> "$OUT/stderr.txt"
grep -v "^ \|^-\|^Name" "$OUT/study10.md"
log transformers
timeout 110 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv TransformerConv-compiled IKTransformerConv-rbf \
  IKTransformerConv-direct IKTransformerConv-direct-compiled \
  IKTransformerConv-implicit \
  --training-graphs --no-fused --rounds 10 --warmup 3 \
  --output "$OUT/gpu_speed_transformer.md" >> "$OUT/stderr.txt" 2>&1
grep "^| arxiv" "$OUT/gpu_speed_transformer.md"
log tests
T="timeout 200 python -m pytest -q -p no:cacheprovider"
$T tests/nn/test_pair_tables.py tests/kernels/test_pairwise_fourier.py > /tmp/tests_tables.txt 2>&1 &
$T tests/nn/test_triton_transformer.py > /tmp/tests_triton_transformer.txt 2>&1 &
$T tests/nn/conv/test_ik_transformer_conv.py > /tmp/tests_layer.txt 2>&1 &
wait
log done
for f in /tmp/tests_*.txt; do echo "== $f"; cat "$f"; done > "$OUT/tests.txt"
for f in /tmp/tests_*.txt; do echo "== $f"; grep -E "passed|failed|^FAILED|Error" "$f" | tail -n 12; done
