"""The DRAM term's last-round share (``select.Model.dram_tail``), replayed on the CPU: for each
share given, each H200 sweep held out of a fit on the others (the H200's datasheet DRAM
ceiling, ``--l2-reread 0.5`` and ``--fill-from`` the H100's model, as the shipped file is made),
the pick compared with the best config the sweep timed; then a fit on all of them picks for
four draws none of them holds; then the H100's twelve sweeps refitted at each share and
replayed on its held-out draws and the broad suite.

    python3 docs/runs/select/dram_tail_replay.py 0 0.3 0.5 0.7 1.0 > docs/runs/select/dram_tail_replay.txt
"""
import glob
import sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel import select  # noqa: E402
from replay_summary import by_shape, summary  # noqa: E402

R = "benchmarks/results/"
HELD = [R + "check_random_h200_16.jsonl", R + "check_random_h200_17.jsonl",
        "docs/runs/select/decode17_extra_h200.jsonl.gz", "docs/runs/select/rows257_extra_h200.jsonl.gz"]
# the H200's sweeps when the share was chosen (select_round_fill_h200 and check_random_h200_18 came after)
LATER = ("select_round_fill_h200", "check_random_h200_18")
FILES = sorted(f for f in glob.glob(R + "*_h200*.jsonl*") if f not in HELD and not any(x in f for x in LATER))
H100_FIT = [R + f for f in """select_refit_sweep_h100.jsonl.gz select_splitk_resweep_h100.jsonl.gz
select_thin_tma_h100.jsonl.gz check_broad_h100_3.jsonl.gz check_broad_h100_9.jsonl.gz select_w4s5_fit_h100.jsonl
check_random_h100_17.jsonl check_random_h100_18.jsonl check_random_h100_19.jsonl check_random_h100_20.jsonl
check_random_h100_21.jsonl select_train_fit_h100.jsonl""".split()]
H100_HELD = [("held-out draws", [R + f"check_random_h100_{i}.jsonl" for i in range(22, 28)]),
             ("broad suite", [R + "check_broad_h100_11.jsonl.gz"])]
RULE = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
H100_FILE = "autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"


rows = fs.read_rows(FILES)
shapes = by_shape(rows)
h100_rows = fs.read_rows(H100_FIT)
print(f"H200: {len(FILES)} sweeps, {len(shapes)} problems; held out: {', '.join(HELD)}")
for share in map(float, sys.argv[1:]):
    options = fs.FitOptions(fill_from=H100_FILE, l2_reread=0.5, dram_tail=share)
    lofo = []
    for path in FILES:
        out = {fs.shape_key(r) for r in fs.read_rows([path])}
        model = fs.fitted("NVIDIA H200", [r for r in rows if fs.shape_key(r) not in out], options)
        lofo += [fs.judge(model, key, shapes[key], RULE) for key in sorted(out)]
    print(f"dram_tail {share}\n  H200, each sweep held out: {summary(lofo)}", flush=True)
    model = fs.fitted("NVIDIA H200", rows, options)
    for path in HELD:
        held = by_shape(fs.read_rows([path]))
        print(f"  H200, {path.split('/')[-1]}: {summary([fs.judge(model, k, held[k], RULE) for k in sorted(held)])}",
              flush=True)
    model = fs.fitted("NVIDIA H100 80GB HBM3", h100_rows, fs.FitOptions(dram_tail=share))
    for name, files in H100_HELD:
        held = by_shape(fs.read_rows(files))
        print(f"  H100, {name}: {summary([fs.judge(model, k, held[k], RULE) for k in sorted(held)])}", flush=True)
