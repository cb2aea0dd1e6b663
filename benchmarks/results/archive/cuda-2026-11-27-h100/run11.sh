#!/bin/bash
# Eleventh run of 2026-11-27: the 22 tests of tests/nn/conv/test_compile.py
# that run 8's time limit left out (torch.compile with Inductor and Triton
# for the GPU), in four parallel shards (run11_shards.txt, one per line).
# `bash benchmarks/results/cuda-2026-11-27-h100/run11.sh`
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
S=benchmarks/results/cuda-2026-11-27-h100
i=0
while read -r ids; do
  i=$((i + 1))
  timeout 230 python -m pytest -v -p no:cacheprovider $ids > "$OUT/run11_suite_$i.txt" 2>&1 &
done < $S/run11_shards.txt
wait
grep -h -E "PASSED|FAILED|ERROR|passed|failed" "$OUT"/run11_suite_*.txt | grep -v "^tests.*PASSED" ; grep -c PASSED "$OUT"/run11_suite_*.txt
