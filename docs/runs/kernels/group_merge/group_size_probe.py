"""The same configs at GROUP_M 4, 8 and 16 side by side (GPU time; each checked against a float32
reference), per problem: the pick, the default and four candidate tiles, wherever they have more
than 4 rows of tiles and more tiles than SMs. Shapes: random_shapes.py draws with M >= 640 and
more 128x256 tiles than SMs.
Usage: python3 group_size_probe.py SHAPES.csv OUT.jsonl BUDGET_S"""
import csv, json, sys, time, math
import torch
from autokernel import api, matmul
from autokernel.config import KernelConfig, default_config
from autokernel.timing import race
shapes = list(csv.DictReader(open(sys.argv[1]))); out = open(sys.argv[2], "w"); budget = float(sys.argv[3]); t0 = time.time()
EXTRA = [KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=5, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="grouped")]
F = {"none": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
     "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01), "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}
GS = (4, 8, 16)
for i, s in enumerate(shapes):
    if time.time() - t0 > budget: print("budget out at", i, flush=True); break
    m, n, k = int(s["M"]), int(s["N"]), int(s["K"]); dt = getattr(torch, s["dtype"]); act = s["activation"]; has_bias = s["bias"] == "true"
    torch.manual_seed(i)
    sets = max(2, min(8, math.ceil(150e6 / ((m * k + n * k + m * n) * dt.itemsize))))
    ins = []
    for _ in range(sets):
        a = torch.randn(m, k, device="cuda", dtype=dt); w = torch.randn(n, k, device="cuda", dtype=dt)
        b = w.t() if s["layout"] == "nt" else torch.randn(k, n, device="cuda", dtype=dt)
        bias = torch.randn(n, device="cuda", dtype=dt) if has_bias else None
        ins.append((a, b, bias, torch.empty(m, n, device="cuda", dtype=dt)))
    a0, b0, bias0, c0 = ins[0]
    ref = F[act](a0.float() @ b0.float() + (bias0.float() if has_bias else 0))
    tma = api.tma_runs(a0, b0, c0)
    pick = api.resolve_config(None, m, n, k, dt, act, has_bias, a0.device, tma=tma, layout=s["layout"])
    roles = {}
    for name, c in [("pick", pick), ("default", default_config(m, n, k, dt, tma=tma))] + [("extra", c) for c in EXTRA]:
        if c.variant == "tma" and not tma: continue
        rows = -(-m // c.block_m); tiles = rows * -(-n // c.block_n)
        if rows <= 4 or tiles <= 132 or c.split_k > 1: continue
        roles.setdefault(c.model_copy(update={"group_m": 8}).to_json(), []).append(name)
    if not roles: continue
    fns, meta = [], []
    for cj, names in roles.items():
        for g in GS:
            cfg = KernelConfig.model_validate_json(cj).model_copy(update={"group_m": g})
            try:
                o = matmul(a0, b0, bias0, act, config=cfg, out=c0.clone()); torch.cuda.synchronize()
                err = float((o.float() - ref).norm() / ref.norm())
            except Exception as e:
                err = f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
            it = [0]
            def fn(cfg=cfg, it=it):
                x = ins[it[0] % sets]; it[0] += 1; matmul(x[0], x[1], x[2], act, config=cfg, out=x[3])
            if isinstance(err, float): fns.append(fn)
            meta.append(dict(config=json.loads(cfg.to_json()), roles=names, group=g, err=err, timed=isinstance(err, float)))
    it = [0]
    def tfn(it=it):
        x = ins[it[0] % sets]; it[0] += 1
        y = torch.addmm(x[2], x[0], x[1]) if has_bias else torch.mm(x[0], x[1]); F[act](y)
    fns.append(tfn)
    ms = race(fns, rounds=10, segment_ms=1.0)
    j = 0
    for r in meta:
        if r["timed"]: r["gpu_us"] = round(ms[j] * 1e3, 3); j += 1
    print(json.dumps(dict(m=m, n=n, k=k, dtype=s["dtype"], activation=act, bias=has_bias, layout=s["layout"], torch_us=round(ms[-1] * 1e3, 3), runs=meta)), file=out, flush=True)
    print(i, m, n, k, " | ".join(f"{'/'.join(r['roles'])} {KernelConfig.from_dict(r['config']).short()} {r.get('gpu_us')}" for r in meta if r["group"] == 8), flush=True)
