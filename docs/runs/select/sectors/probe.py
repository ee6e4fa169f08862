"""Rows 16-byte but not 128-byte aligned: the pick on the operands as they are, on copies padded
to 128-byte rows (the copy inside the timed call: A, B, both), on operands already padded
(no copy), and cuBLAS; GPU time, side by side; every output checked."""
import sys, json, torch
from autokernel import matmul, api, plans
from autokernel.kernels import aligned
from _race import race_checked
aligned.ROW_ALIGN_BYTES = 128
out = open(sys.argv[1], "w")
def padded(t, kp):  # a row-major [r, c] with its rows padded to kp, as a view
    buf = torch.zeros(t.shape[0], kp, device=t.device, dtype=t.dtype)
    buf[:, :t.shape[1]] = t
    return buf[:, :t.shape[1]]
for spec in sys.argv[2:]:
    m, n, k, dt, layout = spec.split("x")
    m, n, k = int(m), int(n), int(k); dtype = getattr(torch, dt)
    sets = []
    for s in range(3):
        g = torch.Generator(device="cuda").manual_seed(s)
        a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
        if layout == "nt":
            w = torch.randn(n, k, device="cuda", dtype=dtype, generator=g); b = w.t()
            bp = padded(w, -(-k // 64) * 64).t()
        else:
            b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
            bp = padded(b, -(-n // 64) * 64)
        ap = padded(a, -(-k // 64) * 64)
        sets.append((a, b, ap, bp, torch.empty(m, n, device="cuda", dtype=dtype)))
    a0, b0, _, _, c0 = sets[0]
    pick = api.resolve_config(None, m, n, k, dtype, "none", False, torch.device("cuda"),
                              tma=api.tma_runs(a0, b0, c0), layout=plans.operand_layout(a0, b0))
    pads = {nm: plans.Padding(a0, b0, pa, pb) for nm, pa, pb in (("A", True, False), ("B", False, True), ("AB", True, True))}
    ref = a0.float() @ b0.float()
    cases = {
        "cublas": lambda s: torch.mm(s[0], s[1], out=s[4]),
        "pick": lambda s: matmul(s[0], s[1], config=pick, out=s[4]),
        "copy_A": lambda s: matmul(*pads["A"](s[0], s[1]), config=pick, out=s[4]),
        "copy_B": lambda s: matmul(*pads["B"](s[0], s[1]), config=pick, out=s[4]),
        "copy_AB": lambda s: matmul(*pads["AB"](s[0], s[1]), config=pick, out=s[4]),
        "pre_A": lambda s: matmul(s[2], s[1], config=pick, out=s[4]),
        "pre_B": lambda s: matmul(s[0], s[3], config=pick, out=s[4]),
        "pre_AB": lambda s: matmul(s[2], s[3], config=pick, out=s[4]),
        "copy_only_AB": lambda s: pads["AB"](s[0], s[1]),
    }
    err, us = race_checked(cases, sets, ref, 4, rounds=15, segment_ms=2.0, unchecked=("copy_only_AB",))
    rec = {"m": m, "n": n, "k": k, "dtype": dt, "layout": layout, "pick": pick.short(), "us": us, "err": err}
    out.write(json.dumps(rec) + "\n"); out.flush()
    print(spec, pick.short(), " ".join(f"{nm} {v}" for nm, v in us.items()), "maxerr", max(err.values()), flush=True)
