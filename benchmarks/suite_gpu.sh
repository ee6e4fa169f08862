# The GPU run behind docs/BENCHMARKS.md: the shape suite, every implementation of a shape
# timed side by side (suite.py --race, the default), then the report.
# On the GPU machine:  bash benchmarks/suite_gpu.sh   (OUT=dir; RESULTS=jsonl to resume/extend;
# TUNED=a best-config file to time beside the shipped one, e.g. docs/runs/tuning/suite/h100_configs_v1.json)
set -u
source benchmarks/device_env.sh || exit 1
RESULTS=${RESULTS:-docs/runs/suite/h100.jsonl}
mkdir -p "$(dirname "$RESULTS")"
tuned=()
[ -n "${TUNED:-}" ] && tuned=(--tuned "$TUNED")
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
# plain GEMMs: squares, LLM, decode (default suites): about 90 s on the H100
python3 benchmarks/suite.py --out "$RESULTS" --resume "${tuned[@]}" --time-budget ${PLAIN_BUDGET:-300} 2>&1 | tail -${TAIL:-70}
# fused epilogues, with torch.compile max-autotune (about 4 min: it autotunes every shape)
python3 benchmarks/suite.py configs/shapes/fused.csv --out "$RESULTS" --resume --compile "${tuned[@]}" \
  --time-budget ${FUSED_BUDGET:-300} 2>&1 | tail -${TAIL:-40}
cp "$RESULTS" "$OUT/" 2>/dev/null
