"""The TMA launch with its filled tensor maps kept by operand address (TmaLaunch, as shipped)
against the same launch filling them on every call (Triton's wrapper), side by side: outputs
checked eagerly, with operands cycled, and after a CUDA-graph replay; GPU time (timing.race);
host time per eager call where the GPU work is tiny, for the launch alone and for
autokernel.matmul against torch.matmul.
Usage: python3 docs/runs/kernels/tensor_map_probe.py OUT.jsonl"""
import json, math, sys, time
import torch
import autokernel
from autokernel.records import KernelConfig
from autokernel.kernels import launch as launch_mod
from autokernel.kernels.matmul_tma import plan_matmul_tma, tma_operands
from autokernel.timing import race

CONFIGS = {
    "128x256x64 w8 s3 fl": dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True),
    "128x128x64 w8 s4 fl": dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True),
    "64x256x64 w4 s4 st2": dict(block_m=64, block_n=256, block_k=64, num_warps=4, num_stages=4, epilogue_subtile=2),
}
SHAPES = [(1024, 2304, 768, "nt"), (1536, 1536, 1536, "nn"), (3201, 1408, 1792, "nt"), (128, 4096, 4096, "nt"),
          (4096, 4096, 4096, "nn")]


def operands(m, n, k, layout, dt, sets):
    out = []
    for _ in range(sets):
        a = torch.randn(m, k, device="cuda", dtype=dt) / math.sqrt(k)
        b = torch.randn(n, k, device="cuda", dtype=dt).t() if layout == "nt" else torch.randn(k, n, device="cuda", dtype=dt)
        out.append((a, b, torch.empty(m, n, device="cuda", dtype=dt)))
    return out


def cycled(f, ins):
    it = [0]

    def call():
        s = ins[it[0] % len(ins)]
        it[0] += 1
        f(s[0], s[1], s[2], s[2], s[2])
    return call


def main():
    out = open(sys.argv[1], "w")
    for (m, n, k, layout) in SHAPES:
        dt = torch.bfloat16 if layout == "nn" else torch.float16
        sets = max(2, min(8, math.ceil(150e6 / ((m * k + n * k + m * n) * 2))))
        ins = operands(m, n, k, layout, dt, sets)
        refs = [a.float() @ b.float() for a, b, _ in ins]
        fns, labels = [], []
        for label, fields in CONFIGS.items():
            cfg = KernelConfig(variant="tma", group_m=8, **fields)
            a0, b0, c0 = ins[0]
            for kind in ("kept", "filled"):
                launch = plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, tma_operands(a0, b0, c0), False)
                launch(a0, b0, c0, c0, c0)  # the first launch, through the JIT
                if kind == "kept":
                    assert launch.kernel.expand is not None, "Triton's launcher not recognized"
                else:
                    launch.kernel.expand = None
                errs = []
                for _ in range(2):  # every operand set, twice: the kept maps reused
                    for (a, b, c), ref in zip(ins, refs):
                        c.zero_()
                        launch(a, b, c, c, c)
                        torch.cuda.synchronize()
                        errs.append(float((c.float() - ref).abs().max() / ref.abs().max()))
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    launch(a0, b0, c0, c0, c0)
                c0.zero_()
                g.replay()
                torch.cuda.synchronize()
                gerr = float((c0.float() - refs[0]).abs().max() / refs[0].abs().max())
                ok = max(errs) < 1e-2 and gerr < 1e-2
                print(json.dumps(dict(m=m, n=n, k=k, layout=layout, config=label, kind=kind, err=max(errs), graph_err=gerr)),
                      file=out, flush=True)
                if not ok:
                    print(m, n, k, label, kind, "WRONG", max(errs), gerr, flush=True)
                    continue
                fns.append(cycled(launch, ins))
                labels.append(f"{kind} {label}")
        fns.append(cycled(lambda a, b, c, *_: torch.mm(a, b, out=c), ins))
        labels.append("cublas")
        ms = race(fns, rounds=15, segment_ms=1.0)
        for l, t in zip(labels, ms):
            print(json.dumps(dict(m=m, n=n, k=k, layout=layout, label=l, gpu_ms=t)), file=out, flush=True)
        tc = ms[-1]
        print(f"{m}x{n}x{k} {layout} cublas {tc * 1e3:.1f}us | " + " | ".join(f"{l}:{tc / t:.3f}" for l, t in zip(labels, ms)),
              flush=True)
    # Host time per eager call, GPU work tiny, operands cycled over 4 sets as a training
    # step's would be.
    m, n, k = 256, 1024, 1024
    ins = operands(m, n, k, "nt", torch.float16, 4)
    cfg = KernelConfig(variant="tma", group_m=8, **CONFIGS["128x128x64 w8 s4 fl"])
    a0, b0, c0 = ins[0]
    kept = plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, tma_operands(a0, b0, c0), False)
    filled = plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, tma_operands(a0, b0, c0), False)
    filled(a0, b0, c0, c0, c0)
    filled.kernel.expand = None
    calls = {
        "launch, maps kept": lambda s: kept(s[0], s[1], s[2], s[2], s[2]),
        "launch, maps filled per call": lambda s: filled(s[0], s[1], s[2], s[2], s[2]),
        "autokernel.matmul(config=TMA, out=)": lambda s: autokernel.matmul(s[0], s[1], config=cfg, out=s[2]),
        "torch.matmul(out=)": lambda s: torch.matmul(s[0], s[1], out=s[2]),
    }
    for f in calls.values():
        for s in ins:
            f(s)
    torch.cuda.synchronize()
    n_calls, result = 4000, {}
    for rep in range(5):
        for name, f in calls.items():
            t0 = time.perf_counter()
            for i in range(n_calls):
                f(ins[i % 4])
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            result.setdefault(name, []).append((t1 - t0) / n_calls * 1e6)
    med = {name: round(sorted(v)[len(v) // 2], 2) for name, v in result.items()}
    print(json.dumps(dict(host_us_per_call=med, shape=[m, n, k], calls=n_calls, reps=5)), file=out, flush=True)
    print("host µs per eager call (median of 5 x 4000 calls):", med, flush=True)


if __name__ == "__main__":
    main()
