"""Replay (CPU): the shipped model's pick with and without the epilogue term on the recorded fresh draws'
problems with an activation (H100 and H200 sweeps; each pick's time read from its sweep).
Usage: python3 docs/runs/kernels/epilogue_replay.py"""
import sys, collections, math, glob
sys.path.insert(0, "benchmarks")
import fit_selector as fs
from autokernel import best, select
from autokernel.userfiles import read_text
model = select.Model.from_json(read_text("autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"))
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
files = sorted(glob.glob("benchmarks/results/check_random_h100_*.jsonl")) + sorted(glob.glob("benchmarks/results/check_random_h200*.jsonl"))
saved = dict(select.EPILOGUE_EXCESS_NS)
res = {}
for name, table in (("with", saved), ("without", {})):
    select.EPILOGUE_EXCESS_NS.clear(); select.EPILOGUE_EXCESS_NS.update(table)
    out = collections.defaultdict(list)
    for path in files:
        by = collections.defaultdict(list)
        for r in fs.read_rows([path]):
            by[fs.shape_key(r)].append(r)
        for key, rows in by.items():
            r0 = rows[0]
            act = r0.get("activation", "none")
            if act == "none": continue
            fastest = min(r["gpu_ms"] for r in rows if r["config"] is not None and r.get("gpu_ms"))
            pick, default, cublas, choice = fs.pick_for(model, rows, rule)
            out[act].append((path, key, fastest / pick["gpu_ms"], pick["gpu_ms"]))
    res[name] = out
for act in res["with"]:
    w, wo = res["with"][act], res["without"][act]
    gm = lambda v: math.exp(sum(math.log(x[2]) for x in v) / len(v))
    changed = [(a[1], b[3] / a[3]) for a, b in zip(w, wo) if a[3] != b[3]]
    print(act, len(w), "pick/best with %.4f without %.4f" % (gm(w), gm(wo)), "changed", len(changed),
          "old/new geomean %.3f" % (math.exp(sum(math.log(c[1]) for c in changed) / len(changed)) if changed else 1.0),
          sorted(c[1] for c in changed)[:5])
