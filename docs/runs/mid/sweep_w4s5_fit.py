"""select_sweep restricted to the 128x128 flattened TMA tiles (8 warps s4, 4 warps s5) and
their stream-K twins, beside the default, pick, previous and torch, on the drawn shapes of more than 64 rows: the rows that fit the
one-warpgroup tile's constants over select_sweep's spread of drawn shapes. As run on the H100
(benchmarks/results/select_w4s5_fit_h100.jsonl):
    python3 docs/runs/mid/sweep_w4s5_fit.py --n 400 --seed 20261127 --out OUT.jsonl --time-budget 450
"""
import sys
sys.path.insert(0, ".")
from benchmarks import select_sweep

select_sweep.CANDIDATES = tuple(c for c in select_sweep.CANDIDATES
                                if c.variant == "tma" and c.flatten and (c.block_m, c.block_n) == (128, 128))
assert len(select_sweep.CANDIDATES) == 4, select_sweep.CANDIDATES
_draw = select_sweep.draw_shapes
select_sweep.draw_shapes = lambda n, seed: [p for p in _draw(n, seed) if p.m > 64]   # where 128-row tiles apply
sys.exit(select_sweep.main(sys.argv[1:]))
