#!/bin/bash
# The CUDA check of 2026-11-26 (issue #29), as it ran on the lent GPU machine:
# `bash benchmarks/results/cuda-2026-11-26-h100/run.sh` from the repository
# root, with $OUT the folder for the results (the device tool's). The project
# is on PYTHONPATH (not installed); every part has its own time limit so that
# one slow part cannot take the others' time.
set -u
export PYTHONPATH=$PWD
log() { echo "== $(date -u +%T) $*" | tee -a "$OUT/timeline.txt"; }
{ nvidia-smi -L; python -c "import platform, torch, torch_geometric, triton; print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda, 'torch_geometric', torch_geometric.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# 1. The kernels compiled by Triton and run on the GPU, against their PyTorch
#    implementations (three processes at once: compiling is CPU-bound).
log tests
timeout 150 python -m pytest -q -p no:cacheprovider tests/nn/test_triton_transformer.py > "$OUT/tests_transformer_kernels.txt" 2>&1 &
timeout 150 python -m pytest -q -p no:cacheprovider tests/nn/test_triton_attention.py tests/nn/test_fused_dropout.py tests/kernels/test_triton_fourier.py tests/nn/test_triton_softmax.py > "$OUT/tests_gat_kernels.txt" 2>&1 &
timeout 150 python -m pytest -q -p no:cacheprovider tests/nn/conv/test_ik_transformer_conv.py tests/nn/conv/test_host_sync.py tests/nn/conv/test_fused_layer.py > "$OUT/tests_layers.txt" 2>&1 &
wait
tail -n 3 "$OUT"/tests_*.txt

# 2. Issue #29's GPU target: one layer forward + backward at arxiv size,
#    TransformerConv (eager, compiled) against the ikgat graph transformers.
log transformers
timeout 200 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --models TransformerConv TransformerConv-compiled IKTransformerConv-rbf \
  IKTransformerConv-direct IKTransformerConv-direct-compiled \
  IKTransformerConv-direct-unfused IKTransformerConv-implicit MIKANTransformerConv \
  --training-graphs --no-fused --rounds 10 --warmup 3 \
  --output "$OUT/gpu_speed_transformer.md" 2>&1 | tee "$OUT/gpu_speed_transformer.log"

# 3. The GAT recipe's attention dropout on the GPU (the kernel that did not
#    compile before the GPU issue): layer and two-layer training step.
log gat-dropout
timeout 90 python -m benchmarks.gpu_speed --graphs arxiv --precisions float32 \
  --attention-dropout 0.6 --models GATConv IKGATConv-rbf IKGATConv-direct \
  --training-graphs arxiv --training-models GATConv IKGATConv-direct \
  --no-fused --rounds 5 --warmup 2 \
  --output "$OUT/gpu_speed_dropout.md" 2>&1 | tee "$OUT/gpu_speed_dropout.log"
log done
