"""Operands whose rows take no 16-byte vectors, copied into rows padded to 16 bytes (the rule
before) and to 32 (now), each with the copies' pick, copy inside the timed call; cuBLAS beside.
GPU time; every output checked."""
import sys, json, torch
from autokernel import matmul, plans, best
from autokernel.kernels import aligned
from _race import nt_sets, race_checked
out = open(sys.argv[1], "w")
for spec in sys.argv[2:]:
    m, n, k, dt = spec.split("x"); m, n, k = int(m), int(n), int(k); dtype = getattr(torch, dt)
    sets = nt_sets(m, n, k, dtype)
    a0, b0, c0 = sets[0]
    pads = plans._padded_operands(m, n, k, dtype, lambda: True, lambda: True)
    cfg = best.resolve(m, n, k, dtype, "none", False, torch.device("cuda"), tma=True, layout="nt", copied=pads)[0]
    made = {}
    for bytes_ in (16, 32):
        aligned.ROW_ALIGN_BYTES = bytes_
        made[bytes_] = plans.Padding(a0, b0, *pads)
    ref = a0.float() @ b0.float()
    cases = {"cublas": lambda s: torch.mm(s[0], s[1], out=s[2]),
             "pad16": lambda s: matmul(*made[16](s[0], s[1]), config=cfg, out=s[2]),
             "pad32": lambda s: matmul(*made[32](s[0], s[1]), config=cfg, out=s[2])}
    err, us = race_checked(cases, sets, ref, 2, rounds=15, segment_ms=2.0)
    rec = {"m": m, "n": n, "k": k, "dtype": dt, "pads": pads, "config": cfg.short(),
           "us": us, "err": err}
    out.write(json.dumps(rec) + "\n"); out.flush(); print(json.dumps(rec), flush=True)
