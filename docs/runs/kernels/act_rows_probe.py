"""The activation pass (kernel + the sum of its partials) at 1, 2, 4 and 8 row tiles of 32x128 (4 warps) a
program, side by side per problem (timing.race, GPU time, µs). Usage: python3 docs/runs/kernels/act_rows_probe.py"""
import torch, triton
from autokernel.kernels.backward import _activation_grad_kernel, row_tiles_for
from autokernel.timing import race
from autokernel import runtime
dt = torch.bfloat16
sms = runtime.sm_count()
acts = ["gelu_tanh", "gelu", "silu"]
shapes = [(m, n) for m in (1024, 2048, 4096, 8192, 16384) for n in (768, 3072, 4096, 14336) if m * n <= 16384 * 4096]
for i, (M, N) in enumerate(shapes):
    act = acts[i % 3]
    dy = torch.randn(M, N, device="cuda", dtype=dt); z = torch.randn(M, N, device="cuda", dtype=dt); dz = torch.empty_like(dy)
    fns, names = [], []
    for rt in (1, 2, 4, 8):
        grid = (triton.cdiv(M, 32 * rt), triton.cdiv(N, 128))
        partial = torch.empty((grid[0], N), dtype=torch.float32, device="cuda")
        def run(grid=grid, partial=partial, rt=rt):
            _activation_grad_kernel[grid](dy, z, dz, partial, dy, dy, M, N, dy.stride(0), dy.stride(1), z.stride(0), z.stride(1),
                                          dz.stride(0), dz.stride(1), 0.01, GRAD_ACTIVATION=act, STORE_DZ=True,
                                          COLUMN_SUM=True, FINISH=False, ROW_TILES=rt, BLOCK_M=32, BLOCK_N=128, num_warps=4)
            return partial.sum(0, dtype=dt)
        fns.append(run); names.append(rt)
    ms = race(fns)
    rule = row_tiles_for(M, N, sms)
    best = names[min(range(4), key=ms.__getitem__)]
    tiles = triton.cdiv(M, 32) * triton.cdiv(N, 128)
    print(f"{M}x{N} {act:9s} tiles/sm {tiles/sms:7.1f} rule {rule} best {best} | " + " ".join(f"rt{n} {t*1e3:6.1f}" for n, t in zip(names, ms)), flush=True)
