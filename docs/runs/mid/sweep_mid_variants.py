"""select_sweep with TMA configs around the one-warpgroup 128x128 tile added (six stages,
K steps of 128, warp specialization with four stages, 64-wide tiles with six), on 48 mid-size problems drawn at
random from a fresh draw. As run on the H100 (docs/runs/mid/mid_variants_h100.jsonl):
    python3 docs/runs/mid/sweep_mid_variants.py --shapes docs/runs/mid/mid48_seed81904.csv --out OUT.jsonl --time-budget 330
"""
import sys
sys.path.insert(0, ".")
from benchmarks import select_sweep
from autokernel.config import KernelConfig


def C(bm, bn, bk, w, s, **kw):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=w, num_stages=s, variant="tma", **kw)


NEW = (C(128, 128, 64, 4, 6, flatten=True), C(128, 128, 128, 4, 3, flatten=True), C(128, 128, 64, 4, 5),
       C(128, 128, 64, 4, 4, warp_specialize=True), C(128, 64, 64, 4, 6, flatten=True),
       C(64, 128, 64, 4, 6, flatten=True))
select_sweep.CANDIDATES = tuple(select_sweep.CANDIDATES) + NEW
sys.exit(select_sweep.main(sys.argv[1:]))
