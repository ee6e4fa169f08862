#!/usr/bin/env bash
# The GPU measurements behind docs/bench.md, in one device call (about 4 minutes on an H100;
# ~2 each for `sweep compile` and `bench fuse`):
#   1. a config sweep at 2048/4096/8192 fp16 (evaluate + evaluate_torch, one process),
#      whose fastest config per size goes to $OUT/best.json;
#   2. `autokernel bench` with the default config, then with --best;
#   3. `autokernel fuse-bench` at 4096 with --best, then one --compile run (time-boxed).
# Everything lands in $OUT: history.csv, bench*.csv, *.txt logs, best.json, sweep.json.
# Stages to run are the arguments (sweep bench fuse compile); none means all. bench and
# fuse use $OUT/best.json, which sweep writes.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device_env.sh || exit 1
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
export AUTOKERNEL_HISTORY=$OUT/history.csv COLUMNS=160
STAGES=${*:-sweep bench fuse compile}
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"

has sweep && python3 - "$OUT" <<'PY' 2>&1 | tee "$OUT/sweep.txt"
import json, sys
from autokernel.config import KernelConfig
from autokernel.evaluate import evaluate, evaluate_torch
from autokernel.problem import Problem

out = sys.argv[1]
C = lambda bm, bn, bk, w, s, g=8: KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=g, num_warps=w, num_stages=s)
configs = [C(128, 256, 64, 8, 3), C(128, 256, 64, 8, 4), C(256, 128, 64, 8, 3), C(256, 128, 64, 8, 4),
           C(128, 128, 64, 4, 4), C(128, 128, 64, 8, 4), C(128, 128, 128, 8, 3), C(64, 256, 64, 4, 4),
           C(128, 256, 32, 8, 4), C(128, 128, 32, 4, 5), C(128, 256, 64, 8, 3, 16), C(256, 128, 64, 8, 3, 4)]
sizes = [2048, 4096, 8192]
rows, best = [], []
for s in sizes:
    p = Problem(s, s, s, "float16")
    t = evaluate_torch(p, "torch", seed=0)
    print(f"{s}: torch {t.ms:.4f} ms {t.tflops:.0f} TFLOP/s", flush=True)
    rows.append({"size": s, "kernel": "torch", "ms": t.ms, "tflops": t.tflops})
    trials = []
    for cfg in configs:
        tr = evaluate(p, cfg, seed=0)
        trials.append(tr)
        ratio = f"{t.ms / tr.ms:.3f}" if tr.ms else "-"
        print(f"{s}: {cfg.short():24s} {tr.status:18s} {tr.ms or 0:.4f} ms {tr.tflops or 0:.0f} TFLOP/s "
              f"torch/triton {ratio} {tr.error or ''}", flush=True)
        rows.append({"size": s, "kernel": "triton", "config": cfg.model_dump(), "status": tr.status, "ms": tr.ms,
                     "tflops": tr.tflops, "error": tr.error})
    top = min((tr for tr in trials if tr.ok), key=lambda tr: tr.ms)
    best.append({"m": s, "n": s, "k": s, "dtype": "float16", "config": top.config.model_dump()})
json.dump(rows, open(f"{out}/sweep.json", "w"), indent=1)
json.dump(best, open(f"{out}/best.json", "w"), indent=1)
print("TFLOP/s  " + "  ".join(f"{s:>6}" for s in sizes))
for name in ["torch"] + [c.short() for c in configs]:
    cells = [next(r for r in rows if r["size"] == s and (r["kernel"] == "torch" if name == "torch" else
                  r.get("config") and KernelConfig(**r["config"]).short() == name)) for s in sizes]
    print(f"{name:24s} " + "  ".join(f"{(c['tflops'] or 0):6.0f}" for c in cells))
PY

if has bench; then
    python3 -m autokernel bench --csv "$OUT/bench_default.csv" 2>&1 | tee "$OUT/bench.txt"
    python3 -m autokernel bench --best "$OUT/best.json" --csv "$OUT/bench_best.csv" 2>&1 | tee -a "$OUT/bench.txt"
    python3 -m autokernel bench --bias -a leaky_relu --best "$OUT/best.json" 2>&1 | tee -a "$OUT/bench.txt"
fi
has fuse && python3 -m autokernel fuse-bench --best "$OUT/best.json" 2>&1 | tee "$OUT/fuse.txt"
has compile && timeout 240 python3 -m autokernel fuse-bench -a leaky_relu -a relu --compile 2>&1 \
    | grep -v -e '^E[0-9]' -e '^  ' | tee -a "$OUT/fuse.txt"
rm -f "$OUT"/*.lock  # only 8 files come back from the device
