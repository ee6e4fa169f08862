#!/usr/bin/env bash
# The exhaustive sweep of the tuning space on a GPU: a grid tune over every config of each
# shape, every trial (and cuBLAS) appended to one history CSV, which `tune --replay` reads.
# Usage on the device: source scripts/device_env.sh; bash scripts/sweep_space.sh OUT.csv "M N K DTYPE" ...
# A sweep cut short (SWEEP_TIMEOUT seconds per shape, sent as Ctrl-C so workers stop cleanly)
# resumes where it stopped when run again on the same OUT.csv: the grid skips tried configs.
set -u
out=$1; shift
for shape in "$@"; do
  set -- $shape
  ${SWEEP_TIMEOUT:+timeout -s INT $SWEEP_TIMEOUT} python3 -m autokernel tune --strategy grid --per-generation 5000 --generations 1 \
    --m "$1" --n "$2" --k "$3" --dtype "$4" --history "$out" --timeout 60 --json > "${out%.csv}_$1x$2x$3_$4.json" \
    || echo "sweep of $shape exited $?"
  python3 - "$out" "$1" "$2" "$3" "$4" <<'PY'
import sys, warnings
warnings.simplefilter("ignore")
from autokernel.history import History
from autokernel.problem import parse_dtype
df = History(sys.argv[1]).read()
m, n, k, dt = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), parse_dtype(sys.argv[5])
d = df[(df.M == m) & (df.N == n) & (df.K == k) & (df.dtype == dt)]
t = d[d.kernel == "triton"]
ok = t[t.status == "success"].sort_values("gpu_ms")
torch_ms = d[d.kernel == "torch"]["ms"].min()
print(f"{m}x{n}x{k} {dt}: {len(t)} configs, {len(ok)} ok, statuses {t.status.value_counts().to_dict()}")
print(f"  cuBLAS ms {torch_ms:.4f}; best gpu_ms {ok.gpu_ms.iloc[0]:.4f} ms {ok.ms.iloc[0]:.4f} {ok.config.iloc[0]}")
best = ok.gpu_ms.iloc[0]
print(f"  within 99%: {(ok.gpu_ms <= best / 0.99).sum()}, within 98%: {(ok.gpu_ms <= best / 0.98).sum()}")
PY
done
