"""swap_ab configs (the candidates, a stream-K twin and a halved epilogue) on random shapes of 1-200
rows, every layout and activation, with and without a bias, through matmul and through linear
with its backward, against float32 torch on the GPU: one line per case, FAILED where any output
is off by more than 2e-2 (3e-2 for the gradients).
    python3 -u docs/runs/swap/check_gpu.py"""
import itertools, random, torch
import autokernel as ak
from autokernel.config import KernelConfig
from autokernel.candidates import SWAPPED
rng = random.Random(5)
cfgs = list(SWAPPED) + [KernelConfig(block_m=64, block_n=32, block_k=128, num_warps=4, num_stages=6, variant="tma",
                                     flatten=True, swap_ab=True, stream_k=True),
                        KernelConfig(block_m=128, block_n=64, block_k=64, num_warps=4, num_stages=4, variant="tma",
                                     swap_ab=True, epilogue_subtile=2)]
ok = bad = 0
for i in range(60):
    m = rng.randint(1, 200); n = 8 * rng.randint(2, 1500); k = 8 * rng.randint(2, 1200)
    dt = rng.choice([torch.float16, torch.bfloat16]); layout = rng.choice(["nn", "nt", "tn", "tt"])
    act = rng.choice(["none", "relu", "gelu", "gelu_tanh", "silu", "leaky_relu"]); bias = rng.random() < 0.6
    c = rng.choice(cfgs)
    a = torch.randn(k, m, device="cuda").t() if layout[0] == "t" else torch.randn(m, k, device="cuda")
    w = torch.randn(n, k, device="cuda") / k ** 0.5
    b = w.t() if layout[1] == "t" else w.t().contiguous()
    a, b = a.to(dt), b.to(dt)
    bb = torch.randn(n, device="cuda").to(dt) if bias else None
    ref = a.float() @ b.float() + (bb.float() if bias else 0)
    ref = {"none": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
           "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
           "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01)}[act](ref)
    out = ak.matmul(a, b, bb, None if act == "none" else act, config=c)
    err = float((out.float() - ref).norm() / ref.norm().clamp_min(1e-9))
    good = err < 2e-2 and not out.isnan().any()
    # backward through linear with this config (Z stored for the activation's derivative)
    x = a.detach().clone().requires_grad_(True); W = b.t().detach().clone().requires_grad_(True)
    bias_t = bb.detach().clone().requires_grad_(True) if bias else None
    y = ak.linear(x, W, bias_t, None if act == "none" else act, config=c)
    g = torch.randn_like(y)
    y.backward(g)
    xr = a.float().detach().requires_grad_(True); Wr = b.t().float().detach().requires_grad_(True)
    br = bb.float().detach().requires_grad_(True) if bias else None
    yr = torch.nn.functional.linear(xr, Wr, br)
    yr = {"none": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
          "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
          "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01)}[act](yr)
    yr.backward(g.float())
    for got, want in ((y, yr), (x.grad, xr.grad), (W.grad, Wr.grad)) + (((bias_t.grad, br.grad),) if bias else ()):
        e = float((got.float() - want).norm() / want.norm().clamp_min(1e-9))
        good = good and e < 3e-2
    ok += good; bad += not good
    print("case", i, "ok" if good else "FAILED", m, n, k, str(dt)[6:], layout, act, bias, c.short(), flush=True)
    if not good:
        print("BAD", m, n, k, dt, layout, act, bias, c.short(), err)
print(f"{ok} ok, {bad} failed")
