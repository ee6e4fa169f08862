"""The H200's selector model: the H100's carried over by the datasheets' ratios against one fitted on
the H200's own sweeps, both replayed on the H200's timings (CPU). Each sweep file held out in turn
(picked for by a model fitted on the others), then 10-fold cross-validation over all shapes.

    python3 docs/runs/select/h200_fit_replay.py
"""
import collections, math, random, sys

sys.path.insert(0, "benchmarks")
import fit_selector as fs  # noqa: E402
from autokernel import best, select  # noqa: E402

R = "benchmarks/results/"
FILES = {"broad": R + "check_broad_h200_1.jsonl.gz", "seed 28174": R + "check_random_h200_sibling.jsonl",
         "seed 29419": R + "check_random_h200_sibling_2.jsonl", "seed 32590": R + "check_random_h200_3.jsonl"}
DEVICE = "NVIDIA H200"
RULE = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)


ARGS = fs.FitOptions(dram_scale=1.0)  # as this replay ran: the H100's DRAM ceiling (fit_selector now scales it)


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values))


def by_shape(rows):
    shapes = collections.defaultdict(list)
    for row in rows:
        shapes[fs.shape_key(row)].append(row)
    return shapes


def summary(results):
    return (f"pick / best {geomean(r[1] for r in results):.4f}, >= 0.90 on {sum(r[1] >= 0.9 for r in results)}, "
            f"> 2 % slower than the default {sum(r[2] < 0.98 for r in results)}, torch / pick {geomean(r[3] for r in results):.4f}")


carried = best.sibling_model(DEVICE)
print("carried:", carried.based_on)
rows = fs.read_rows(list(FILES.values()))
for name, path in FILES.items():
    held = by_shape(fs.read_rows([path]))
    fitted = fs.fitted(DEVICE, fs.read_rows([p for n, p in FILES.items() if n != name]), ARGS)
    print(f"{name} held out ({len(held)}): carried: {summary([fs.judge(carried, k, rs, RULE) for k, rs in held.items()])}")
    print(f"    fitted on the other three: {summary([fs.judge(fitted, k, rs, RULE) for k, rs in held.items()])}")
shapes = by_shape(rows)
keys = sorted(shapes)
random.Random(0).shuffle(keys)
carried_results, fitted_results = [], []
for fold in range(10):
    held = set(keys[fold::10])
    model = fs.fitted(DEVICE, [r for r in rows if fs.shape_key(r) not in held], ARGS)
    fitted_results += [fs.judge(model, k, shapes[k], RULE) for k in keys[fold::10]]
    carried_results += [fs.judge(carried, k, shapes[k], RULE) for k in keys[fold::10]]
print(f"10-fold CV over {len(keys)} shapes: carried: {summary(carried_results)}")
print(f"    fitted: {summary(fitted_results)}")
