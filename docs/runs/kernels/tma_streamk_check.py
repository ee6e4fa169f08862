"""GPU check of the TMA kernel's stream-K tail: random problems with a partial last wave
(and some with none, or with fewer tiles than SMs; a sixth with a tail of more tiles than half
the SMs cut in heads and tails), every stream-K candidate, random dtype,
layout, bias and activation, the output poisoned with NaN first and compared with a float32
reference; one in three also through autokernel.linear's forward and backward (Z stored by
the tail's fix-up); each launch twice, bit for bit. Usage: python3 tma_streamk_check.py [N] [SEED]"""
import random, sys
import torch, autokernel as ak
from autokernel.candidates import CANDIDATES
from autokernel.config import ConfigError
from autokernel.evaluate import reference, linear_reference
from autokernel.kernels.matmul_tma import tail_cut

n_cases, seed = (int(sys.argv[1]) if len(sys.argv) > 1 else 60), (int(sys.argv[2]) if len(sys.argv) > 2 else 1)
rng = random.Random(seed)
P = torch.cuda.get_device_properties(0).multi_processor_count
SK = [c for c in CANDIDATES if c.stream_k]
failed = tails = heads = refused = 0
for case in range(n_cases):
    cfg = rng.choice(SK)
    dtype = rng.choice([torch.float16, torch.bfloat16])
    want = rng.choice(["tail"] * 3 + ["heads", "whole", "few"])
    while True:
        m = 8 * rng.randint(1, 700); n = 8 * rng.randint(1, 900); k = 8 * rng.randint(16, 800)
        tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
        partials, head = tail_cut(tiles, P, -(-k // cfg.block_k))
        kind = "few" if tiles < P else "whole" if tiles % P == 0 else "tail"
        if kind == want or (want == "heads" and head) or (want == "whole" and rng.random() < 0.05):
            break
    tails += kind == "tail"
    heads += bool(head)
    layout = rng.choice(["nn", "nt", "tn", "tt"])
    a = torch.randn(k, m, device="cuda", dtype=dtype).t() if layout[0] == "t" else torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype).t() if layout[1] == "t" else torch.randn(k, n, device="cuda", dtype=dtype)
    a = a / k ** 0.5
    bias = torch.randn(n, device="cuda", dtype=dtype) if rng.random() < 0.5 else None
    act = rng.choice(["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"])
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    ak.matmul(a, b, bias, act, config=cfg, out=out)
    again = torch.full_like(out, float("nan"))
    ak.matmul(a, b, bias, act, config=cfg, out=again)
    ref = reference(a, b, bias, act)
    err = float((out.float() - ref).norm() / ref.norm().clamp_min(1e-30))
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-2
    ok = bool(torch.isfinite(out).all()) and err < tol and torch.equal(out, again)
    what = f"{m}x{n}x{k} {str(dtype)[6:]} {layout} {act} bias={bias is not None} {cfg.short()} tiles={tiles} ({kind}, {tiles % P} tail, {partials} partials, head of {head} steps)"
    if ok and case % 3 == 0:
        x = a.detach().clone().requires_grad_()
        w = b.t().detach().clone().requires_grad_()
        bb = bias.detach().clone().requires_grad_() if bias is not None else None
        try:
            y = ak.linear(x, w, bb, act, config=cfg)
        except ConfigError as exc:  # storing Z needs more shared memory: refused before launch
            print("refused " + what + f": {exc}", flush=True)
            refused += 1
            continue
        dy = torch.randn_like(y)
        y.backward(dy)
        refs = linear_reference(x.detach(), w.detach(), bb.detach() if bb is not None else None, dy, act, kernel_y=y.detach())
        gots = (y, x.grad, w.grad) + ((bb.grad,) if bb is not None else ())
        for name, got, exp in zip(("y", "dx", "dw", "db"), gots, refs):
            e = float((got.float() - exp.float()).norm() / exp.float().norm().clamp_min(1e-30))
            if not e < 2 * tol:
                ok = False; what += f" linear {name} err {e:.2e}"
    failed += not ok
    print(("ok   " if ok else "FAIL ") + what + f" err {err:.1e}", flush=True)
print(f"{n_cases} cases ({tails} with a tail, {heads} of all cut in heads and tails): {n_cases - failed} ok ({refused} of them refused Z's linear), {failed} failed")
sys.exit(1 if failed else 0)
