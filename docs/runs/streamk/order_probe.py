"""The stream-K tail's two orders side by side (GPU time, timing.race): aligned chunks (this
checkout: one K range per program, the same range across the tail tiles) against
contiguous shares (commit 6fefc39: each program an equal run of the tail's K steps, over
at most two tiles), and the data-parallel kernel of the same tile, on problems whose tiles
leave a partial wave after whole ones. The older package is a copy of 6fefc39 named
autokernel_before, made as docs/launch.md says. Usage:
PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/streamk/order_probe.py OUT.jsonl"""
import json, sys
import torch
import autokernel_before as akb
import autokernel_before.plans  # noqa: F401 (akb.plans)
from autokernel import plans
from autokernel.candidates import CANDIDATES
from autokernel.timing import race

P = torch.cuda.get_device_properties(0).multi_processor_count
SHAPES = [(1440, 1536, 28416), (1314, 1792, 23168), (2048, 1280, 12672), (757, 3584, 6912), (7975, 896, 17664),
          (3584, 1536, 29952), (1059, 28672, 4608), (2048, 2304, 768), (4096, 4096, 4096), (1141, 4608, 3584),
          (3071, 1536, 21888), (8604, 512, 15872), (1739, 5120, 12288), (1322, 3200, 5760), (1986, 1152, 14848),
          (3809, 1152, 3840), (5294, 896, 7680), (935, 21248, 1152), (199, 9088, 6016), (5058, 2816, 8960),
          (734, 5888, 13056), (4400, 512, 24576), (13067, 768, 12160), (2383, 1792, 1792)]
out = open(sys.argv[1], "w")
torch.manual_seed(0)
for m, n, k in SHAPES:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16).t()
    ref = a.float() @ b.float()
    fns, labels = [], []
    for cfg in (c for c in CANDIDATES if c.stream_k):
        tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
        if tiles < P or tiles % P == 0:
            continue
        for label, mod, config in (("dp", plans, cfg.model_copy(update={"stream_k": False})),
                                   ("contiguous", akb.plans, akb.KernelConfig(**cfg.model_dump())),
                                   ("aligned", plans, cfg)):
            c = torch.empty(m, n, device="cuda", dtype=torch.float16)
            launch = mod._plan_kernel(a, b, c, None, "none", 0.01, config, None)
            fn = lambda launch=launch, c=c: launch(a, b, c, c, c)
            fn(); torch.cuda.synchronize()
            err = float((c.float() - ref).norm() / ref.norm())
            assert err < 1e-2, (m, n, k, label, err)
            fns.append(fn); labels.append(f"{cfg.short()} {label} {type(launch).__name__}")
    ms = race(fns, rounds=10, segment_ms=1.0)
    row = dict(m=m, n=n, k=k, us={l: round(t * 1e3, 2) for l, t in zip(labels, ms)})
    out.write(json.dumps(row) + "\n"); out.flush()
    print(f"{m}x{n}x{k}: " + " | ".join(f"{labels[i].split()[0]} dp {ms[i]*1e3:.1f} contig {ms[i+1]*1e3:.1f} aligned {ms[i+2]*1e3:.1f}"
                                         for i in range(0, len(ms), 3)), flush=True)
