"""Replay (CPU) of two selector files on sweeps they were not fitted on: the H100's held-out
draws (`check_random_h100_22` to `_27`), the broad suite on the H100 (`_11`), and, carried to
the H200 as the shipped model is (`best.carry`), every H200 sweep. Per file: pick / best, how
many picks reach 0.90 of the best, how many run more than 2 % slower than the default, cuBLAS /
pick, and pick / best by class. docs/selector.md, "Programs side by side on an SM":

    git show f9d2cd2:autokernel/configs/selector/nvidia-h100-80gb-hbm3.json > /tmp/before.json
    python3 docs/runs/select/sharing_replay.py [--z=0.3] /tmp/before.json autokernel/configs/selector/nvidia-h100-80gb-hbm3.json

--z: the uncertainty rule's z (``select.UNCERTAINTY_Z`` by default).
"""
import collections
import glob
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import fit_selector as fs  # noqa: E402

from autokernel import best, select  # noqa: E402

R = "benchmarks/results/"
SETS = [("H100 held-out draws", [R + f"check_random_h100_{i}.jsonl" for i in range(22, 28)], False),
        ("H100 broad suite", [R + "check_broad_h100_11.jsonl.gz"], False),
        ("H200 sweeps", sorted(glob.glob(R + "check_random_h200_*.jsonl")) + [R + "check_broad_h200_1.jsonl.gz"], True)]
Z = next((float(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--z=")), select.UNCERTAINTY_Z)
FILES = [a for a in sys.argv[1:] if not a.startswith("--z=")]
RULE = dict(margin=select.DEFAULT_MARGIN, z=Z)


def cls(m, n, k):
    return "decode" if m <= 64 else "skinny" if m <= 256 else "mid" if 2 * m * n * k <= 1e11 else "large"


def g(v):
    return math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")


for name, files, carried in SETS:
    shapes = collections.defaultdict(list)
    for r in fs.read_rows(files):
        shapes[fs.shape_key(r)].append(r)
    print(f"{name} ({len(shapes)} problems, z {Z})")
    for path in FILES:
        model = select.Model.from_json(Path(path).read_text(), path)
        if carried:
            model = best.carry(model, "NVIDIA H200")
        res = [x for x in (fs.judge(model, k, shapes[k], RULE) for k in sorted(shapes)) if x]
        print(f"  {path}: pick/best {g([x[1] for x in res]):.4f}, >= 0.90 {sum(x[1] >= .9 for x in res)}/{len(res)}, "
              f"> 2 % slower than the default {sum(x[2] < .98 for x in res)}, cuBLAS/pick {g([x[3] for x in res]):.4f} | "
              + " ".join(f"{c} {g([x[1] for x in res if cls(*x[0][:3]) == c]):.4f}" for c in ("decode", "skinny", "mid", "large")))
