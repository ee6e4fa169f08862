#!/usr/bin/env bash
# Issue 7's GPU targets in one run: `autokernel tune` (default strategy, 24 trials) on four
# shapes with an empty Triton cache and no kept readings ("cold"); the same commands again
# into a fresh history ("warm": the same seed, so the same proposals, every reading kept by
# the cold run reused, autokernel/tuning/readings.py); the first shape once more with
# --no-cache ("remeasure": binaries cached, every reading taken again); each run timed. Then
# each winner looked up in the exhaustive sweep.
# Usage on the device: source scripts/device_env.sh; bash scripts/tune_targets.sh OUTDIR
# (PASSES=cold runs the cold pass alone; scripts/tune_sbs.py then times the winners side by side)
set -u
out=$1
SHAPES=("4096 4096 4096 fp16" "4096 11008 4096 bf16" "1024 4096 4096 fp16" "8192 8192 1024 bf16")
TIMEFORMAT="  %R s wall"
export AUTOKERNEL_CACHE_DIR=$out/readings
rm -rf ~/.triton/cache "$AUTOKERNEL_CACHE_DIR"
for pass in ${PASSES:-cold warm remeasure}; do
  shapes=("${SHAPES[@]}")
  extra=()
  if [ "$pass" = remeasure ]; then shapes=("${SHAPES[0]}"); extra=(--no-cache); fi
  for shape in "${shapes[@]}"; do
    set -- $shape
    echo "$pass $1x$2x$3 $4:"
    time python3 -m autokernel tune --m "$1" --n "$2" --k "$3" --dtype "$4" --generations 3 --per-generation 8 \
      --seed 0 --history "$out/tune_$pass.csv" "${extra[@]}" --json > "$out/tune_${pass}_$1x$2x$3_$4.json"
  done
done
python3 - "$out" tests/data/sweep_h100.csv <<'PY'
import json, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from autokernel.history import History
from autokernel.problem import Problem
from autokernel.tuning.space import config_key
from autokernel.tuning.strategies.base import problem_rows
from autokernel.config import KernelConfig
out, sweep = Path(sys.argv[1]), History(sys.argv[2]).read()
print("\nshape | winner | its throughput / sweep best (sweep figures) | this run's winner / sweep best | cuBLAS gpu_ms | winner vs cuBLAS (GPU time)")
for f in sorted(out.glob("tune_cold_*.json")):
    r = json.loads(f.read_text())[0]
    p = Problem(**r["problem"])
    rows = {config_key(c): row for c, row in problem_rows(sweep, p) if row["status"] == "success"}
    best = min(row["gpu_ms"] for row in rows.values())
    cfg = KernelConfig(**r["best"]["config"])
    in_sweep = rows.get(config_key(cfg), {}).get("gpu_ms")
    base = r["baseline"] or {}
    vs = base.get("gpu_ms") / r["best"]["gpu_ms"] if base.get("gpu_ms") and r["best"]["gpu_ms"] else None
    ratio = "not in the sweep" if in_sweep is None else f"{best / in_sweep:.4f}"  # e.g. a field the sweep predates
    print(f"{p.label()} | {cfg.short()} | {ratio} | {best / r['best']['rank_ms']:.4f} | "
          f"{base.get('gpu_ms')} | {vs and round(vs, 3)}")
print("\nwarm rerun: same winner as cold | readings reused")
for f in sorted(out.glob("tune_warm_*.json")):
    w = json.loads(f.read_text())[0]
    c = json.loads((out / f.name.replace("warm", "cold")).read_text())[0]
    print(f"{Problem(**w['problem']).label()} | {w['best'] == c['best']} | {w.get('reused_readings')}")
PY
