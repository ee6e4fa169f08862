"""The grouped tile order with a small last group merged into the one before, raced against the
order before (every GROUP_M rows of tiles a group, the last one whatever is left) and against
merging whatever is left ("floor"): per problem, the selector's pick, the default and four
candidate tiles wherever the order differs (more tile-rows than GROUP_M, not a multiple of it),
each checked against a float32 reference, side by side with torch, GPU time (timing.race).

Run from the commit that merged the groups, with the two other orders as package copies:
    git archive <the commit before> autokernel | tar -x -C .dev/before   # then rename the folder to
    # autokernel_before and rewrite its imports (sed 's/\bautokernel\b/autokernel_before/g');
    # .dev/floor/autokernel_floor likewise from this commit, with `merged = full_groups > 0`
    PYTHONPATH=$PYTHONPATH:$PWD/.dev/before:$PWD/.dev/floor python3 probe.py SHAPES.csv OUT.jsonl BUDGET_S
Shapes: random_shapes.py draws filtered as docs/kernel-notes.md says."""
import csv, json, sys, time, math
import torch
import autokernel_before, autokernel_floor
from autokernel import api, runtime
from autokernel.config import KernelConfig, default_config
from autokernel.timing import race
from autokernel_before.config import KernelConfig as KB
from autokernel_floor.config import KernelConfig as KF
from autokernel_before import matmul as mm_before
from autokernel_floor import matmul as mm_floor
from autokernel import matmul as mm_half

shapes = list(csv.DictReader(open(sys.argv[1])))
out = open(sys.argv[2], "w")
budget = float(sys.argv[3]); t0 = time.time()
EXTRA = [KernelConfig(block_m=64, block_n=256, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=5, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=256, block_k=64, group_m=8, num_warps=8, num_stages=3, variant="tma", flatten=True),
         KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=4, variant="grouped")]
F = {"none": lambda x: x, "relu": torch.relu, "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
     "leaky_relu": lambda x: torch.nn.functional.leaky_relu(x, 0.01), "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}
def affected(c, m):
    rows = -(-m // c.block_m); return c.group_m > 1 and rows > c.group_m and rows % c.group_m != 0
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
    dflt = default_config(m, n, k, dt, tma=tma)
    roles = {}
    for name, c in [("pick", pick), ("default", dflt)] + [("extra", c) for c in EXTRA]:
        if c.variant == "tma" and not tma: continue
        if affected(c, m): roles.setdefault(c.to_json(), []).append(name)
    if not roles: continue
    fns, meta = [], []
    for cj, names in roles.items():
        d = json.loads(cj)
        for var, mm, Cfg in (("before", mm_before, KB), ("half", mm_half, KernelConfig), ("floor", mm_floor, KF)):
            cfg = Cfg.from_dict(d) if hasattr(Cfg, "from_dict") else Cfg(**d)
            try:
                o = mm(a0, b0, bias0, act, config=cfg, out=c0.clone()); torch.cuda.synchronize()
                err = float((o.float() - ref).norm() / ref.norm())
            except Exception as e:
                err = f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
            it = [0]
            def fn(mm=mm, cfg=cfg, it=it):
                x = ins[it[0] % sets]; it[0] += 1; mm(x[0], x[1], x[2], act, config=cfg, out=x[3])
            if isinstance(err, float): fns.append(fn)
            meta.append(dict(config=d, roles=names, variant=var, err=err, timed=isinstance(err, float)))
    it = [0]
    def tfn(it=it):
        x = ins[it[0] % sets]; it[0] += 1
        y = torch.addmm(x[2], x[0], x[1]) if has_bias else torch.mm(x[0], x[1]); F[act](y)
    fns.append(tfn)
    ms = race(fns, rounds=10, segment_ms=1.0)
    j = 0
    for r in meta:
        if r["timed"]: r["gpu_us"] = round(ms[j] * 1e3, 3); j += 1
    row = dict(m=m, n=n, k=k, dtype=s["dtype"], activation=act, bias=has_bias, layout=s["layout"], torch_us=round(ms[-1] * 1e3, 3), runs=meta)
    print(json.dumps(row), file=out, flush=True)
    bits = []
    for cj, names in roles.items():
        rs = {r["variant"]: r for r in meta if json.dumps(r["config"]) == json.dumps(json.loads(cj))}
        g = lambda v: rs[v].get("gpu_us", float("nan"))
        bits.append(f"{'/'.join(names)} {KernelConfig.from_dict(json.loads(cj)).short()}: b {g('before'):.1f} h/b {g('before')/g('half'):.3f} f/b {g('before')/g('floor'):.3f}")
    print(f"{i} {m}x{n}x{k} {s['dtype']} {act} torch {ms[-1]*1e3:.1f} | " + " | ".join(bits), flush=True)
