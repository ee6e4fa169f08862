"""GPU: cuBLAS (torch.matmul) beside the TMA kernel with and without each Hopper variant
(warp_specialize, epilogue_subtile, flatten), several tiles per shape, in one run.

Each shape runs in its own child process (an illegal access poisons a CUDA context, a
hung kernel needs a kill): every config goes through ``evaluate`` (fp32 reference check
on fresh inputs, then the event timer's median with L2 flushed, ``ms``, and the
CUDA-graph replay time, ``gpu_ms``), cuBLAS through ``evaluate_torch`` the same way.
The compiled kernel's warp count and shared memory are read back, so a warp-specialized
build (more warps than num_warps) shows. Ratios are cuBLAS time / our time: above 1 is
faster than cuBLAS.

Run on the device: source benchmarks/device_env.sh; python3 benchmarks/kernel_variants.py --out $OUT/kernel_variants.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time

SHAPES = ["4096 4096 4096 float16", "8192 8192 8192 bfloat16", "4096 11008 4096 bfloat16",
          "1024 4096 4096 float16", "8192 8192 1024 bfloat16"]

_BASE = dict(block_m=128, block_n=256, block_k=64, group_m=8, variant="tma")
# (family, config fields): the sweep's best (128x256x64 w8 s3 tma; grouped s4 at
# 1024x4096x4096), then each option of the TMA kernel. Hopper's warp specialization gives
# num_warps to each of two consumer warpgroups (plus a producer warpgroup), so its 128x256
# tile runs at num_warps=4 where the plain kernel needs 8.
CONFIGS = [
    ("base", dict(_BASE, num_warps=8, num_stages=3)),
    ("base", dict(_BASE, variant="grouped", num_warps=8, num_stages=4)),
    ("base", dict(_BASE, block_m=256, block_n=128, num_warps=8, num_stages=3)),
    ("subtile", dict(_BASE, num_warps=8, num_stages=3, epilogue_subtile=2)),
    ("subtile", dict(_BASE, num_warps=8, num_stages=4, epilogue_subtile=2)),
    ("ws", dict(_BASE, num_warps=4, num_stages=3, warp_specialize=True)),
    ("ws", dict(_BASE, block_m=256, block_n=128, num_warps=4, num_stages=3, warp_specialize=True)),
    ("flatten", dict(_BASE, num_warps=8, num_stages=3, flatten=True)),
    ("flatten", dict(_BASE, num_warps=8, num_stages=3, epilogue_subtile=2, flatten=True)),
    ("flatten", dict(_BASE, num_warps=8, num_stages=4, epilogue_subtile=2, flatten=True)),
]


def child(shape: str) -> None:
    """Evaluate cuBLAS and every config on one shape; one JSON line per result."""
    from autokernel.config import KernelConfig
    from autokernel.evaluate import evaluate, evaluate_torch
    from autokernel.records import Problem

    m, n, k, dtype = shape.split()
    problem = Problem(int(m), int(n), int(k), dtype)

    def emit(family: str, trial, extra: dict | None = None) -> None:
        print(json.dumps({"shape": shape, "family": family, "kernel": trial.kernel,
                          "config": None if trial.config is None else trial.config.model_dump(),
                          "label": trial.config.short() if trial.config else "cuBLAS",
                          "status": trial.status, "error": trial.error, "ms": trial.ms, "gpu_ms": trial.gpu_ms,
                          "rel_error": trial.rel_error, **(extra or {})}), flush=True)

    emit("cublas", evaluate_torch(problem, "torch", graph_time=True))
    for family, fields in CONFIGS:
        config = KernelConfig(**fields)
        trial = evaluate(problem, config, graph_time=True)
        emit(family, trial, _compiled_info(problem, config) if trial.ok else None)
    emit("cublas", evaluate_torch(problem, "torch", graph_time=True), {"repeat": True})


def _compiled_info(problem, config) -> dict:
    """Warps and shared memory of the compiled kernel for this problem and config."""
    import torch

    from autokernel import api

    from autokernel import runtime

    a, b, _ = problem.make_inputs(runtime.kernel_device(), 0)
    out = torch.empty((problem.m, problem.n), dtype=a.dtype, device=a.device)
    launch = api._plan_kernel(a, b, out, None, problem.activation, 0.0, config, None)
    launch(a, b, out, out, out)
    compiled = getattr(launch, "compiled", None)
    if compiled is None:
        return {}
    return {"kernel_name": compiled.name, "warps": compiled.metadata.num_warps, "smem": compiled.metadata.shared}


def _fmt_us(ms) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--shapes", nargs="*", default=SHAPES, help='"M N K dtype" each')
    parser.add_argument("--out", help="write every result as a JSON line here")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per shape")
    parser.add_argument("--budget", type=float, default=3600.0, help="seconds for the whole run")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0

    import torch
    import triton

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU (Triton interpreter)"
    print(f"{device} torch {torch.__version__} triton {triton.__version__}", flush=True)
    rows = []
    deadline = time.time() + args.budget
    for shape in args.shapes:
        start = time.time()
        if deadline - start < 20:
            print(f"# {shape}: skipped, the --budget of {args.budget:.0f} s is spent", flush=True)
            continue
        try:
            proc = subprocess.run([sys.executable, __file__, "--child", shape], capture_output=True, text=True,
                                  timeout=min(args.timeout, deadline - start))
            out, err, rc = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out, err, rc = (exc.stdout or b"").decode(), (exc.stderr or b"").decode(), "timeout"
        got = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        rows += got
        if args.out:
            with open(args.out, "a") as f:
                f.writelines(json.dumps(r) + "\n" for r in got)
            with open(args.out + ".stderr", "a") as f:
                f.write(f"# {shape}\n{err}\n")
        print(f"# {shape}: {len(got)} results, exit {rc}, {time.time() - start:.0f} s", flush=True)
        if rc != 0:
            print("  " + "\n  ".join(err.strip().splitlines()[-5:]), flush=True)
    report(rows)
    return 0


def report(rows: list[dict]) -> None:
    """Per shape: every config's times and ratios; then the best of each family per shape
    and their geomean ratio over shapes, by GPU (graph) time and by event time."""
    from autokernel.timing import tflops

    families = list(dict.fromkeys(r["family"] for r in rows if r["family"] != "cublas"))
    best: dict[tuple[str, str], dict] = {}
    print("\n| shape | family | config | event µs | graph µs | TFLOP/s (graph) | x cuBLAS event | x cuBLAS graph "
          "| warps | smem KiB | status |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        here = [r for r in rows if r["shape"] == shape]
        cub = next((r for r in here if r["family"] == "cublas" and r["status"] == "success"), None)
        m, n, k, _ = shape.split()
        flops = 2 * int(m) * int(n) * int(k)
        for r in here:
            ok = r["status"] == "success" and r["ms"]
            ev = cub["ms"] / r["ms"] if ok and cub else None
            gr = cub["gpu_ms"] / r["gpu_ms"] if ok and cub and r["gpu_ms"] and cub["gpu_ms"] else None
            tf = tflops(flops, r["gpu_ms"]) if ok and r["gpu_ms"] else None
            status = r["status"] if ok else f'{r["status"]}: {(r["error"] or "")[:80]}'
            print(f'| {shape} | {r["family"]} | {r["label"]} | {_fmt_us(r["ms"])} | {_fmt_us(r["gpu_ms"])} | '
                  f'{"-" if tf is None else f"{tf:.0f}"} | {"-" if ev is None else f"{ev:.3f}"} | '
                  f'{"-" if gr is None else f"{gr:.3f}"} | {r.get("warps", "-")} | '
                  f'{r["smem"] // 1024 if r.get("smem") else "-"} | {status} |')
            if r["family"] != "cublas" and gr is not None:
                key = (shape, r["family"])
                if key not in best or gr > best[key]["graph"]:
                    best[key] = {"graph": gr, "event": ev, "label": r["label"], "tflops": tf}
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    print("\nBest config of each family (by graph time), ratio to cuBLAS graph / event time, TFLOP/s by graph time:")
    print("| shape | " + " | ".join(families) + " | best overall |")
    print("|---|" + "---|" * (len(families) + 1))
    overall: dict[str, dict] = {}
    for shape in shapes:
        cells = []
        for fam in families:
            b = best.get((shape, fam))
            cells.append("-" if b is None else f'{b["graph"]:.3f} / {b["event"]:.3f} ({b["tflops"]:.0f}; {b["label"]})')
            if b is not None and (shape not in overall or b["graph"] > overall[shape]["graph"]):
                overall[shape] = b
        o = overall.get(shape)
        cells.append("-" if o is None else f'{o["graph"]:.3f} / {o["event"]:.3f} ({o["label"]})')
        print(f"| {shape} | " + " | ".join(cells) + " |")

    def geomean(values: list[float]) -> str:
        return f"{math.exp(sum(map(math.log, values)) / len(values)):.3f}" if values else "-"

    for fam in [*families, "overall"]:
        picked = [overall.get(s) if fam == "overall" else best.get((s, fam)) for s in shapes]
        if all(picked):
            print(f"geomean x cuBLAS, {fam}: graph {geomean([b['graph'] for b in picked])}, "
                  f"event {geomean([b['event'] for b in picked])} over {len(shapes)} shapes")


if __name__ == "__main__":
    sys.exit(main())
