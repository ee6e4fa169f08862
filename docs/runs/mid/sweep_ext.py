"""select_sweep with candidate configs added (new TMA tiles, flattened loops), to see whether
they raise the best of the candidates on drawn shapes and to fit their model constants.
As run on the H100 (benchmarks/results/select_sweep_ext_h100.jsonl.gz):
    python3 docs/runs/mid/sweep_ext.py --out ext.jsonl --n 160 --seed 23 --time-budget 470
"""
import sys
sys.path.insert(0, ".")
from benchmarks import select_sweep
from autokernel.config import KernelConfig

def C(bm, bn, bk, w, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)

NEW = (C(64, 128, 64, 4, 6), C(64, 128, 64, 4, 8), C(128, 64, 64, 4, 6), C(128, 128, 64, 8, 4, flatten=True),
       C(64, 256, 64, 4, 4, flatten=True), C(256, 128, 64, 8, 3, flatten=True), C(128, 128, 128, 8, 3, epilogue_subtile=2),
       C(64, 128, 128, 4, 4), C(64, 64, 128, 4, 6))
select_sweep.CANDIDATES = tuple(select_sweep.CANDIDATES) + NEW
sys.exit(select_sweep.main(sys.argv[1:]))
