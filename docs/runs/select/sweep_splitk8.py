"""select_sweep with split-K candidates of 8 and 16 slices (and 4 for the 64x128 and 128x128
tiles) added, on problems with few rows and a long K, to see whether they raise the best
of the candidates there and to fit their model constants. As run on the H100:
    python3 docs/runs/select/sweep_splitk8.py --shapes SKINNY_LONG_K.csv --out sk8.jsonl --time-budget 400
"""
import sys
sys.path.insert(0, ".")
from benchmarks import select_sweep
from autokernel.config import KernelConfig

def C(bm, bn, bk, s, split):
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=8, num_warps=4, num_stages=s, variant="grouped",
                        split_k=split)

NEW = (C(16, 64, 128, 4, 8), C(32, 64, 128, 4, 8), C(64, 64, 128, 4, 8), C(16, 64, 128, 4, 16),
       C(64, 64, 128, 4, 16), C(64, 128, 64, 4, 4), C(128, 128, 64, 4, 4))
select_sweep.CANDIDATES = tuple(select_sweep.CANDIDATES) + NEW
sys.exit(select_sweep.main(sys.argv[1:]))
