"""Split-K in one launch (the last program of a tile sums the partials) against the previous
two launches (partial kernel + reduction kernel, .old/autokernel_old from 3f104b7), side by
side with cuBLAS, GPU time (timing.race), nt layout, no epilogue. The one-launch kernel is
docs/runs/kernels/splitk_one_launch.patch on commit 98935ff (`git apply` it first): each
program stores its partial tile, then counts itself in the tile's counter (an acq_rel
atomic); the last to arrive sums the slices in slice order and runs the epilogue. Not kept.
Usage: PYTHONPATH=.old:$PYTHONPATH python3 docs/runs/kernels/splitk_one_launch_probe.py OUT.jsonl"""
import json, math, sys
import torch
from autokernel_old import api as api_old
from autokernel_old.config import KernelConfig as OldConfig
from autokernel import api as api_new
from autokernel.config import KernelConfig
from autokernel.timing import race

out = open(sys.argv[1], "w")
SHAPES = [(1, 4096, 4096), (1, 4096, 11008), (1, 640, 13824), (2, 1152, 8832), (3, 576, 30592), (8, 576, 15616),
          (14, 768, 9728), (16, 4096, 4096), (16, 4096, 11008), (24, 1152, 32768), (25, 6912, 9728),
          (32, 11008, 4096), (45, 3200, 12928), (64, 1024, 8192), (64, 4096, 11008), (68, 1280, 9472),
          (128, 1024, 8192), (128, 4096, 11008), (256, 4096, 14336), (1024, 1024, 8192)]


def configs(m, k):
    bm = 16 if m <= 16 else 32 if m <= 32 else 64
    for bn, bk, ss in ((64, 128, (2, 4, 8, 16)), (128, 64, (2, 4))):
        for s in ss:
            if k // s >= 2 * bk:
                yield dict(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=4, num_stages=4,
                           variant="grouped", split_k=s)


for m, n, k in SHAPES:
    for dt in ("float16", "bfloat16"):
        dtype = getattr(torch, dt)
        torch.manual_seed(m * 7 + n + k)
        sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * dtype.itemsize))))
        ins = [(torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(n, k, device="cuda", dtype=dtype).t(),
                torch.empty(m, n, device="cuda", dtype=dtype)) for _ in range(sets)]
        ref = ins[0][0].float() @ ins[0][1].float()
        fns, labels, errs = [], [], {}
        for fields in configs(m, k):
            for name, api, Cfg in (("old", api_old, OldConfig), ("new", api_new, KernelConfig)):
                cfg = Cfg(**fields)
                c = ins[0][2].fill_(float("nan"))
                api.launch(ins[0][0], ins[0][1], c, None, "none", 0.01, cfg)
                torch.cuda.synchronize()
                errs[f"{name} k{fields['split_k']} {fields['block_n']}"] = float((c.float() - ref).norm() / ref.norm())
                it = [0]
                def fn(api=api, cfg=cfg, it=it):
                    s = ins[it[0] % sets]; it[0] += 1
                    api.launch(s[0], s[1], s[2], None, "none", 0.01, cfg)
                fns.append(fn); labels.append((name, fields))
        it = [0]
        def torch_fn(it=it):
            s = ins[it[0] % sets]; it[0] += 1
            torch.mm(s[0], s[1], out=s[2])
        ms = race(fns + [torch_fn], rounds=20, segment_ms=1.0)
        cublas = ms[-1]
        rows = [dict(m=m, n=n, k=k, dtype=dt, kernel=name, config=f, ms=t, torch_ms=cublas)
                for (name, f), t in zip(labels, ms[:-1])]
        for r in rows:
            print(json.dumps(r), file=out, flush=True)
        best = {v: min(r["ms"] for r in rows if r["kernel"] == v) for v in ("old", "new")}
        pairs = [rows[i]["ms"] / rows[i + 1]["ms"] for i in range(0, len(rows), 2)]
        print(f"{m}x{n}x{k} {dt}: cuBLAS {cublas*1e3:.1f}us best old {best['old']*1e3:.1f} new {best['new']*1e3:.1f} "
              f"cuBLAS/best old {cublas/best['old']:.3f} new {cublas/best['new']:.3f}; new/old per config "
              f"{min(pairs):.2f}-{max(pairs):.2f}; max err {max(errs.values()):.1e}", flush=True)
