"""The TMA kernel with its descriptors made on the host (TmaLaunch, as shipped) against the
same kernel making them on the device (DEVICE_DESCRIPTORS=True, the previous launch), side
by side: GPU time (timing.race, CUDA graphs interleaved) with cuBLAS, outputs checked after
a graph replay, and host time per eager call where the GPU work is tiny.
Usage: python3 docs/runs/kernels/host_desc_probe.py OUT.jsonl"""
import json, math, sys, time
import torch
from autokernel.records import KernelConfig
from autokernel.kernels.launch import KernelLaunch
from autokernel.kernels.matmul_tma import _matmul_tma_kernel, plan_matmul_tma, tma_operands
from autokernel.timing import race

CONFIGS = {
    "128x256x64 w8 s3 fl": dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3, flatten=True),
    "128x128x64 w8 s4 fl": dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=4, flatten=True),
    "64x256x64 w4 s4 fl": dict(block_m=64, block_n=256, block_k=64, num_warps=4, num_stages=4, flatten=True),
    "128x256x64 w8 s4 st2": dict(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=4, epilogue_subtile=2),
}
SHAPES = [(1024, 2304, 768), (2048, 2304, 768), (1536, 1536, 1536), (8192, 768, 768), (512, 3584, 3584),
          (3072, 3072, 3072), (2048, 768, 3072), (3201, 1408, 1792), (519, 27776, 4096), (293, 8832, 8960),
          (4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (128, 4096, 4096)]


def device_twin(launch):
    """The same kernel and arguments, the descriptors made by each program from pointers."""
    k = launch.kernel
    names = k.fn.arg_names
    constexprs = {n: v for n, v in k.kwargs.items() if n in names}
    options = {n: v for n, v in k.kwargs.items() if n not in names}
    twin = KernelLaunch(_matmul_tma_kernel, k.grid, k.scalars, {**constexprs, "DEVICE_DESCRIPTORS": True}, options,
                        torch.device("cuda", torch.cuda.current_device()), False)
    return lambda a, b, c, bias, z: twin(a, b, c, bias, z)


def main():
    out = open(sys.argv[1], "w")
    for (m, n, k) in SHAPES:
        dt = torch.float16
        sets = max(2, min(16, math.ceil(150e6 / ((m * k + n * k + m * n) * 2))))
        ins = [(torch.randn(m, k, device="cuda", dtype=dt) / math.sqrt(k), torch.randn(n, k, device="cuda", dtype=dt).t(),
                torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
        a0, b0, c0 = ins[0]
        ref = a0.float() @ b0.float()
        fns, labels = [], []
        for label, fields in CONFIGS.items():
            cfg = KernelConfig(variant="tma", group_m=8, **fields)
            host = plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, tma_operands(a0, b0, c0), False)
            for kind, launch in (("host", host), ("device", device_twin(host))):
                c0.zero_()
                launch(a0, b0, c0, c0, c0)
                torch.cuda.synchronize()
                err = float((c0.float() - ref).abs().max() / ref.abs().max())
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    launch(a0, b0, c0, c0, c0)
                c0.zero_()
                g.replay()
                torch.cuda.synchronize()
                gerr = float((c0.float() - ref).abs().max() / ref.abs().max())
                ok = err < 1e-2 and gerr < 1e-2
                print(json.dumps(dict(m=m, n=n, k=k, config=label, kind=kind, err=err, graph_err=gerr)), file=out, flush=True)
                if not ok:
                    print(m, n, k, label, kind, "WRONG", err, gerr, flush=True)
                    continue
                it = [0]
                fns.append(lambda f=launch, it=it: (lambda s: f(s[0], s[1], s[2], s[2], s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
                labels.append(f"{kind} {label}")
        it = [0]
        fns.append(lambda it=it: (lambda s: torch.mm(s[0], s[1], out=s[2]))(ins[(it.__setitem__(0, it[0] + 1) or it[0]) % sets]))
        labels.append("cublas")
        ms = race(fns, rounds=15, segment_ms=1.0)
        for l, t in zip(labels, ms):
            print(json.dumps(dict(m=m, n=n, k=k, label=l, gpu_ms=t)), file=out, flush=True)
        tc = ms[-1]
        print(f"{m}x{n}x{k} cublas {tc * 1e3:.1f}us | " + " | ".join(f"{l}:{tc / t:.3f}" for l, t in zip(labels, ms)), flush=True)
    # Host time per eager call, GPU work tiny: operands cycled over 4 sets, as a training
    # step's would be (host: descriptors kept by address after the first call of each).
    m, n, k = 256, 1024, 1024
    ins = [(torch.randn(m, k, device="cuda", dtype=torch.float16), torch.randn(n, k, device="cuda", dtype=torch.float16).t(),
            torch.empty(m, n, device="cuda", dtype=torch.float16)) for _ in range(4)]
    cfg = KernelConfig(variant="tma", group_m=8, **CONFIGS["128x128x64 w8 s4 fl"])
    a0, b0, c0 = ins[0]
    host = plan_matmul_tma(a0, b0, c0, None, "none", 0.0, cfg, tma_operands(a0, b0, c0), False)
    launches = {"host": host, "device": device_twin(host)}
    for f in launches.values():
        for s in ins:
            f(s[0], s[1], s[2], s[2], s[2])
    torch.cuda.synchronize()
    calls = 4000
    result = {}
    for rep in range(5):
        for kind, f in launches.items():
            t0 = time.perf_counter()
            for i in range(calls):
                s = ins[i % 4]
                f(s[0], s[1], s[2], s[2], s[2])
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            result.setdefault(kind, []).append((t1 - t0) / calls * 1e6)
    med = {kind: sorted(v)[len(v) // 2] for kind, v in result.items()}
    print(json.dumps(dict(host_us_per_call=med, shape=[m, n, k], calls=calls, reps=5)), file=out, flush=True)
    print("host µs per eager call (median of 5 x 4000 calls):", med, flush=True)


if __name__ == "__main__":
    main()
