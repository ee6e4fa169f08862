"""Replay of the bandwidth share for grids that leave SMs idle (docs/selector.md): fit on the twelve
files of the shipped model, pick for the fresh draws `_22` to `_26` (CPU). Apply fill_factor.patch first:

    git apply docs/runs/select/fill_factor.patch
    python3 docs/runs/select/fill_replay.py none 1.2 1.4 1.6 1.8 2.0 2.5 1.4,1 2.0,1   # rho[,L2 too]
"""
import sys, math, collections, time
sys.path.insert(0, "benchmarks")
import fit_selector as fs
from autokernel import select
R = "benchmarks/results/"
FIT = [R + f for f in ["select_refit_sweep_h100.jsonl.gz", "select_splitk_resweep_h100.jsonl.gz", "select_thin_tma_h100.jsonl.gz",
       "check_broad_h100_3.jsonl.gz", "check_broad_h100_9.jsonl", "select_w4s5_fit_h100.jsonl"]] + \
      [R + f"check_random_h100_{i}.jsonl" for i in range(17, 22)] + [R + "select_train_fit_h100.jsonl"]
HELD = [R + f"check_random_h100_{i}.jsonl" for i in range(22, 27)]
rows = fs.read_rows(FIT)
held = collections.defaultdict(list)
for r in fs.read_rows(HELD): held[fs.shape_key(r)].append(r)
A = fs.FitOptions()
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
def cls(m): return "dec" if m <= 64 else "skn" if m <= 256 else "big"
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
for spec in sys.argv[1:]:
    rho, l2 = spec.split(",") if "," in spec else (spec, "0")
    select.FILL_RHO = None if rho == "none" else float(rho); select.FILL_L2 = l2 == "1"
    t = time.time()
    model = fs.fitted("NVIDIA H100 80GB HBM3", rows, A)
    res = [fs.judge(model, key, rs, rule) for key, rs in sorted(held.items())]
    by = collections.defaultdict(list)
    for r in res: by[cls(r[0][0])].append(r[1])
    print(f"rho={rho} l2={l2}: pick/best {g([r[1] for r in res]):.4f} >=0.90 {sum(r[1] >= .9 for r in res)}/{len(res)} "
          f"losses {sum(r[2] < .98 for r in res)} cuBLAS/pick {g([r[3] for r in res]):.4f} | " +
          " ".join(f"{c} {g(v):.4f}" for c, v in sorted(by.items())) + f"  ({time.time()-t:.0f}s)", flush=True)
