# The tuning run behind autokernel/configs/<gpu>.json: `autokernel loop` over the public
# shape suite (configs/shapes/), 12 trials per problem. On the GPU machine:
#   bash scripts/tune_suite.sh            (OUT=dir for outputs; SHAPES=csv to tune a subset; BUDGET=s)
set -u
source scripts/device_env.sh || exit 1
SHAPES=${SHAPES:-/tmp/all_shapes.csv}
if [ ! -f "$SHAPES" ]; then
  head -1 configs/shapes/llm.csv > "$SHAPES"
  for s in llm squares fused decode; do tail -n +2 configs/shapes/$s.csv >> "$SHAPES"; done
fi
HIST=${HIST:-$OUT/h100_loop_history.csv}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
time autokernel loop --shapes "$SHAPES" --per-generation 6 --max-trials 12 --patience 1 --seed 0 \
  --history "$HIST" --time-budget ${BUDGET:-500} --json > $OUT/loop.json 2> $OUT/loop.err
echo "rc=$?"; tail -5 $OUT/loop.err
python3 - <<'PY'
import pandas as pd, os
df = pd.read_csv(os.environ.get("HIST", os.environ["OUT"] + "/h100_loop_history.csv"))
print(len(df), "rows;", df.groupby(["M","N","K","dtype","activation"]).size().shape[0], "problems")
PY
