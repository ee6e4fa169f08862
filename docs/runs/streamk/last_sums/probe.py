"""The TMA stream-K tail summed by the program that stores a tile's last partial (LAST_SUMS,
last_sums.patch applied) against the fix-up launch, side by side with the data-parallel twin
and cuBLAS (GPU time); each pair's outputs compared bit for bit over three calls.
    git apply docs/runs/streamk/last_sums/last_sums.patch
    python3 docs/runs/streamk/last_sums/probe.py docs/runs/streamk/last_sums/mid_seed92354.csv OUT.jsonl 400"""
import csv, json, sys, time, torch
from autokernel.kernels import matmul_tma as mt
from autokernel import timing, candidates, api
shapes, out, budget = sys.argv[1], sys.argv[2], float(sys.argv[3])
t0 = time.time()
thin = [c for c in candidates.THIN_TMA if c.stream_k]
keep = {"64x256x64 g8 w4 s4 tma fl sk", "128x128x64 g8 w8 s4 tma fl sk", "128x128x64 g8 w4 s5 tma fl sk",
        "128x256x64 g8 w8 s3 tma fl sk", "128x256x64 g8 w8 s4 tma st2 sk", "256x128x64 g8 w8 s3 tma sk"}
cfgs = [c for c in candidates.CANDIDATES if c.short() in keep]
rows = list(csv.DictReader(open(shapes)))
extra_probs = [dict(M=m, N=n, K=k, dtype="float16", activation="none", bias="false") for m, n, k in
               [(1024, 768, 3072), (1536, 1536, 1536), (1024, 1024, 4096), (4174, 1152, 2560), (11945, 640, 5888),
                (1130, 640, 4736), (216, 10880, 3712), (128, 11008, 4096), (3389, 640, 3968), (694, 1152, 3968)]]
f = open(out, "w")
for row in extra_probs + rows:
    if time.time() - t0 > budget:
        print("budget spent"); break
    m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
    dt = getattr(torch, row["dtype"]); act = row["activation"]; has_bias = row["bias"] == "true"
    a = torch.randn(m, k, device="cuda", dtype=dt); w = torch.randn(n, k, device="cuda", dtype=dt); b = w.t()
    bias = torch.randn(n, device="cuda", dtype=dt) if has_bias else None
    ref = a.float() @ b.float()
    if bias is not None: ref = ref + bias.float()
    ref = {"none": lambda x: x, "relu": torch.relu, "silu": torch.nn.functional.silu,
           "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh")}[act](ref)
    scale = ref.abs().max().item()
    fns, labels, rec = [], [], dict(m=m, n=n, k=k, dtype=row["dtype"], activation=act, bias=has_bias)
    if bias is None:
        fns.append(lambda: torch.mm(a, b)); labels.append("cublas")
    for cfg in cfgs + (thin if m <= candidates.THIN_TMA_MAX_M else []):
        if cfg.block_m > 64 and m <= 64: continue
        try:
            c0 = torch.empty(m, n, device="cuda", dtype=dt); c1 = torch.empty_like(c0); c2 = torch.empty_like(c0)
            ops = mt.tma_operands(a, b, c0)
            if ops is None: continue
            mt.LAST_SUMS = False
            L0 = mt.plan_matmul_tma(a, b, c0, bias, act, 0.01, cfg, ops, False)
            if not isinstance(L0, mt.TmaStreamKLaunch): continue
            mt.LAST_SUMS = True
            L1 = mt.plan_matmul_tma(a, b, c1, bias, act, 0.01, cfg, ops, False)
            mt.LAST_SUMS = False
            dp = cfg.model_copy(update={"stream_k": False})
            L2 = mt.plan_matmul_tma(a, b, c2, bias, act, 0.01, dp, ops, False)
            bb = bias if bias is not None else c0
            for _ in range(3):
                c0.fill_(float("nan")); c1.fill_(float("nan"))
                L0(a, b, c0, bb, c0); L1(a, b, c1, bias if bias is not None else c1, c1)
                torch.cuda.synchronize()
                e0 = ((c0.float() - ref).abs().max().item()) / scale
                e1 = ((c1.float() - ref).abs().max().item()) / scale
                same = bool(torch.equal(c0, c1))
                if not same or e1 > 0.02: break
            lab = cfg.short()
            rec[lab + " err"] = e1; rec[lab + " same"] = same
            if not same or e1 != e1 or e1 > 0.02:
                print("MISMATCH", m, n, k, lab, e0, e1, same, flush=True)
                continue
            fns += [lambda L=L0, c=c0, bb=bb: L(a, b, c, bb, c), lambda L=L1, c=c1: L(a, b, c, bias if bias is not None else c, c),
                    lambda L=L2, c=c2: L(a, b, c, bias if bias is not None else c, c)]
            labels += [lab + " fixup", lab + " last", dp.short()]
        except Exception as e:  # noqa
            print("ERR", m, n, k, cfg.short(), type(e).__name__, str(e)[:200], flush=True)
    if len(fns) < 2: continue
    ms = timing.race(fns)
    rec["us"] = {l: t * 1000 for l, t in zip(labels, ms)}
    f.write(json.dumps(rec) + "\n"); f.flush()
    us = rec["us"]
    pairs = [(l[:-6], us[l], us[l[:-6] + " last"]) for l in us if l.endswith(" fixup")]
    print(f"{m}x{n}x{k} {row['dtype'][:4]} {act}", f"cublas {us.get('cublas', 0):.1f}",
          " | ".join(f"{l}: {x:.1f} -> {y:.1f}" for l, x, y in pairs), flush=True)
