"""select_sweep with TMA configs that step K by 128 added (fewer, larger pipeline stages:
half the K steps and barriers per tile), on problems with a short K. As run on the H100:
    python3 docs/runs/mid/sweep_bk128.py --shapes SHORT_K.csv --out bk128.jsonl --time-budget 470
"""
import sys
sys.path.insert(0, ".")
from benchmarks import select_sweep
from autokernel.config import KernelConfig

def C(bm, bn, bk, w, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)

NEW = (C(128, 256, 128, 8, 2, epilogue_subtile=2, flatten=True), C(128, 128, 128, 8, 3, flatten=True),
       C(128, 128, 128, 8, 2, flatten=True), C(128, 128, 128, 4, 3, flatten=True),
       C(64, 256, 128, 4, 2, flatten=True), C(64, 256, 128, 4, 2, epilogue_subtile=2, flatten=True),
       C(64, 128, 128, 4, 4, flatten=True))
select_sweep.CANDIDATES = tuple(select_sweep.CANDIDATES) + NEW
sys.exit(select_sweep.main(sys.argv[1:]))
