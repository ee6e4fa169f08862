# The GPU checks of the pointer kernels' index runs (docs/kernel-notes.md, "Wrapped tile
# indices"): the kernel and op tests, the stride stress, then GPU time against the old
# claims (a copy of 3858823 named autokernel_before, made beforehand where git is, since the
# GPU machine's copy of the tree has no history:
#   mkdir -p .dev/before && git archive 3858823 autokernel | tar -x -C .dev/before
#   mv .dev/before/autokernel .dev/before/autokernel_before
#   find .dev/before -name '*.py' | xargs sed -i 's/\bautokernel\b/autokernel_before/g'
# ). On the GPU machine, repository root:
#   bash docs/runs/kernels/index_run_check.sh      (OUT: where the outputs go)
set -u
OUT=${OUT:-/tmp}
source benchmarks/device_env.sh || exit 1
export TRITON_INTERPRET=0
python3 -m pytest -q -p no:cacheprovider tests/op tests/kernels tests/measure tests/pick -rf --tb=line \
  > "$OUT/gpu_pytest.txt" 2>&1; tail -3 "$OUT/gpu_pytest.txt"
python3 docs/runs/kernels/stride_stress.py 2>&1 | tail -2
if [ -d .dev/before/autokernel_before ]; then
  PYTHONPATH=$PYTHONPATH:$PWD/.dev/before python3 docs/runs/kernels/wrap_runs_ab.py 2>&1 | tail -10
else
  echo "no .dev/before/autokernel_before: the A/B against the old claims is skipped (see the comment above)"
fi
