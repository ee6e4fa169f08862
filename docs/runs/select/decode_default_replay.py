"""Decode defaults that split K where the unsplit 16x64x128 tiles fill less than 0.8 of the SMs
(H100 sweeps `_22` to `_27`, replayed on the CPU with the shipped model; docs/selector.md):
none, R1 (split 2 at K >= 8192), R2 (split 4 below half the SMs, else 2, at K >= 4096), R3 (split 2
at K >= 4096), for M <= 16.

    python3 docs/runs/select/decode_default_replay.py
"""
import sys, glob, math, collections, functools
sys.path.insert(0, "benchmarks")
import fit_selector as fs
from autokernel import best, select, config as cfgmod
R = "benchmarks/results/"
HELD = [R + f"check_random_h100_{i}.jsonl" for i in range(22, 28)]
held = collections.defaultdict(list)
for r in fs.read_rows(HELD): held[fs.shape_key(r)].append(r)
model = best.selector_model("NVIDIA H100 80GB HBM3")
rule = dict(margin=select.DEFAULT_MARGIN, z=select.UNCERTAINTY_Z)
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
orig = cfgmod.default_config
def make(kind):
    @functools.lru_cache(maxsize=None)
    def dc(m, n, k, dtype=None, *, gpu=None, tma=False):
        c = orig(m, n, k, dtype, gpu=gpu, tma=tma) if dtype is not None else orig(m, n, k, gpu=gpu, tma=tma)
        if kind == "none" or m > 16 or c.variant != "grouped" or c.block_n != 64:
            return c
        tiles = -(-m // c.block_m) * -(-n // c.block_n)
        if kind == "R1" and tiles < 0.8 * 132 and k >= 8192:
            return c.model_copy(update={"split_k": 2})
        if kind == "R2" and tiles < 0.8 * 132 and k >= 4096:
            return c.model_copy(update={"split_k": 4 if tiles < 0.5 * 132 else 2})
        if kind == "R3" and tiles < 0.8 * 132 and k >= 4096:
            return c.model_copy(update={"split_k": 2})
        return c
    return dc
def cls(m): return "dec" if m <= 64 else "other"
for kind in ["none", "R1", "R2", "R3"]:
    best.default_config = make(kind)
    best.clear_cache() if hasattr(best, "clear_cache") else None
    res = []
    for key, rs in sorted(held.items()):
        try:
            res.append(fs.judge(model, key, rs, rule))
        except Exception as e:
            print("skip", key[:3], type(e).__name__, str(e)[:80]); continue
    by = collections.defaultdict(list)
    for r in res: by[cls(r[0][0])].append(r)
    print(kind, len(res), "pick/best %.4f losses(vs default) %d torch/pick %.4f" % (g([r[1] for r in res]), sum(r[2] < .98 for r in res), g([r[3] for r in res])),
          " | dec pick/best %.4f torch/pick %.4f torch/default %.4f" % (g([r[1] for r in by['dec']]), g([r[3] for r in by['dec']]), g([r[4] for r in by['dec']])))
