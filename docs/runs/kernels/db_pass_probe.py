"""The backward's elementwise pass (dZ = dY act'(Z), db's column sums), this code against the
code before (copied as ``autokernel_before``: docs/launch.md has the step), side by side with torch's
(timing.race, GPU time, db checked). --tiles: db alone under other rows per program.
Usage: PYTHONPATH=$PYTHONPATH:.dev/before python3 docs/runs/kernels/db_pass_probe.py [--tiles]"""
import sys, torch
from autokernel.kernels.backward import column_counts, plan_activation_grad as after
from autokernel_before.kernels.backward import plan_activation_grad as before
from autokernel_before.kernels import backward as _before_module

BEFORE_SUMS = hasattr(_before_module, "column_counts")  # the code before sums db in the pass too
from autokernel.timing import race

dt = torch.bfloat16
CASES = [(2048, 2304, "none"), (2048, 768, "none"), (8192, 2304, "none"), (8192, 768, "none"), (8192, 4096, "none"),
         (512, 1024, "none"), (2048, 3072, "gelu_tanh"), (2048, 4096, "gelu"), (8192, 3072, "gelu_tanh"),
         (8192, 4096, "gelu"), (8192, 14336, "silu"), (4096, 11008, "silu")]
for M, N, act in CASES:
    dy = torch.randn(M, N, device="cuda", dtype=dt)
    z = torch.randn(M, N, device="cuda", dtype=dt)
    if act == "none":
        ref = dy.float().sum(0)
        torch_fn = lambda: dy.sum(0)
    else:
        ap = "tanh" if act == "gelu_tanh" else "none"
        if act == "silu":
            torch_fn = lambda: (lambda g: (g, g.sum(0)))(torch.ops.aten.silu_backward(dy, z))
            ref = torch.ops.aten.silu_backward(dy.float(), z.float()).sum(0)
        else:
            torch_fn = lambda: (lambda g: (g, g.sum(0)))(torch.ops.aten.gelu_backward(dy, z, approximate=ap))
            ref = torch.ops.aten.gelu_backward(dy.float(), z.float(), approximate=ap).sum(0)
    fns, names = [torch_fn], ["torch"]
    for name, plan in (("before", before), ("after", after)):
        dz = torch.empty_like(dy) if act != "none" else None
        launch = plan(dy, z if act != "none" else None, dz, act, 0.01, True, False)
        rows = launch.grid[0]
        partial = torch.empty((rows, N), dtype=torch.float32 if rows > 1 else dt, device="cuda")
        if name == "before" and not BEFORE_SUMS:  # the partials summed by torch
            def run(launch=launch, partial=partial, dz=dz):
                launch(dy, z if act != "none" else dy, dz if dz is not None else dy, partial)
                return partial.sum(0, dtype=dt)
        else:  # db from the pass itself (its last program of each column block sums the partials)
            counts = column_counts(dy.device, launch.grid[1])
            def run(launch=launch, partial=partial, dz=dz, counts=counts, rows=rows):
                db = torch.empty(N, dtype=dt, device="cuda") if rows > 1 else partial
                launch(dy, z if act != "none" else dy, dz if dz is not None else dy, partial, db, counts)
                return db[0] if rows == 1 else db
        db = run()
        err = ((db.float() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, (name, err)
        fns.append(run); names.append(name)
    ms = race(fns)
    print(f"{M}x{N} {act:9s} " + "  ".join(f"{n} {t*1e3:6.1f}" for n, t in zip(names, ms)) + f"   before/after {ms[1]/ms[2]:.3f}  torch/after {ms[0]/ms[2]:.3f}", flush=True)

# db alone under other row tiles per program (the unrolled form)
if '--tiles' not in sys.argv: sys.exit(0)
import triton
from autokernel.kernels.backward import _activation_grad_kernel
for M, N in ((2048, 2304), (2048, 768), (8192, 2304), (8192, 768), (8192, 4096), (512, 1024), (4096, 1024), (16384, 4096)):
    dy = torch.randn(M, N, device="cuda", dtype=dt)
    fns, names = [lambda: dy.sum(0)], ["torch"]
    for rt in (1, 2, 4, 8, 16):
        for bm, w in ((32, 4), (64, 8)):
            grid = (triton.cdiv(M, bm * rt), triton.cdiv(N, 128))
            partial = torch.empty((grid[0], N), dtype=torch.float32, device="cuda")
            def run(grid=grid, partial=partial, rt=rt, bm=bm, w=w):
                _activation_grad_kernel[grid](dy, dy, dy, partial, dy, dy, M, N, dy.stride(0), dy.stride(1), dy.stride(0), dy.stride(1),
                                              dy.stride(0), dy.stride(1), 0.01, GRAD_ACTIVATION="none", STORE_DZ=False,
                                              COLUMN_SUM=True, FINISH=False, ROW_TILES=rt, BLOCK_M=bm, BLOCK_N=128,
                                              num_warps=w)
                return partial.sum(0, dtype=dt)
            fns.append(run); names.append(f"rt{rt} {bm}x128 w{w} grid {grid[0]*grid[1]}")
    ms = race(fns)
    print(f"{M}x{N}: " + " | ".join(f"{n} {t*1e3:.1f}" for n, t in zip(names, ms)), flush=True)
