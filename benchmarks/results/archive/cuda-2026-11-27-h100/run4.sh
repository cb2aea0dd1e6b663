#!/bin/bash
# Fourth run of 2026-11-27: where IKTransformerConv direct's step goes now
# (study4.py), the layers against TransformerConv, and the CUDA tests.
# `IKGAT_GIT_COMMIT=<commit> bash benchmarks/results/cuda-2026-11-27-h100/run4.sh`
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
S=benchmarks/results/cuda-2026-11-27-h100
log() { echo "== $(date -u +%T) $*"; }
{ nvidia-smi -L; python -c "import platform, torch, torch_geometric, triton; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'torch_geometric', torch_geometric.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
log study
timeout 200 python $S/study4.py > "$OUT/study4.md" 2> "$OUT/stderr.txt"
cat "$OUT/study4.md" | head -75
log transformers
timeout 130 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv TransformerConv-compiled IKTransformerConv-rbf \
  IKTransformerConv-direct IKTransformerConv-direct-compiled \
  IKTransformerConv-implicit \
  --training-graphs --no-fused --rounds 10 --warmup 3 \
  --output "$OUT/gpu_speed_transformer.md" >> "$OUT/stderr.txt" 2>&1
grep "^| arxiv" "$OUT/gpu_speed_transformer.md"
log tests
T="timeout 130 python -m pytest -q -p no:cacheprovider"
$T tests/nn/test_pair_tables.py tests/nn/test_triton_transformer.py tests/nn/test_fused_dropout.py > "$OUT/tests_kernels.txt" 2>&1 &
$T tests/nn/conv/test_ik_transformer_conv.py tests/nn/conv/test_fused_layer.py > "$OUT/tests_layers.txt" 2>&1 &
$T tests/nn/test_triton_attention.py tests/kernels/test_triton_fourier.py tests/nn/test_triton_softmax.py tests/nn/conv/test_host_sync.py > "$OUT/tests_gat.txt" 2>&1 &
wait
log done
for f in "$OUT"/tests_*.txt; do echo "== $f"; grep -E "passed|failed|^FAILED|Error" "$f" | tail -n 12; done
grep -v Warn "$OUT/stderr.txt" | grep -iE "error|Traceback" | head -n 10
