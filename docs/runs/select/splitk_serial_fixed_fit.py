"""The H200 selector file for the "constants kept" form of the split-K serial-partials experiment:
each config's constants fitted as shipped (partials under the smooth max), then timed with the
partials after the rest (splitk_serial 1.0) and their errors recomputed so. Needs
docs/runs/select/splitk_serial_experiment.patch applied (git apply). Usage:
python3 docs/runs/select/splitk_serial_fixed_fit.py OUT.json   (10-fold cross-validation without OUT)"""
import glob
import sys

sys.path[:0] = [".", "benchmarks"]
import fit_selector as fs  # noqa: E402
from autokernel import select  # noqa: E402

fit_as_shipped = select.fit
select.fit = lambda rows, *args, splitk_serial=0.0, **kw: fit_as_shipped(rows, *args, splitk_serial=0.0, **kw)
files = sorted(f for f in glob.glob("benchmarks/results/*_h200*.jsonl*") if not any(f"check_random_h200_1{d}" in f for d in "678"))
args = files + ["--l2-reread", "0.5", "--dram-tail", "0.5", "--splitk-serial", "1.0", "--fill-from",
                "autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"]
sys.exit(fs.main(args + (["--folds", "0", "--out", sys.argv[1]] if len(sys.argv) > 1 else ["--folds", "10"])))
