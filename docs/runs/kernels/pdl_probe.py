"""The second kernel of split-K (the reduction) and of the TMA stream-K tail (the fix-up) as a
programmatic dependent launch, against the same two kernels launched one after the other:
`matmul`'s pick of each problem of a shapes file where that pick runs two kernels, and the
split-K candidates that apply there, side by side with cuBLAS (GPU time, timing.race; each
output checked against a float32 reference). The stream-K tail's fix-up as a dependent launch
is not in the package (it measured 0.997x): its rows need `git apply
docs/runs/kernels/pdl_tma_streamk.patch` first, and are left out without it.
    python3 docs/runs/kernels/pdl_probe.py SHAPES.csv OUT.jsonl [BUDGET_S]
"""
import inspect, json, sys, time
import torch
sys.path.insert(0, "benchmarks")
from select_sweep import as_record, input_sets, race_checked, shapes_within
from autokernel import api, runtime
from autokernel.candidates import CANDIDATES
from autokernel.config import shared_memory_bytes
from autokernel.kernels import matmul_tma, splitk
from autokernel.select import rows_aligned, why_not

shapes, out_path = sys.argv[1], sys.argv[2]
budget = float(sys.argv[3]) if len(sys.argv) > 3 else 300
t0 = time.time()
P = runtime.sm_count()
limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
dev = torch.device("cuda")
TMA_PDL = "pdl" in inspect.signature(matmul_tma.plan_matmul_tma).parameters


def two_kernels(config, p, tma: bool) -> bool:
    if config.split_k > 1:
        return True
    if not (config.stream_k and config.variant == "tma" and tma and TMA_PDL):
        return False
    tiles = -(-p.m // config.block_m) * -(-p.n // config.block_n)
    return matmul_tma.tail_cut(tiles, P, -(-p.k // config.block_k))[0] != tiles % P


def launcher(config, p, pdl: bool):
    built = {}

    def call(a, b, bias, out=None):
        out = out if out is not None else torch.empty(p.m, p.n, dtype=a.dtype, device=a.device)
        launch = built.get("launch")
        if launch is None:
            if config.split_k > 1:
                launch = splitk.plan_matmul_splitk(a, b, out, bias, p.activation, 0.01, config, False, pdl=pdl)
            else:
                launch = matmul_tma.plan_matmul_tma(a, b, out, bias, p.activation, 0.01, config,
                                                    matmul_tma.tma_operands(a, b, out), False, pdl=pdl)
            built["launch"] = launch
        launch(a, b, out, bias if bias is not None else out, out)
        return out
    return call


n_done = 0
with open(out_path, "w") as f:
    for p in shapes_within(shapes, budget, t0):
        tma = api.tma_runs_for(p.m, p.n, p.k, p.torch_dtype, p.layout)
        pick = api.resolve_config(None, p.m, p.n, p.k, p.torch_dtype, p.activation, p.bias, dev, tma=tma,
                                  layout=p.layout)
        configs = [(pick, True)] if two_kernels(pick, p, tma) else []
        configs += [(c, False) for c in CANDIDATES if c.split_k > 1 and c != pick
                    and why_not(c, p.m, p.n, p.k, tma, P, rows_aligned(p.k, p.layout)) is None
                    and shared_memory_bytes(c, p.torch_dtype) <= limit]
        if not configs or not configs[0][1]:
            continue  # problems whose pick runs two kernels
        rows, calls = [], []
        for c, picked in configs:
            for pdl in (False, True):
                row = {**p.to_dict(), "label": c.short(), "picked": picked, "pdl": pdl}
                rows.append(row)
                calls.append((row, launcher(c, p, pdl)))
        torch_ms = race_checked(p, calls, input_sets(p, 4000))
        for row in as_record(rows, torch_ms):
            f.write(json.dumps(row) + "\n")
        f.flush()
        n_done += 1
        pairs = [(r["gpu_us"], s["gpu_us"]) for r, s in zip(rows[::2], rows[1::2]) if r.get("gpu_us") and s.get("gpu_us")]
        if pairs:
            print(f"{p.m}x{p.n}x{p.k} {p.dtype} pick {pick.short()}: off/on {pairs[0][0] / pairs[0][1]:.3f} "
                  f"({pairs[0][0]:.1f} -> {pairs[0][1]:.1f} us), all {len(pairs)}: "
                  f"{[round(a / b, 3) for a, b in pairs]}", flush=True)
print(f"{n_done} problems in {time.time() - t0:.0f} s")
