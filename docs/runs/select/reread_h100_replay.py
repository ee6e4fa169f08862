"""The L2 term's share for operand re-reads (``select.Model.l2_reread``) on the H100 (CPU): its
model's twelve sweeps refitted at each share given, the picks replayed on the draws and the
broad suite the fit does not hold (``check_random_h100_22`` to ``_27``, ``check_broad_h100_11``).

    python3 docs/runs/select/reread_h100_replay.py 1.0 0.5 > docs/runs/select/reread_h100_replay.txt
"""
import sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel import select  # noqa: E402
from replay_summary import by_shape, class_of, geomean  # noqa: E402

R = "benchmarks/results/"
FIT = """select_refit_sweep_h100.jsonl.gz select_splitk_resweep_h100.jsonl.gz select_thin_tma_h100.jsonl.gz
check_broad_h100_3.jsonl.gz check_broad_h100_9.jsonl.gz select_w4s5_fit_h100.jsonl check_random_h100_17.jsonl
check_random_h100_18.jsonl check_random_h100_19.jsonl check_random_h100_20.jsonl check_random_h100_21.jsonl
select_train_fit_h100.jsonl""".split()
SETS = [("held-out draws", [R + f"check_random_h100_{i}.jsonl" for i in range(22, 28)]),
        ("broad suite", [R + "check_broad_h100_11.jsonl.gz"])]
RULE = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)


rows = fs.read_rows([R + f for f in FIT])
for share in map(float, sys.argv[1:]):
    model = fs.fitted("NVIDIA H100 80GB HBM3", rows, fs.FitOptions(l2_reread=share))
    for name, files in SETS:
        shapes = by_shape(fs.read_rows(files))
        res = [x for x in (fs.judge(model, k, shapes[k], RULE) for k in sorted(shapes)) if x]
        by_class = " ".join(f"{c} {geomean(x[1] for x in res if class_of(x[0]) == c):.4f}"
                            for c in ("decode", "skinny", "mid", "large"))
        print(f"l2_reread {share}, {name}: pick / best {geomean(x[1] for x in res):.4f}, >= 0.90 "
              f"{sum(x[1] >= .9 for x in res)} of {len(res)}, > 2 % slower than the default "
              f"{sum(x[2] < .98 for x in res)}, torch / pick {geomean(x[3] for x in res):.4f} | {by_class}", flush=True)
