#!/bin/bash
# The command of run 1b, as it ran (one line in the device call; reformatted):
# the transformer kernel tests with one line per failure, the rbf-with-
# dropout layer test, and torch.profiler of one IKTransformerConv-direct
# layer step at arxiv size.
export PYTHONPATH=$PWD
timeout 100 python -m pytest -q -p no:cacheprovider tests/nn/test_triton_transformer.py --tb=line -rf 2>&1 | grep -v "^  " | tail -40 > $OUT/t.txt
timeout 100 python -m pytest -q -p no:cacheprovider "tests/nn/conv/test_ik_transformer_conv.py::test_rbf_is_transformer_conv_in_training_with_dropout" --tb=short 2>&1 | tail -30 >> $OUT/t.txt
timeout 120 python - > $OUT/prof.txt 2>&1 <<'PY'
import torch
from benchmarks.gpu_speed import build_model, synthetic_graph
x, ei = synthetic_graph(169343, 1166243, 128, torch.device('cuda'), 0)
m = build_model('IKTransformerConv-direct', 128).cuda().train()
def step():
    out = m(x, ei); out.sum().backward()
for _ in range(3): step()
torch.cuda.synchronize()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
    for _ in range(3): step()
    torch.cuda.synchronize()
print(p.key_averages().table(sort_by='cuda_time_total', row_limit=30, max_name_column_width=60))
PY
