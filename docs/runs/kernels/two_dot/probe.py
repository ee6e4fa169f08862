"""Two-dot tiles (80, 96, 144, 160, 192 wide or tall) against power-of-two tiles of the same
kernel, matmul's pick and cuBLAS, side by side, GPU time, every output checked.
    python3 docs/runs/kernels/two_dot/probe.py SHAPES.csv OUT.jsonl BUDGET_S"""
import sys, json, os
sys.path.insert(0, "benchmarks")
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton
from select_sweep import input_sets, race_checked, shapes_within
from autokernel import matmul, best
from kern import two_dot

MENU = [  # bm1, bm2, bn1, bn2, warps, stages
    (128, 0, 128, 0, 4, 5), (128, 0, 64, 0, 4, 6), (128, 0, 256, 0, 8, 3), (64, 0, 256, 0, 4, 4),
    (128, 0, 64, 16, 4, 6), (128, 0, 64, 32, 4, 6), (128, 0, 128, 16, 4, 5), (128, 0, 128, 32, 4, 4),
    (128, 0, 128, 32, 8, 4), (128, 0, 128, 64, 8, 4), (128, 64, 128, 0, 8, 4), (64, 0, 128, 64, 4, 5),
    (64, 0, 128, 32, 4, 5), (128, 64, 64, 0, 4, 5), (64, 32, 128, 0, 4, 5),
]
LIMIT = 225 * 1024


def stages_for(bm, bn, bk, want, esize=2):
    per = (bm + bn) * bk * esize
    c = bm * bn * esize
    return max(2, min(want, (LIMIT - c) // per))


def label(t):
    bm1, bm2, bn1, bn2, w, s = t
    return f"{bm1}{'+%d' % bm2 if bm2 else ''}x{bn1}{'+%d' % bn2 if bn2 else ''} w{w} s{s}"


out = open(sys.argv[2], "w")
sms = torch.cuda.get_device_properties(0).multi_processor_count
for p in shapes_within(sys.argv[1], float(sys.argv[3])):
    if p.layout != "nt" or p.activation != "none" or p.bias:
        continue
    sets = input_sets(p, 1000)
    a0, b0, _, o0 = sets[0]
    pick = best.ranked(p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, a0.device, tma=True, layout=p.layout).config.short()
    rows = [{"label": "pick", "pick": pick}]
    runs = [(rows[0], lambda a, b, bias, out=None: matmul(a, b, None, None, out=out))]
    for t in MENU:
        bm1, bm2, bn1, bn2, w, s = t
        s = stages_for(bm1 + bm2, bn1 + bn2, 64, s)
        t = (bm1, bm2, bn1, bn2, w, s)
        tiles = triton.cdiv(p.m, bm1 + bm2) * triton.cdiv(p.n, bn1 + bn2)
        row = {"label": label(t), "tile": list(t), "tiles": tiles, "waves": tiles / sms}
        rows.append(row)

        def fn(a, b, bias, out=None, t=t):
            c = out if out is not None else torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
            return two_dot(a, b.t(), c, t[0], t[1], t[2], t[3], warps=t[4], stages=t[5])
        runs.append((row, fn))
    torch_ms = race_checked(p, runs, sets)
    rec = {**p.to_dict(), "torch_ms": torch_ms, "rows": rows}
    out.write(json.dumps(rec) + "\n"); out.flush()
    ok = [r for r in rows if r["status"] == "success"]
    bestr = min(ok, key=lambda r: r["gpu_ms"])
    pow2 = [r for r in ok if r.get("tile") and not r["tile"][1] and not r["tile"][3]]
    bp2 = min(pow2, key=lambda r: r["gpu_ms"]) if pow2 else None
    print(p.m, p.n, p.k, p.dtype, "torch %.1f pick %.1f (%s) best %s %.1f  best pow2 %s %.1f  failed %d" % (
        torch_ms * 1e3, rows[0].get("gpu_ms", float("nan")) * 1e3, pick, bestr["label"], bestr["gpu_ms"] * 1e3,
        bp2 and bp2["label"], bp2 and bp2["gpu_ms"] * 1e3, len(rows) - len(ok)), flush=True)
