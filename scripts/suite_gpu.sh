# The GPU run behind docs/BENCHMARKS.md: the shape suite, side by side, then the report.
# On the GPU machine:  bash scripts/suite_gpu.sh   (OUT=dir; RESULTS=jsonl to resume/extend)
set -u
source scripts/device_env.sh || exit 1
RESULTS=${RESULTS:-docs/runs/suite/h100.jsonl}
mkdir -p "$(dirname "$RESULTS")"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
# plain GEMMs: squares, LLM, decode (default suites)
python3 scripts/benchmark_suite.py --out "$RESULTS" --resume --time-budget ${PLAIN_BUDGET:-300} 2>&1 | tail -${TAIL:-70}
# fused epilogues, with torch.compile max-autotune (minutes per shape)
python3 scripts/benchmark_suite.py configs/shapes/fused.csv --out "$RESULTS" --resume --compile \
  --time-budget ${FUSED_BUDGET:-200} 2>&1 | tail -${TAIL:-40}
cp "$RESULTS" "$OUT/" 2>/dev/null
