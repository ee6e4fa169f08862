"""One launch each, under ncu, of cuBLAS, the 128x256 TMA kernel, its stream-K tail and the 128x128 w4 s5 tile at 4487x512x4352 fp16 nt (H100: docs/runs/streamk/ncu_parts_h100.txt).
    ncu --profile-from-start off --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section WarpStateStats --metrics dram__bytes_read.sum,lts__t_sector_hit_rate.pct python3 docs/runs/streamk/ncu_parts_probe.py"""
import torch
from autokernel import matmul
from autokernel.candidates import CANDIDATES
m, n, k = 4487, 512, 4352
a = torch.randn(m, k, device="cuda", dtype=torch.float16); b = torch.randn(n, k, device="cuda", dtype=torch.float16).t()
work = [("cublas", lambda: torch.mm(a, b))]
for lab in ["128x256x64 g8 w8 s3 tma fl", "128x256x64 g8 w8 s3 tma fl sk", "128x128x64 g8 w4 s5 tma fl"]:
    c = next(c for c in CANDIDATES if c.short() == lab)
    work.append((lab, lambda c=c: matmul(a, b, config=c)))
for _, fn in work:
    for _ in range(3): fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for lab, fn in work:
    print("launch:", lab, flush=True); fn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
