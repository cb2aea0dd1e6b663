#!/bin/bash
# The CUDA run of 2026-11-27 (issue #29), as it ran on the lent GPU machine:
# `IKGAT_GIT_COMMIT=<commit> bash benchmarks/results/cuda-2026-11-27-h100/run1.sh`
# from the repository root, $OUT the device tool's folder for the results.
# The project is on PYTHONPATH (not installed); every part has its own time
# limit. Timings first (nothing else running), then the tests.
set -u
export PYTHONPATH=$PWD
S=benchmarks/results/cuda-2026-11-27-h100
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/timeline.txt"; }
{ nvidia-smi -L; python -c "import platform, torch, torch_geometric, triton; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'torch_geometric', torch_geometric.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# 1. Issue #29's GPU target at this commit: one layer forward + backward at
#    arxiv size, TransformerConv (eager, compiled) against the ikgat layers.
log transformers
timeout 160 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv TransformerConv-compiled IKTransformerConv-rbf \
  IKTransformerConv-direct IKTransformerConv-implicit MIKANTransformerConv \
  --training-graphs --no-fused --rounds 10 --warmup 3 \
  --output "$OUT/gpu_speed_transformer.md" > "$OUT/gpu_speed_transformer.log" 2>&1
grep "^| arxiv" "$OUT/gpu_speed_transformer.md"

# 2. Where the attention's time goes, and per-node tables instead (tables.py).
log tables
timeout 150 python $S/tables.py > "$OUT/tables.md" 2> "$OUT/tables.err"
timeout 50 python $S/tables.py --approx-trig > "$OUT/approx_trig.md" 2>> "$OUT/tables.err"
grep -v Warning "$OUT/tables.err" | tail -n 5; cat "$OUT/tables.md" | head -30; cat "$OUT/approx_trig.md"

# 3. The kernels and layers on the GPU against their PyTorch implementations
#    (three processes at once: compiling is CPU-bound).
log tests
T="timeout 140 python -m pytest -q -p no:cacheprovider"
$T tests/nn/test_triton_transformer.py tests/nn/test_fused_dropout.py > "$OUT/tests_kernels.txt" 2>&1 &
$T tests/nn/conv/test_ik_transformer_conv.py tests/nn/conv/test_fused_layer.py > "$OUT/tests_layers.txt" 2>&1 &
$T tests/nn/test_triton_attention.py tests/kernels/test_triton_fourier.py tests/nn/test_triton_softmax.py tests/nn/conv/test_host_sync.py > "$OUT/tests_gat.txt" 2>&1 &
wait
log done
for f in "$OUT"/tests_*.txt; do echo "== $f"; grep -E "passed|failed|^FAILED|Error" "$f" | tail -n 12; done
