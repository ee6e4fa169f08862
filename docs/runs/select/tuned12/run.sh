S=docs/runs/select/tuned12/shapes.csv  # 12 problems from random_shapes.py, seed 75241
python3 -m autokernel loop --shapes $S --strategy random --max-trials 48 --seed 1 --history $OUT/history.csv --time-budget 300 2>&1 | tail -20
python3 -m autokernel export-best --history $OUT/history.csv -o $OUT/best.json 2>&1 | tail -3
python3 benchmarks/first_use.py --shapes $S --tuned $OUT/best.json --out $OUT/first_use_tuned.jsonl --time-budget 180 2>&1 | tail -20
