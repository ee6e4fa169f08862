"""The L2 term's share for operand re-reads (``select.Model.l2_reread``), replayed on the H200's
sweeps (CPU): for each share given, each sweep held out of a fit on the others (with the DRAM
ceiling of the H200's datasheet and ``--fill-from`` the H100's model, as the shipped file is
made) and the pick compared with the best config the sweep timed; then a fit on all of them
picks for a fresh draw none of them holds (``check_random_h200_15``).

    python3 docs/runs/select/reread_replay.py 1.0 0.7 0.5 0.3 > docs/runs/select/reread_replay.txt
"""
import glob
import sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel import select  # noqa: E402
from replay_summary import by_shape, summary  # noqa: E402

DEVICE = "NVIDIA H200"
HELD = "benchmarks/results/check_random_h200_15.jsonl"
FILES = sorted(f for f in glob.glob("benchmarks/results/*_h200*.jsonl*")
               if f not in (HELD, "benchmarks/results/check_random_h200_16.jsonl",
                            "benchmarks/results/check_random_h200_17.jsonl",
                            "benchmarks/results/check_random_h200_18.jsonl"))
RULE = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)


H100_FILE = "autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"


rows = fs.read_rows(FILES)
shapes = by_shape(rows)
held = by_shape(fs.read_rows([HELD]))
print(f"{len(FILES)} sweeps, {len(shapes)} problems; held out: {HELD} ({len(held)})")
for share in map(float, sys.argv[1:]):
    options = fs.FitOptions(fill_from=H100_FILE, l2_reread=share)
    lofo = []
    for path in FILES:
        out = {fs.shape_key(r) for r in fs.read_rows([path])}
        model = fs.fitted(DEVICE, [r for r in rows if fs.shape_key(r) not in out], options)
        lofo += [fs.judge(model, key, shapes[key], RULE) for key in sorted(out)]
    model = fs.fitted(DEVICE, rows, options)
    fresh = [fs.judge(model, key, held[key], RULE) for key in sorted(held)]
    print(f"l2_reread {share}\n  each sweep held out: {summary(lofo)}\n  fresh draw:          {summary(fresh)}",
          flush=True)
