"""Rows that split 32-byte sectors: matmul's pick on the operands as they are against copies of
A, of B and of both into rows padded to 32 bytes (the copy inside the timed call), each with
the copies' own pick; cuBLAS beside. GPU time; every output checked."""
import sys, json, csv, torch
from autokernel import matmul, plans, best
from _race import nt_sets, race_checked
out = open(sys.argv[1], "w")
rows = list(csv.DictReader(open(sys.argv[2])))
dev = torch.device("cuda")
for r in rows:
    m, n, k, dtype = int(r["M"]), int(r["N"]), int(r["K"]), getattr(torch, r["dtype"])
    sets = nt_sets(m, n, k, dtype)
    a0, b0, c0 = sets[0]
    picks = {c: best.resolve(m, n, k, dtype, "none", False, dev, tma=True, layout="nt", copied=c)[0]
             for c in ((False, False), (True, False), (False, True), (True, True))}
    pads = {c: plans.Padding(a0, b0, *c) for c in picks if any(c)}
    ref = a0.float() @ b0.float()
    cases = {"cublas": lambda s: torch.mm(s[0], s[1], out=s[2]),
             "as_is": lambda s: matmul(s[0], s[1], config=picks[False, False], out=s[2])}
    for c, name in (((True, False), "copy_A"), ((False, True), "copy_B"), ((True, True), "copy_AB")):
        cases[name] = lambda s, c=c: matmul(*pads[c](s[0], s[1]), config=picks[c], out=s[2])
    err, us = race_checked(cases, sets, ref, 2, rounds=11, segment_ms=1.5)
    rec = {"m": m, "n": n, "k": k, "dtype": r["dtype"], "picks": {str(c): p.short() for c, p in picks.items()},
           "us": us, "err": err}
    out.write(json.dumps(rec) + "\n"); out.flush()
    print(m, n, k, r["dtype"], rec["us"], flush=True)
