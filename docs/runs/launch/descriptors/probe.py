"""Host time per matmul call where one launch layout meets more operand triples than a
TmaLaunch keeps (16): a model's layers of one shape (one activation, a weight per layer,
a fresh output per call), and outputs given with out= cycling over many buffers. Eager
calls back to back (wall_race), the package before (autokernel_before) against this one, in
one process; GPU time of the same calls (race) beside it; outputs checked.
    PYTHONPATH=$PYTHONPATH:DIR python3 docs/runs/launch/descriptors/probe.py OUT.jsonl
(DIR holds autokernel_before, the package before the change, made as docs/launch.md says.)"""
import sys, json, itertools
import torch
import autokernel, autokernel_before
from autokernel import best
from autokernel import timing
from autokernel.kernels import matmul_tma
out = open(sys.argv[1], "w")
dev = torch.device("cuda")
torch.manual_seed(0)
for m, n, k, layers, dtype in [(256, 1024, 1024, 32, torch.bfloat16), (512, 4096, 4096, 32, torch.bfloat16),
                               (128, 2048, 2048, 64, torch.float16), (1024, 1024, 4096, 8, torch.bfloat16)]:
    x = torch.randn(m, k, device=dev, dtype=dtype)
    ws = [torch.randn(n, k, device=dev, dtype=dtype) / k ** 0.5 for _ in range(layers)]
    outs = [torch.empty(m, n, device=dev, dtype=dtype) for _ in range(layers)]
    ref = (x.float() @ ws[3].float().t())
    for name, lib in (("before", autokernel_before), ("now", autokernel)):
        got = lib.matmul(x, ws[3].t())
        err = float((got.float() - ref).norm() / ref.norm())
        assert err < 2e-2, (name, err)
    def layers_fn(lib):
        cyc = itertools.cycle(ws)
        return lambda: lib.matmul(x, next(cyc).t())
    def outs_fn(lib):
        cyc = itertools.cycle(list(zip(ws[:1] * layers, outs)))
        return lambda: lib.matmul(x, ws[0].t(), out=next(cyc)[1])
    fns = [layers_fn(autokernel_before), layers_fn(autokernel), outs_fn(autokernel_before), outs_fn(autokernel),
           lambda: torch.mm(x, ws[0].t())]
    wall = timing.wall_race(fns)
    gpu = timing.race(fns, rounds=10, segment_ms=1.0)
    tma = matmul_tma.tma_operands(x, ws[0].t(), torch.empty(m, n, device=dev, dtype=dtype)) is not None
    rec = dict(m=m, n=n, k=k, layers=layers, dtype=str(dtype), tma_operands=tma,
               pick=best.ranked(m, n, k, dtype, "none", False, dev, tma=tma, layout="nt").config.short(),
               wall_us=dict(zip(["layers_before", "layers_now", "outs_before", "outs_now", "torch"], [w * 1e3 for w in wall])),
               gpu_us=dict(zip(["layers_before", "layers_now", "outs_before", "outs_now", "torch"], [g * 1e3 for g in gpu])))
    out.write(json.dumps(rec) + "\n"); out.flush()
    print(json.dumps(rec), flush=True)
