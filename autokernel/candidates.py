"""The configs the selector chooses among: a fixed, small set spanning the kernel strategies.

Each is a point that was competitive somewhere on the H100 (docs/kernel-notes.md): thin
decode tiles on the pointer kernel, with and without split-K; mid-size tiles on the
pointer and TMA kernels; the 128x256 TMA tiles of large problems, flattened or with a
split epilogue. (Stream-K was a candidate of the first H100 sweeps: best on 1 shape of
536, by 2.4 %, and mispredicted by 1.8x on another; it stays in the tuner's space.) ``benchmarks/select_sweep.py`` times
every candidate that applies on a spread of shapes, and the selector's model
(``autokernel.select``) is fitted from those timings: its per-candidate constants are
what the GPU measured for that candidate, so a new candidate enters the set here and in
a new sweep, never in the model alone. The exception: the TMA tiles with a stream-K tail,
scored with their data-parallel twin's constants and a model of the tail
(``select.streamk_waves``, ``select.streamk_fixup_us``; docs/kernel-notes.md).
"""

from __future__ import annotations

from autokernel.config import KernelConfig


def _c(bm, bn, bk, g, w, s, variant="grouped", **extra) -> KernelConfig:
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=g, num_warps=w, num_stages=s,
                        variant=variant, **extra)


THIN_TMA: tuple[KernelConfig, ...] = (
    _c(64, 128, 128, 8, 4, 4, "tma", flatten=True),
    _c(64, 64, 128, 8, 4, 6, "tma", flatten=True),
    _c(64, 32, 128, 8, 4, 8, "tma"),
    _c(64, 128, 128, 8, 4, 4, "tma", stream_k=True),
    _c(64, 64, 128, 8, 4, 6, "tma", stream_k=True),
    # after whole waves (``select.streamk_applies``): the 64-row tiles' last round cut along K
    _c(64, 128, 128, 8, 4, 4, "tma", flatten=True, stream_k=True),
)
"""Memory-bound tiles on the TMA kernel for thin problems (at most THIN_TMA_MAX_M rows): K
steps of 128 and as many stages as shared memory holds, so that each SM keeps some 200 KB
of operand reads in flight. The copy engine fills a tile's rows past M with zeros without
reading them, so a 64-row tile costs a 33-row problem no memory traffic, only idle tensor
cores. Timed beside every other candidate on the H100 (docs/selector.md), the best of all
with them over the best without: 1.034 at 33-64 rows, 1.052 at 65-128 (200 problems),
1.058 at 129-192, 1.096 at 193-256, 1.040 at 257-384 (63 problems), 1.002 at 1-16. Below
33 rows they are considered only where the pointer kernels load a masked K tail
(``select.rows_aligned`` false: 1.254 over the pointer kernels on 31 problems of K = 1000)."""

THIN_TMA_MAX_M = 384
"""The most rows M for which the selector considers a THIN_TMA tile: where they were measured."""

_THIN_TILES = frozenset((c.block_m, c.block_n, c.block_k, c.num_stages) for c in THIN_TMA)


def thin_tma(config: KernelConfig) -> bool:
    """Whether ``config`` runs one of THIN_TMA's tiles on the TMA kernel (in any of its forms:
    plain, flattened, with a stream-K tail)."""
    return config.variant == "tma" and not config.swap_ab and (config.block_m, config.block_n, config.block_k,
                                                                config.num_stages) in _THIN_TILES


SWAPPED: tuple[KernelConfig, ...] = (
    _c(128, 32, 128, 8, 4, 5, "tma", flatten=True, swap_ab=True),
    _c(128, 32, 64, 8, 4, 6, "tma", flatten=True, swap_ab=True),
    _c(64, 32, 128, 8, 4, 6, "tma", flatten=True, swap_ab=True),
)
"""Tiles of C^T on the TMA kernel (``swap_ab``) for problems of at most SWAP_AB_MAX_M rows: the
weight's rows fill the MMA's 64- or 128-row side and M's few rows its 32-wide one, where the
plain tiles spend a 64-row MMA (or the pointer kernels' 16-32-row ones) on them. Raced on an
H200 beside the shipped pick at 17-32 rows: the best of them 1.06x the pick (12 problems;
1.02-1.32x against wide weights), and slower from 33 rows on against narrow ones
(docs/kernel-notes.md, "Few rows on the MMA's narrow side")."""


CANDIDATES: tuple[KernelConfig, ...] = (
    # decode and skinny: few rows against a whole weight (memory-bound)
    _c(16, 64, 128, 8, 4, 4),
    _c(16, 128, 128, 8, 4, 4),
    _c(32, 64, 128, 8, 4, 4),
    _c(64, 64, 128, 8, 4, 4),
    _c(16, 64, 128, 8, 4, 4, split_k=2),
    _c(16, 64, 128, 8, 4, 4, split_k=4),
    _c(32, 64, 128, 8, 4, 4, split_k=4),
    _c(64, 64, 128, 8, 4, 4, split_k=4),
    _c(64, 128, 64, 8, 4, 4, split_k=2),
    # few output tiles and a long K: more slices to fill the SMs
    _c(16, 64, 128, 8, 4, 4, split_k=8),
    _c(32, 64, 128, 8, 4, 4, split_k=8),
    _c(64, 64, 128, 8, 4, 4, split_k=8),
    _c(16, 64, 128, 8, 4, 4, split_k=16),
    _c(64, 64, 128, 8, 4, 4, split_k=16),
    _c(64, 128, 64, 8, 4, 4, split_k=4),
    _c(128, 128, 64, 8, 4, 4, split_k=4),
    # small and mid-size outputs: more, smaller tiles to fill the SMs
    _c(64, 64, 64, 8, 4, 5),
    _c(64, 128, 64, 8, 4, 5),
    _c(128, 64, 64, 8, 4, 5),
    _c(128, 128, 64, 8, 4, 4),
    _c(128, 128, 64, 8, 4, 4, split_k=2),
    _c(128, 128, 64, 8, 8, 4, "tma"),
    _c(128, 128, 64, 8, 4, 3, "tma", warp_specialize=True),
    _c(64, 256, 64, 16, 4, 4, "tma"),
    _c(64, 256, 64, 8, 4, 4, "tma", flatten=True),
    _c(128, 128, 64, 8, 8, 4, "tma", flatten=True),
    # one warpgroup holding the whole 128x128 accumulator, five stages: 1.06x the 8-warp
    # tile over 226 drawn shapes of more than 64 rows (docs/kernel-notes.md)
    _c(128, 128, 64, 8, 4, 5, "tma", flatten=True),
    # large: 128x256 tiles on the persistent TMA kernel
    _c(128, 256, 64, 8, 8, 3, "tma"),
    _c(128, 256, 64, 8, 8, 3, "tma", flatten=True),
    _c(128, 256, 64, 8, 8, 4, "tma", epilogue_subtile=2),
    _c(256, 128, 64, 8, 8, 3, "tma"),
    # a partial last wave (after whole ones, or alone: fewer tiles than SMs): its tiles'
    # K steps cut in chunks over the SMs; the stream-K twin of every TMA tile above (the
    # flattened ones first: of equal predictions the first wins)
    _c(64, 256, 64, 8, 4, 4, "tma", flatten=True, stream_k=True),
    _c(128, 128, 64, 8, 8, 4, "tma", flatten=True, stream_k=True),
    _c(128, 128, 64, 8, 4, 5, "tma", flatten=True, stream_k=True),
    _c(128, 256, 64, 8, 8, 3, "tma", flatten=True, stream_k=True),
    _c(128, 128, 64, 8, 8, 4, "tma", stream_k=True),
    _c(64, 256, 64, 16, 4, 4, "tma", stream_k=True),
    _c(128, 256, 64, 8, 8, 3, "tma", stream_k=True),
    _c(128, 256, 64, 8, 8, 4, "tma", epilogue_subtile=2, stream_k=True),
    _c(256, 128, 64, 8, 8, 3, "tma", stream_k=True),
    # thin problems (33-384 rows): memory-bound tiles on the TMA kernel
    *THIN_TMA,
    # at most 64 rows: tiles of C^T, M on the MMA's narrow side
    *SWAPPED,
)
"""The candidate configs for float16 and bfloat16 problems."""
