#!/usr/bin/env bash
# Where a tuning run's wall time goes (issue 7, "a warm rerun near-instant"): one shape, 24
# trials, under scripts/tune_phases.py: cold (Triton cache cleared), warm (same proposals into
# a fresh history), warm with no compile workers (the timing worker loads each binary), and a
# second run on the warm run's history (it continues: new proposals, compiled); then
# scripts/timer_spread.py on the warm run's best configs.
# Usage on the device: source scripts/device_env.sh; bash scripts/tune_phases.sh OUTDIR
set -u
out=$1
w=$(mktemp -d)
SHAPE=(--m 4096 --n 4096 --k 4096 --dtype fp16)
phases() {  # name history [env...]
  local name=$1 hist=$2; shift 2
  echo "== $name"
  local t0; t0=$(date +%s.%N)
  env "$@" AK_T0="$t0" AK_PHASES_LOG="$w/phases_$name.jsonl" python3 scripts/tune_phases.py tune "${SHAPE[@]}" \
    --generations 3 --per-generation 8 --seed 0 --history "$w/$hist" --json > "$w/tune_$name.json"
  echo "$name: $(python3 -c "import time; print(f'{time.time() - $t0:.2f}')") s wall (shell to shell)"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
rm -rf ~/.triton/cache
phases cold h_cold.csv
phases warm h_warm.csv
phases warm_nopool h_warm_nopool.csv AK_COMPILE_WORKERS=0
phases continue h_warm.csv
echo "== timer spread"
python3 scripts/timer_spread.py "$w/h_warm.csv" 4096 4096 4096 fp16 --rounds 5 --configs 4
tar czf "$out/tune_phases.tgz" -C "$w" .
