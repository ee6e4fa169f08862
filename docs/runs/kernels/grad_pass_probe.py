"""The backward's elementwise pass (dZ = dY act'(Z) and db's column sums, kernels/backward.py)
under other launch shapes, side by side (timing.race, GPU time) with torch's (gelu_backward,
then a column sum): the pass with its partial sums' reduction. Usage: python3 docs/runs/kernels/grad_pass_probe.py"""
import torch
import triton

from autokernel import runtime
from autokernel.kernels.backward import _activation_grad_kernel
from autokernel.timing import race

SMS = runtime.sm_count()
dt = torch.bfloat16


def launcher(dy, z, dz, act, block_m, block_n, warps, row_tiles):
    M, N = dy.shape
    grid = (triton.cdiv(M, block_m * row_tiles), triton.cdiv(N, block_n))
    partial = torch.empty((grid[0], N), dtype=torch.float32, device="cuda")

    def run():
        _activation_grad_kernel[grid](dy, z, dz, partial, M, N, dy.stride(0), dy.stride(1), z.stride(0), z.stride(1),
                                      dz.stride(0), dz.stride(1), 0.01, GRAD_ACTIVATION=act,
                                      STORE_DZ=act != "none", COLUMN_SUM=True, ROW_TILES=row_tiles,
                                      BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
        return partial.sum(0, dtype=dt)
    return run, grid


def adaptive(M, N, block_m, block_n, per_sm):
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    return max(1, min(8, tiles // (per_sm * SMS)))


for M in (2048, 8192):
    for N, act in ((2304, "none"), (768, "none"), (3072, "gelu_tanh"), (4096, "gelu")):
        dy = torch.randn(M, N, device="cuda", dtype=dt)
        z = torch.randn(M, N, device="cuda", dtype=dt)
        dz = torch.empty_like(dy)
        ref_db = (dy.float() * (torch.ops.aten.gelu_backward(torch.ones_like(z, dtype=torch.float32), z.float(),
                  approximate="tanh" if act == "gelu_tanh" else "none") if act != "none" else 1.0)).sum(0)
        variants = {
            "now 32x128 w4 rows<=8": (32, 128, 4, min(8, triton.cdiv(M, 32))),
            "32x128 w4 4/SM": (32, 128, 4, adaptive(M, N, 32, 128, 4)),
            "32x128 w4 8/SM": (32, 128, 4, adaptive(M, N, 32, 128, 8)),
            "64x128 w8 4/SM": (64, 128, 8, adaptive(M, N, 64, 128, 4)),
            "32x256 w8 4/SM": (32, 256, 8, adaptive(M, N, 32, 256, 4)),
            "16x256 w4 4/SM": (16, 256, 4, adaptive(M, N, 16, 256, 4)),
        }
        fns, labels = [], []
        for label, (bm, bn, w, rt) in variants.items():
            run, grid = launcher(dy, z, dz, act, bm, bn, w, rt)
            db = run().float()
            err = float((db - ref_db).norm() / ref_db.norm())
            assert err < 1e-2, (label, err)
            fns.append(run)
            labels.append(f"{label} (rt {rt}, grid {grid[0]}x{grid[1]})")
        if act == "none":
            fns.append(lambda: dy.sum(0))
        else:
            approx = "tanh" if act == "gelu_tanh" else "none"
            fns.append(lambda: torch.ops.aten.gelu_backward(dy, z, approximate=approx).sum(0))
        labels.append("torch")
        ms = race(fns, rounds=20, segment_ms=2.0)
        print(f"{M}x{N} {act}: " + " | ".join(f"{lab}: {t * 1e3:.1f}" for lab, t in zip(labels, ms)), flush=True)
