"""The H200's own selector model against the H100's carried to it, replayed on the H200's sweeps
(CPU): each sweep held out of a fit on the others (``fit_selector.fitted`` with the DRAM ceiling of
the H200's datasheet and ``--fill-from`` the H100's model, as the shipped file is made), the pick
compared with the best config the sweep timed.

    python3 docs/runs/select/h200_own_fit_replay.py > docs/runs/select/h200_own_fit_replay.txt
"""
import collections
import glob
import math
import sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel import best, select  # noqa: E402
from autokernel.report import problem_class  # noqa: E402
from autokernel.tuning.shapes import Problem  # noqa: E402
from autokernel.userfiles import read_text  # noqa: E402

H100_FILE = "autokernel/configs/selector/nvidia-h100-80gb-hbm3.json"
DEVICE = "NVIDIA H200"
RULE = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)


ARGS = fs.FitOptions(fill_from=H100_FILE)


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def cls(key):
    m, n, k, dtype, layout, activation, bias = key[:7]
    return problem_class(Problem(m, n, k, dtype, activation, bias, layout))


def summary(results):
    results = [r for r in results if r]
    by = " ".join(f"{c} {geomean(r[1] for r in results if cls(r[0]) == c):.4f}"
                  for c in ("decode", "skinny", "mid", "large"))
    return (f"pick / best {geomean(r[1] for r in results):.4f} ({by}), >= 0.90 on "
            f"{sum(r[1] >= 0.9 for r in results)} of {len(results)}, > 2 % slower than the default "
            f"{sum(r[2] < 0.98 for r in results)}, torch / pick {geomean(r[3] for r in results):.4f}")


carried = best.carry(select.Model.from_json(read_text(H100_FILE)), DEVICE)
files = sorted(glob.glob("benchmarks/results/*_h200*.jsonl*"))
rows = fs.read_rows(files)
shapes = collections.defaultdict(list)
for row in rows:
    shapes[fs.shape_key(row)].append(row)
carried_results, fitted_results = [], []
for path in files:
    held = sorted({fs.shape_key(r) for r in fs.read_rows([path])})
    left_out = set(held)
    model = fs.fitted(DEVICE, [r for r in rows if fs.shape_key(r) not in left_out], ARGS)
    c = [fs.judge(carried, key, shapes[key], RULE) for key in held]
    f = [fs.judge(model, key, shapes[key], RULE) for key in held]
    carried_results += c
    fitted_results += f
    print(f"{path.split('/')[-1]:36s} {len(held):4d} problems: carried {geomean(r[1] for r in c if r):.4f}, "
          f"own fit {geomean(r[1] for r in f if r):.4f}", flush=True)
print("carried:", summary(carried_results))
print("own fit:", summary(fitted_results))
