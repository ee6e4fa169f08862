"""Operands with padded rows and column slices (leading strides that are and are not
16-byte multiples, M and N that are not multiples of the load vector) through the pointer
kernels on the GPU, each config checked against a float32 reference; stops at the first
failure (a CUDA fault leaves the process unusable).
Usage: python3 docs/runs/kernels/stride_stress.py"""
import itertools, sys, torch, autokernel as ak
from autokernel.candidates import CANDIDATES
from autokernel.evaluate import reference
from autokernel.kernels.matmul import lead_hint
torch.manual_seed(0)
configs = [None] + [c for c in CANDIDATES if c.variant != "tma"][::12]
print("configs", len(configs), flush=True)
n_ok = n_refused = 0
cases = 0
for dtype in (torch.float16, torch.float32):
    for m, n, k in [(32, 30, 40), (17, 60, 36), (129, 94, 70), (200, 36, 300)]:
        for pad_a, pad_b in [(1, 2), (2, 1), (2, 2), (1, 1), (0, 0)]:
            for tb in (False, True):
                if pad_a == 0:  # column slices: rows 16-byte aligned, M or N not a multiple of 8
                    a = torch.randn(k, m + 16 - m % 16, device="cuda", dtype=dtype)[:, :m].t()
                    b = (torch.randn(k, n + 16 - n % 16, device="cuda", dtype=dtype)[:, :n] if not tb else
                         torch.randn(n, k + 16 - k % 16, device="cuda", dtype=dtype)[:, :k].t())
                else:
                    a = torch.randn(m * pad_a, k, device="cuda", dtype=dtype)[::pad_a]
                    if tb:
                        b = torch.randn(n * pad_b, k, device="cuda", dtype=dtype)[::pad_b].t()
                    else:
                        b = torch.randn(k * pad_b, n, device="cuda", dtype=dtype)[::pad_b]
                ref = reference(a, b, None, "none")
                for cfg in configs:
                    cases += 1
                    label = f"{dtype} {m}x{n}x{k} a{tuple(a.stride())} b{tuple(b.stride())} hints {lead_hint(a)},{lead_hint(b)} {cfg.short() if cfg else 'pick'}"
                    try:
                        out = ak.matmul(a, b, config=cfg)
                        torch.cuda.synchronize()
                    except Exception as e:
                        if "shared memory" in str(e) or "ConfigError" in type(e).__name__:
                            n_refused += 1; continue
                        print("FAIL", label, type(e).__name__, str(e)[:200], flush=True); sys.exit(1)
                    err = float((out.float() - ref).norm() / ref.norm())
                    if err > 2e-2:
                        print("WRONG", label, err, flush=True); sys.exit(1)
                    n_ok += 1
print(f"{cases} cases: {n_ok} ok, {n_refused} refused, 0 failed", flush=True)
