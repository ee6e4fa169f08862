"""select_sweep with TMA configs the candidates lack added: 128x128 tiles on one warpgroup
(4 warps) and deeper pipelines, on the weakest mid-size problems of the fresh draws.
As run on the H100 (docs/runs/mid/sweep_w4_h100.jsonl):
    python3 docs/runs/mid/sweep_w4.py --shapes docs/runs/mid/weak_mid.csv --out OUT.jsonl --time-budget 150
"""
import sys
sys.path.insert(0, ".")
from benchmarks import select_sweep
from autokernel.config import KernelConfig


def C(bm, bn, bk, w, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)


NEW = (C(128, 128, 64, 4, 4), C(128, 128, 64, 4, 4, flatten=True), C(128, 128, 64, 4, 5, flatten=True),
       C(128, 128, 64, 8, 5, flatten=True), C(128, 64, 64, 4, 6, flatten=True))
select_sweep.CANDIDATES = tuple(select_sweep.CANDIDATES) + NEW
sys.exit(select_sweep.main(sys.argv[1:]))
