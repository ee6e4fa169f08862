#!/usr/bin/env bash
# Issue 8 on the GPU: `autokernel loop` over the six LLM shapes (configs/shapes/llm.csv) with
# the default strategy, its LLM side served by scripts/loopback_llm.py (no key or network on
# the device), and the learning-curve PNG.
# Usage on the device: source scripts/device_env.sh; bash scripts/loop_llm_gpu.sh OUTDIR
set -u
out=$1
python3 scripts/loopback_llm.py "$out/llm_url" &
server=$!
for _ in $(seq 50); do [ -s "$out/llm_url" ] && break; sleep 0.2; done
export OPENAI_BASE_URL=$(cat "$out/llm_url") OPENAI_API_KEY=loopback AUTOKERNEL_LLM_MODEL=loopback
TIMEFORMAT="loop: %R s wall"
time python3 -m autokernel loop --shapes configs/shapes/llm.csv --max-trials 16 --per-generation 8 --patience 2 \
  --seed 0 --history "$out/loop.csv" --plot "$out/loop_curve.png" --json > "$out/loop.json" 2> "$out/loop.log"
tail -5 "$out/loop.log"
kill $server
python3 - "$out/loop.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    b, base = r["best"], r["baseline"] or {}
    print(f"{r['problem']['m']}x{r['problem']['n']}x{r['problem']['k']} {r['problem']['dtype']} {r['problem']['layout']}: "
          f"{r['trials']} trials, stopped {r['stopped']}, best gpu_ms {b and b['gpu_ms']}, cuBLAS gpu_ms {base.get('gpu_ms')}, "
          f"events {len(r['events'])}")
PY
