#!/usr/bin/env bash
# Issue 7's "warm rerun near-instant", side by side: `autokernel tune` (24 trials, seed 0) as
# in scripts/tune_targets.sh, with this checkout's code ("new") and another's ("old", e.g.
# main): the four shapes cold (Triton cache cleared) with the new code, then each shape warm
# (same seed, fresh history): the first two with the old code and the new one in turn, the
# other two with the new code; a run is skipped once DEADLINE seconds have passed. Last, if
# time is left, the new code's phases on one warm run (scripts/tune_phases.py).
# Usage on the device: source scripts/device_env.sh; bash scripts/tune_rerun.sh OUTDIR OLD_CHECKOUT [DEADLINE]
set -u
out=$1 old=$2 deadline=${3:-175}
new=$PWD
SHAPES=("4096 4096 4096 fp16" "1024 4096 4096 fp16" "4096 11008 4096 bf16" "8192 8192 1024 bf16")
site=${PYTHONPATH%%:*}  # the carried wheels (device_env.sh puts them first)
start=$(date +%s)
tune() {  # pass code M N K dtype
  local pass=$1 code=$2 dir
  [ "$code" = old ] && dir=$old || dir=$new
  local t0; t0=$(date +%s.%N)
  (cd "$dir" && PYTHONPATH="$site:$dir" python3 -m autokernel tune --m "$3" --n "$4" --k "$5" --dtype "$6" \
    --generations 3 --per-generation 8 --seed 0 --history "$out/tune_${pass}_$code.csv" --json \
    > "$out/tune_${pass}_${code}_$3x$4x$5_$6.json")
  echo "$pass $code $3x$4x$5 $6: rc $? $(python3 -c "import time; print(f'{time.time() - $t0:.2f}')") s wall"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
echo "old: $(git -C "$old" log -1 --format=%h 2>/dev/null || echo "$old")"
rm -rf ~/.triton/cache
for shape in "${SHAPES[@]}"; do tune cold new $shape; done
i=0
for shape in "${SHAPES[@]}"; do
  for code in old new; do
    if [ "$code" = old ] && [ $i -ge 2 ]; then continue; fi
    if [ $(( $(date +%s) - start )) -gt "$deadline" ]; then echo "warm $code $shape: skipped (past ${deadline} s)"; continue; fi
    tune warm $code $shape
  done
  i=$((i + 1))
done
if [ $(( $(date +%s) - start )) -le "$deadline" ]; then
  t0=$(date +%s.%N)
  AK_T0=$t0 AK_PHASES_LOG="$out/phases_warm_new.jsonl" python3 scripts/tune_phases.py tune --m 4096 --n 4096 --k 4096 \
    --dtype fp16 --generations 3 --per-generation 8 --seed 0 --history "$out/phases_warm_new.csv" --json > /dev/null
fi
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
print("\nrun | generations' elapsed s | trials | events")
for f in sorted(Path(sys.argv[1]).glob("tune_*.json")):
    try:
        r = json.loads(f.read_text())[0]
    except (ValueError, IndexError):
        print(f.name, "| no result")
        continue
    print(f.stem, "|", [round(g["elapsed_s"], 2) for g in r["generations"]], "|", r["trials"], "trials |", r["events"])
PY
