"""Does more data move the H100 model? Fitted on the shipped model's twelve files with and without
some of the fresh draws `_22` to `_26`, picking for the others (CPU): docs/selector.md.

    python3 docs/runs/select/more_data_replay.py
"""
import sys, math, collections
sys.path.insert(0, "benchmarks")
import fit_selector as fs
from autokernel import select
R = "benchmarks/results/"
FIT = [R + f for f in ["select_refit_sweep_h100.jsonl.gz", "select_splitk_resweep_h100.jsonl.gz", "select_thin_tma_h100.jsonl.gz",
       "check_broad_h100_3.jsonl.gz", "check_broad_h100_9.jsonl", "select_w4s5_fit_h100.jsonl"]] + \
      [R + f"check_random_h100_{i}.jsonl" for i in range(17, 22)] + [R + "select_train_fit_h100.jsonl"]
A = fs.FitOptions()
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
def run(fit, held_files, name):
    rows = fs.read_rows(fit)
    held = collections.defaultdict(list)
    for r in fs.read_rows(held_files): held[fs.shape_key(r)].append(r)
    model = fs.fitted("NVIDIA H100 80GB HBM3", rows, A)
    res = [fs.judge(model, key, rs, rule) for key, rs in sorted(held.items())]
    print(f"{name}: n={len(res)} pick/best {g([r[1] for r in res]):.4f} >=0.90 {sum(r[1] >= .9 for r in res)} losses {sum(r[2] < .98 for r in res)} cuBLAS/pick {g([r[3] for r in res]):.4f}")
H = lambda *ix: [R + f"check_random_h100_{i}.jsonl" for i in ix]
run(FIT, H(25, 26), "fit12 -> 25,26")
run(FIT + H(22, 23, 24), H(25, 26), "fit12+22-24 -> 25,26")
run(FIT, H(22, 23), "fit12 -> 22,23")
run(FIT + H(24, 25, 26), H(22, 23), "fit12+24-26 -> 22,23")
run(FIT, H(24), "fit12 -> 24")
run(FIT + H(22, 23, 25, 26), H(24), "fit12+22,23,25,26 -> 24")
