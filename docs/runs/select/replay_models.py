"""Replay (CPU): the pick of one selector model (OLD) against another's (NEW) on recorded
sweeps, each pick's GPU time read from the sweep (``fit_selector.pick_for``: among the
configs the sweep timed); a pick the sweep did not time is counted ("unmeasured") and
replaced there by the model's best measured config.

    python3 docs/runs/select/replay_models.py OLD.json NEW.json SWEEP.jsonl[.gz] ...

docs/selector.md, "Refitted on sweeps of the current kernels":
    git show 1065b18:autokernel/configs/selector/nvidia-h100-80gb-hbm3.json > old.json
    python3 docs/runs/select/replay_models.py old.json autokernel/configs/selector/nvidia-h100-80gb-hbm3.json \
        benchmarks/results/check_random_h100_22.jsonl benchmarks/results/check_random_h100_23.jsonl
"""
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import fit_selector as fs  # noqa: E402
from autokernel import best, select  # noqa: E402
from autokernel.records import torch_dtype  # noqa: E402
from autokernel.userfiles import read_text  # noqa: E402

old, new = (select.Model.from_json(read_text(p), p) for p in sys.argv[1:3])
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
for path in sys.argv[3:]:
    by = collections.defaultdict(list)
    for r in fs.read_rows([path]):
        by[fs.shape_key(r)].append(r)
    out, unmeasured, times = collections.defaultdict(list), collections.Counter(), {}
    for key, rows in by.items():
        r0 = rows[0]
        fastest = min(r["gpu_ms"] for r in rows if r["config"] is not None and r.get("gpu_ms"))
        for name, model in (("old", old), ("new", new)):
            free = best.pick(r0["m"], r0["n"], r0["k"], torch_dtype(r0["dtype"]), r0.get("activation", "none"),
                             r0.get("bias", False), r0["layout"], device=r0["device"], model=model, rank=True)
            pick, default, cublas, choice = fs.pick_for(model, rows, rule)
            unmeasured[name] += free.choice.config != choice.config
            times[key, name] = pick["gpu_ms"]
            out[name].append((fastest / pick["gpu_ms"], default["gpu_ms"] / pick["gpu_ms"], cublas / pick["gpu_ms"]))
    print(path)
    for name, v in out.items():
        print(f"  {name}: pick/best {fs.geomean(x[0] for x in v):.4f}, >= 0.90 on {sum(x[0] >= 0.9 for x in v)} of "
              f"{len(v)}, > 2 % slower than the default on {sum(x[1] < 0.98 for x in v)}, torch/pick "
              f"{fs.geomean(x[2] for x in v):.4f}, unmeasured picks {unmeasured[name]}")
    changed = sorted((times[k, "old"] / times[k, "new"], k) for k in by if times[k, "old"] != times[k, "new"])
    if changed:
        print(f"  picks changed {len(changed)}: old/new {fs.geomean(c[0] for c in changed):.3f} "
              f"({changed[0][0]:.3f} to {changed[-1][0]:.3f})")
        for ratio, k in changed:
            print(f"    {k[0]}x{k[1]}x{k[2]} {k[3]} {k[4]}: {ratio:.3f}")
