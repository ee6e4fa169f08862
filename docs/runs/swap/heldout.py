"""The swap_ab candidates' constants fitted on half of a sweep's problems and joined to the
shipped H200 model (as ``fit_selector.py --add-to`` does), then matmul's pick replayed on the
other half (and the halves the other way round): pick / best, pick / default and cuBLAS / pick
against the shipped model's pick, which cannot score them.
    python3 docs/runs/swap/heldout.py docs/runs/swap/swapfit_seed96615_h200.jsonl.gz"""
import collections, gzip, json, sys
sys.path.insert(0, "benchmarks")
from fit_selector import FitOptions, fitted, judge, shape_key, summarize
from autokernel import select
from autokernel.userfiles import read_text

path = sys.argv[1]
rows = [json.loads(l) for l in (gzip.open(path, "rt") if path.endswith(".gz") else open(path))]
shipped = select.Model.from_json(read_text("autokernel/configs/selector/nvidia-h200.json"))
opts = FitOptions(l2_reread=shipped.l2_reread, dram_tail=shipped.dram_tail)
by_shape = collections.defaultdict(list)
for r in rows:
    by_shape[shape_key(r)].append(r)
keys = sorted(by_shape)
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
before, after = [], []
for half in (keys[0::2], keys[1::2]):
    held = set(half)
    model = fitted(rows[0]["device"], [r for r in rows if shape_key(r) not in held], opts)
    added = {k: c for k, c in model.constants.items() if k not in shipped.constants}
    joined = select.Model(shipped.device, shipped.programs, {**shipped.constants, **added},
                          {**shipped.errors, **{k: model.errors[k] for k in added if k in model.errors}},
                          l2_reread=shipped.l2_reread, dram_tail=shipped.dram_tail)
    print(f"added {len(added)} configs:", ", ".join(sorted(select.KernelConfig.model_validate_json(k).short() for k in added)))
    before += [judge(shipped, k, by_shape[k], rule) for k in half]
    after += [judge(joined, k, by_shape[k], rule) for k in half]
for name, res in (("shipped model", before), ("with the swap_ab constants, held out", after)):
    for lo, hi in ((17, 32), (33, 64), (1, 10 ** 9)):
        part = [r for r in res if r is not None and lo <= r[0][0] <= hi]
        summarize(part, f"\n{name}, M {lo}-{hi}: {len(part)} problems")
