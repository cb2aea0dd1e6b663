#!/bin/bash
# Eighth run of 2026-11-27: the fast tier less the five files runs 5 and 7 ran, on the
# GPU machine, in four shards of files (run8_shards.txt) at 200 s each; -v, so that a shard
# stopped by its limit still shows each test it ran.
# `bash benchmarks/results/cuda-2026-11-27-h100/run8.sh`
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
i=0
while read -r files; do
  i=$((i+1))
  timeout 200 python -m pytest -v -m "not slow" -p no:cacheprovider --continue-on-collection-errors -W ignore $files > "$OUT/suite_$i.txt" 2>&1 &
done < benchmarks/results/cuda-2026-11-27-h100/run8_shards.txt
wait
for f in "$OUT"/suite_*.txt; do echo "== $f"; grep -E "^FAILED|^ERROR| passed| failed|error" "$f" | tail -n 15; echo "last: $(tail -n 1 $f | cut -c1-150)"; done
