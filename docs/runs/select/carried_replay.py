"""Replay (CPU) of the selector model carried to the H200 on the H200's recorded sweeps:
the picks and prediction errors of the H100's model as it is against the carried one
(``best.sibling_model``), and the two ratios fitted to one draw's timings then tried on the
other. docs/selector.md, "On a GPU no model was fitted for":

    python3 docs/runs/select/carried_replay.py benchmarks/results/check_random_h200_sibling.jsonl \
        benchmarks/results/check_random_h200_sibling_2.jsonl
"""
import collections
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import fit_selector as fs  # noqa: E402
from autokernel import best, select  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402
from autokernel.records import torch_dtype  # noqa: E402

H200 = "NVIDIA H200"
h100 = best.selector_model("NVIDIA H100 80GB HBM3")
carried = best.sibling_model(H200)
as_is = select.Model(H200, h100.programs, dict(h100.constants), dict(h100.errors))
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def log_errors(model, rows):
    out = []
    for row in rows:
        if row.get("config") is None or not row.get("gpu_ms"):
            continue
        config = KernelConfig.from_dict(row["config"])
        if select._tail_twin(config):
            continue
        dtype = torch_dtype(row["dtype"])
        layout = row.get("layout", "nt")
        tma = select.tma_aligned(row["m"], row["n"], row["k"], dtype, layout)
        found = model.constants_for(config, tma)
        if found is None or select._left_out(config, row, tma):
            continue
        us = found[0].predict_us(*select.features(config, row["m"], row["n"], row["k"], dtype, tma, model.programs),
                                 b_rows=select.b_row_major(layout))
        out.append(math.log(us / (row["gpu_ms"] * 1e3)))
    return out


def replay(model, rows):
    by = collections.defaultdict(list)
    for r in rows:
        by[fs.shape_key(r)].append(r)
    v = []
    for key, shape_rows in by.items():
        pick, default, cublas, _ = fs.pick_for(model, shape_rows, rule)
        fastest = min(r["gpu_ms"] for r in shape_rows if r["config"] is not None and r.get("gpu_ms"))
        v.append((fastest / pick["gpu_ms"], default["gpu_ms"] / pick["gpu_ms"], cublas / pick["gpu_ms"]))
    return (f"pick/best {geomean(x[0] for x in v):.4f}, torch/pick {geomean(x[2] for x in v):.4f}, "
            f"> 2 % slower than the default {sum(x[1] < 0.98 for x in v)} of {len(v)}")


draws = [fs.read_rows([path]) for path in sys.argv[1:]]
for path, rows in zip(sys.argv[1:], draws):
    print(path)
    for name, model in (("as it is", as_is), ("carried", carried)):
        e = sorted(log_errors(model, rows))
        print(f"  {name}: {replay(model, rows)}; prediction error RMS {math.sqrt(sum(x * x for x in e) / len(e)):.3f}, "
              f"median {e[len(e) // 2]:+.3f} over {len(e)} timed configs")
for i, rows in enumerate(draws):
    fits = [(sum(x * x for x in log_errors(select.carried(h100, H200, 132, m, c), rows)), m, c)
            for m in (1.0, 1.1, 1.2, 1.3, 1.35, 1.4, 1.43, 1.5, 1.6, 1.7) for c in (0.92, 0.96, 1.0, 1.04, 1.08)]
    _, m, c = min(fits)
    for j, other in enumerate(draws):
        if j != i:
            print(f"ratios fitted to {sys.argv[1 + i]}: bandwidth {m}x, throughput {c}x; on {sys.argv[1 + j]}: "
                  f"{replay(select.carried(h100, H200, 132, m, c), other)}")
