"""Which refactor moved the pointer kernels (as run from commit ee3909d, with .old/autokernel_old = 3f104b7 and .var/autokernel_v2, _v3 its variants renamed on import; PYTHONPATH=.old:.var): old (3f104b7), new (HEAD), v2 (HEAD with the old
one-pass body), v3 (HEAD with the old store_epilogue); raced, three repeats."""
import math, sys, torch
from autokernel.timing import race
mods = {}
for name, pkg in (("old", "autokernel_old"), ("new", "autokernel"), ("v2", "autokernel_v2"), ("v3", "autokernel_v3")):
    mods[name] = (__import__(pkg + ".api", fromlist=["x"]), __import__(pkg + ".config", fromlist=["x"]).KernelConfig)
cases = [(1024, 4096, 4096, dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")),
         (4096, 4096, 4096, dict(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4, variant="grouped")),
         (2048, 2816, 1024, dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, variant="grouped", stream_k=True)),
         (2048, 2048, 2048, dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, variant="grouped"))]
for m, n, k, f in cases:
    sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * 2))))
    ins = [(torch.randn(m, k, device="cuda", dtype=torch.float16), torch.randn(n, k, device="cuda", dtype=torch.float16).t(),
            torch.empty(m, n, device="cuda", dtype=torch.float16)) for _ in range(sets)]
    fns = []
    for name, (api, KC) in mods.items():
        cfg = KC(**f); it = [0]
        def fn(api=api, cfg=cfg, it=it):
            s = ins[it[0] % sets]; it[0] += 1
            api.launch(s[0], s[1], s[2], None, "none", 0.01, cfg)
        fns.append(fn)
    for rep in range(3):
        ms = race(fns, rounds=20, segment_ms=1.0)
        print(f"{m}x{n}x{k} {'sk' if f.get('stream_k') else f['block_n']} rep{rep}: " + " ".join(f"{nm} {t*1e3:.1f}" for nm, t in zip(mods, ms)), flush=True)
