"""The pointer kernels with A's rows past M and B's columns past N masked (``MASK_M`` /
``MASK_N`` of ``kernels.matmul.tile_acc``, set wherever the tile passes M or N) against wrapped
onto valid ones (both off: the kernels before ``mask_past``), side by side with cuBLAS: "rows", decode problems (M below the tile's rows) with the selector's decode
configs; "cols", narrow outputs (N below the tile's columns) with its pointer configs for many
rows. Each config both ways, checked against a float32 reference, then raced (GPU time, CUDA
graphs, cycling over enough operand copies to leave L2). "fresh": the problems of a shapes
file where ``matmul``'s own pick runs a pointer kernel that masks (``mask_past``), that pick as
planned against it wrapped, with the problem's dtype, layout and epilogue. docs/kernel-notes.md,
"Rows past M and columns past N, masked" (its tables: ``mask_past_table.py``).

    source benchmarks/device_env.sh
    python3 docs/runs/kernels/mask_past_probe.py rows|cols OUT.jsonl
    python3 docs/runs/kernels/mask_past_probe.py fresh OUT.jsonl SHAPES.csv
"""
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from select_sweep import _call, input_sets  # noqa: E402

from autokernel import api  # noqa: E402
from autokernel.config import KernelConfig  # noqa: E402
from autokernel.kernels.launch import KernelLaunch  # noqa: E402
from autokernel.kernels.splitk import SplitKLaunch  # noqa: E402
from autokernel.timing import race  # noqa: E402

DEVICE, INTERPRET = torch.device("cuda", 0), False


def cfg(bm, bn, k=1):
    return KernelConfig(block_m=bm, block_n=bn, block_k=128, group_m=8, num_warps=4, num_stages=4,
                        variant="grouped", split_k=k)


def cfg64(bm, bn, s, k=1):
    return KernelConfig(block_m=bm, block_n=bn, block_k=64, group_m=8, num_warps=4, num_stages=s,
                        variant="grouped", split_k=k)


WEIGHTS = ((4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (18944, 3584), (3584, 18944),
           (8192, 8192), (28672, 8192), (8192, 28672), (3072, 768), (50304, 768))
SETS = {
    "rows": ({"16x64x128": cfg(16, 64), "16x128x128": cfg(16, 128), "16x64x128 k2": cfg(16, 64, 2),
              "16x64x128 k4": cfg(16, 64, 4), "32x64x128": cfg(32, 64)},
             [(m, n, k) for n, k in WEIGHTS for m in (1, 2, 4, 8, 12, 24)]),
    "cols": ({"128x64x64": cfg64(128, 64, 5), "64x64x128": cfg(64, 64), "64x128x64": cfg64(64, 128, 5),
              "128x128x64": cfg64(128, 128, 4), "64x64x128 k4": cfg(64, 64, 4), "64x128x64 k2": cfg64(64, 128, 4, 2)},
             [(m, n, k) for m, k in ((2048, 4096), (8192, 4096), (16384, 7168)) for n in (1, 2, 5, 8, 16, 24, 40)]),
}


def twin(launch: KernelLaunch, mask: bool) -> KernelLaunch:
    """``launch`` with the rows past M and the columns past N masked (``mask``) or wrapped."""
    names = set(launch.fn.arg_names)
    constexprs = {k: v for k, v in launch.kwargs.items() if k in names}
    options = {k: v for k, v in launch.kwargs.items() if k not in names}
    m, n = launch.scalars[:2]
    constexprs["MASK_M"] = mask and m < constexprs["BLOCK_M"]
    constexprs["MASK_N"] = mask and n < constexprs["BLOCK_N"]
    return KernelLaunch(launch.fn, launch.grid, launch.scalars, constexprs, options, DEVICE, INTERPRET)


def plans(a, w, c, config):
    """(masked, wrapped) launches of ``config`` for C = A @ W^T."""
    plan = api._plan_kernel(a, w.t(), c, None, "none", 0.0, config, None)
    if isinstance(plan, SplitKLaunch):
        return tuple(SplitKLaunch(twin(plan.partial, m), plan.reduce, plan.workspace_shape) for m in (True, False))
    return twin(plan, True), twin(plan, False)


def main(which: str, out_path: str) -> None:
    configs, problems = SETS[which]
    out = open(out_path, "w")
    dt = torch.bfloat16
    for m, n, k in problems:
        if True:
            sets = max(2, min(8, math.ceil(300e6 / ((m * k + n * k) * 2))))
            ins = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(n, k, device="cuda", dtype=dt),
                    torch.empty(m, n, device="cuda", dtype=dt)) for _ in range(sets)]
            ref = ins[0][0].float() @ ins[0][1].float().t()
            fns, labels = [], []
            for name, config in configs.items():
                if (which == "rows" and config.block_m < m) or (config.split_k > 1 and k // config.split_k < 256):
                    continue
                for mask, plan in zip((True, False), plans(*ins[0], config)):
                    a, w, c = ins[0]
                    c.zero_()
                    plan(a, w.t(), c, c, c)
                    torch.cuda.synchronize()
                    err = float((c.float() - ref).norm() / ref.norm())
                    label = f"{name} {'masked' if mask else 'wrapped'}"
                    if not err < 2e-2:
                        print(json.dumps(dict(m=m, n=n, k=k, label=label, status="incorrect", rel_error=err)), file=out, flush=True)
                        continue
                    fns.append(_call(ins, lambda a, w, c, plan=plan: plan(a, w.t(), c, c, c)))
                    labels.append(label)
            fns.append(_call(ins, lambda a, w, c: torch.mm(a, w.t(), out=c)))
            labels.append("cublas")
            ms = race(fns, rounds=10, segment_ms=1.0)
            nbytes = (m * k + n * k + m * n) * 2
            for label, t in zip(labels, ms):
                print(json.dumps(dict(m=m, n=n, k=k, label=label, status="ok", gpu_us=round(t * 1e3, 3),
                                      gbps=round(nbytes / t / 1e6, 1))), file=out, flush=True)
            print(f"{m}x{n}x{k}: " + " ".join(f"{l}={t * 1e3:.1f}" for l, t in zip(labels, ms)), flush=True)


def fresh(out_path: str, shapes: str) -> None:
    """The "fresh" mode: ``matmul``'s pick, masked as planned and wrapped, beside torch."""
    from autokernel.evaluate import reference, torch_function
    from autokernel.tuning.shapes import read_shapes

    out = open(out_path, "w")
    ratios = []
    for p in read_shapes(shapes):
        config = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, DEVICE,
                                    tma=api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout), layout=p.layout)
        sets = input_sets(p, 7)
        a0, b0, bias0, c0 = sets[0]
        plan = api._plan_kernel(a0, b0, c0, bias0, p.activation, 0.01, config, None)
        inner = plan.partial if isinstance(plan, SplitKLaunch) else plan
        if not isinstance(inner, KernelLaunch) or not (inner.kwargs.get("MASK_M") or inner.kwargs.get("MASK_N")):
            continue
        masked, wrapped = plans_for(plan)
        ref = reference(a0, b0, bias0, p.activation)
        errors = []
        for launch in (masked, wrapped):
            c0.zero_()
            launch(a0, b0, c0, bias0 if bias0 is not None else c0, c0)
            torch.cuda.synchronize()
            errors.append(float((c0.float() - ref).norm() / ref.norm()))
        eager = torch_function(p)
        fns = [_call(sets, lambda a, b, bias, c, launch=launch: launch(a, b, c, bias if bias is not None else c, c))
               for launch in (masked, wrapped)]
        fns.append(_call(sets, lambda a, b, bias, c: eager(a, b, bias)))
        ms = race(fns, rounds=10, segment_ms=1.0)
        row = dict(m=p.m, n=p.n, k=p.k, dtype=p.dtype, layout=p.layout, activation=p.activation, bias=p.bias,
                   config=config.short(), ok=all(e < 2e-2 for e in errors), rel_error=max(errors),
                   masked_us=round(ms[0] * 1e3, 3), wrapped_us=round(ms[1] * 1e3, 3), torch_us=round(ms[2] * 1e3, 3))
        ratios.append((ms[1] / ms[0], ms[2] / ms[0], ms[2] / ms[1]))
        print(json.dumps(row), file=out, flush=True)
    print(f"{len(ratios)} problems masked: wrapped / masked {geomean(r[0] for r in ratios):.4f} "
          f"(faster by > 2 %: {sum(r[0] > 1.02 for r in ratios)}, slower: {sum(r[0] < 0.98 for r in ratios)}); "
          f"torch / masked {geomean(r[1] for r in ratios):.4f}, torch / wrapped {geomean(r[2] for r in ratios):.4f}")


def geomean(values):
    values = list(values)
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def plans_for(plan):
    """(as planned, wrapped) of a planned launch."""
    if isinstance(plan, SplitKLaunch):
        return plan, SplitKLaunch(twin(plan.partial, False), plan.reduce, plan.workspace_shape)
    return plan, twin(plan, False)


if __name__ == "__main__":
    if sys.argv[1] == "fresh":
        fresh(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1], sys.argv[2])
