"""Pick a kernel config for any GEMM shape without timing it: a model of the GPU ranks candidates.

The model, per candidate config c (a tile of BM x BN, K step, kernel) on a problem M x N x K:

    units  = ceil(M / BM) * ceil(N / BN) * split_k        programs' worth of output tiles
    waves  = ceil(units / SMs)                             the busiest SM's tiles (stream-K:
                                                           units / SMs, not rounded)
             - (1 - s_c) * shared                          the pointer kernels: its programs
                                                           that run beside another (``co_resident``)
    T      = smoothmax(waves * (a_c + b_c * K / split_k),  the tiles' compute and loads
                       memory)
             + d_c                                         launch, split-K's second pass, tails
    memory = sharpmax(bytes / (bandwidth * e_c),           the problem's own bytes
                      l2_bytes / (L2 bandwidth * g_c))     the operands as the tiles read them
    times exp(r_c) where B is row-major                    the layout (pointer kernels: 15 % less)
    l2_bytes = A * (1 + q * (ceil(N / BN) - 1))            each operand's first read through L2,
             + B * (1 + q * (ceil(M / BM) - 1))            its re-reads at the share q of one
                                                           (``Model.l2_reread``, per GPU)
    bytes, on the persistent TMA kernel past one round:    a last round that leaves SMs idle
      * (1 + t * (ceil(W) - W) / ceil(W)), W = tiles / SMs (``Model.dram_tail``, per GPU)

A model carried to a GPU of faster DRAM (``carried``) gives a grid whose operand reads in flight
fall short of the SMs only part of that gain (``Model.dram_gain``, ``REACH_BYTES``).

The TMA kernel with a stream-K tail (``stream_k``, variant tma) is scored with its
data-parallel twin's constants, its waves the whole ones plus one chunk of a tail tile, or
the longer of a head and one program's tails where the tail is cut so (``streamk_waves``,
``tail_cut``; with fewer tiles than SMs, no whole wave: every tile is the tail), plus the
fix-up's time (``streamk_fixup_us``).

a_c (µs per tile: prologue and epilogue), b_c (µs per tile per unit of K), e_c (the
fraction of the copy bandwidth the kernel reaches), g_c (the fraction of a nominal L2
bandwidth), d_c (µs), r_c (B row-major against B transposed) and s_c (the share of a round
a program costs beside another on its SM) are per-candidate
constants fitted to GPU timings of the candidates on a spread of shapes
(``benchmarks/select_sweep.py``), and shipped as data per GPU
(``autokernel/configs/selector/<device>.json``). Tuned configs from a best-config file
enter as candidates too, scored with the constants of the candidate that runs the same
kernel with the same tile.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace

import torch

from autokernel.candidates import CANDIDATES, THIN_TMA_MAX_M, thin_tma
from autokernel.config import KernelConfig, _cdiv, _next_pow2
from autokernel.kernels.fit import kernel_for, programs_per_sm
from autokernel.kernels.matmul_tma import head_rounds, tail_cut, tma_operands
from autokernel.knobs import SWAP_AB_MAX_M
from autokernel.records import torch_dtype


def tma_aligned(m: int, n: int, k: int, dtype: torch.dtype, layout: str) -> bool:
    """Whether the TMA kernel can take the operands of an M x N x K problem as
    ``Problem.make_inputs`` and nn.Linear store them: A [M, K] and B [K, N], each row-major
    or a transposed view as ``layout`` says, into a fresh C. The kernel's own rule
    (``kernels.matmul_tma.tma_operands``: dtype, 16-byte rows), asked of stand-ins that have
    the shapes and strides and no memory; ``api.tma_runs`` asks it of the call's tensors."""
    if k <= 0:
        return False
    return tma_operands(_stand_in(m, k, layout[0] == "t", dtype), _stand_in(k, n, layout[1] == "t", dtype),
                        torch.empty((m, n), dtype=dtype, device="meta")) is not None


def _stand_in(rows: int, cols: int, transposed: bool, dtype: torch.dtype) -> torch.Tensor:
    """A [rows, cols] operand with no memory: row-major, or a transposed view."""
    if transposed:
        return torch.empty((cols, rows), dtype=dtype, device="meta").t()
    return torch.empty((rows, cols), dtype=dtype, device="meta")


def why_not(config: KernelConfig, m: int, n: int, k: int, tma: bool, programs: int,
            aligned: bool = True) -> str | None:
    """Why candidate ``config`` is not considered for M x N x K, or None.

    Looser than the tuner's space: a candidate is dropped only where it cannot run as
    itself (no TMA descriptor, nothing to split) or computes mostly padding. ``aligned``:
    ``rows_aligned`` of the problem (where it is false, the memory-bound TMA tiles of thin
    problems stand in for the pointer kernels at any M up to their limit)."""
    return _why_not(config, m, n, k, tma, programs, max(16, _next_pow2(max(m, 1))),
                    max(16, _next_pow2(max(n, 1))), max(16, _next_pow2(max(k, 1))), aligned)


def _why_not(config: KernelConfig, m: int, n: int, k: int, tma: bool, programs: int,
             m_cap: int, n_cap: int, k_cap: int, aligned: bool = True) -> str | None:
    """``why_not`` with each dimension's smallest covering tile (a power of two, >= 16) given."""
    if config.variant == "tma" and not tma:
        return "no TMA descriptor for these operands"
    rows_m, dims = m, "MN"
    if config.swap_ab:  # the kernel computes C^T: its rules on the N x M problem it tiles
        if m > SWAP_AB_MAX_M:
            return f"swap_ab puts M's rows on the MMA's narrow side: considered for M <= {SWAP_AB_MAX_M}"
        m, n, m_cap, n_cap, dims = n, m, n_cap, m_cap, "NM"
    bm = config.block_m
    if bm < (16 if m <= 64 else 32 if m <= 128 else 64):
        return f"block_m={bm} is too thin for {dims[0]}={m}"
    if thin_tma(config):
        why = _thin_why_not(bm, m, m_cap, aligned)
        if why is not None:
            return why
    elif bm > m_cap:
        return f"block_m={bm} exceeds {dims[0]}={m}"
    if config.block_n > n_cap:
        return f"block_n={config.block_n} exceeds {dims[1]}={n}"
    if config.block_k > k_cap:
        return f"block_k={config.block_k} exceeds K={k}"
    if config.split_k > 1:
        if k // config.split_k < 2 * config.block_k:
            return f"split_k={config.split_k} leaves K slices shorter than two block_k steps"
        if -(-m // bm) * -(-n // config.block_n) >= programs:
            return "the output tiles alone fill the SMs: nothing to gain from split-K"
    if config.stream_k:
        tiles = -(-m // bm) * -(-n // config.block_n)
        if kernel_kind(config, tma) == "tma":
            sk_progs = tail_cut(tiles, programs, -(-k // config.block_k))[0]
            if not streamk_applies(rows_m, tiles, programs, sk_progs, config.flatten, thin_tma(config)):
                return (f"a stream-K tail needs a partial wave of tiles long enough in K to cut, and "
                        f"M >= {STREAMK_MIN_M} after whole waves (a flattened config; {THIN_TAIL_MIN_M} for a thin "
                        f"TMA tile) or M >= {STREAMK_FEW_MIN_M} "
                        "with fewer tiles than SMs")
        elif -(-k // config.block_k) < 2 or tiles % programs == 0 or tiles < programs:
            return "stream-K needs at least one full wave and a partial one"
    return None


def _thin_why_not(bm: int, m: int, m_cap: int, aligned: bool) -> str | None:
    """The rows rule of a THIN_TMA tile of ``bm`` rows (``_why_not``'s, and the fit's rows,
    ``_left_out``): taller than M (``m_cap``) only where the rows are not ``aligned``, and
    at most THIN_TMA_MAX_M rows."""
    if bm > m_cap and aligned:
        return f"block_m={bm} exceeds M={m}"
    if m > THIN_TMA_MAX_M:
        return f"a memory-bound tile of thin problems, considered for M <= {THIN_TMA_MAX_M}"
    return None


# ---- the model -------------------------------------------------------------------------

SMOOTH_P = 3.0
"""The smooth maximum of the compute and memory terms: (x^p + y^p)^(1/p)."""
MEMORY_P = 8.0
"""The sharper maximum of the two memory terms (DRAM and L2), taken before they meet the
compute term: the operands stream from DRAM through L2 into the SMs, a pipeline whose slower
stage sets the time, not a sum. With all three terms in one smooth maximum at SMOOTH_P, a
memory-bound tile at both bounds at once was over-predicted (a thin TMA tile at 128x3584x18944
bf16: 71 µs predicted, 54 measured) and lost its picks to slower pointer tiles. Replayed on the
recorded H100 sweeps (docs/selector.md): 10-fold CV over 1184 shapes, pick / best 0.979 ->
0.982 (0.981 at 5); on 440 fresh shapes fitted without them, 0.981 -> 0.983."""


def _memory_max(dram_us: float, l2_us: float) -> float:
    """The memory side of the model: the DRAM and L2 terms' sharp maximum (MEMORY_P)."""
    return (dram_us ** MEMORY_P + l2_us ** MEMORY_P) ** _INV_MEMORY_P


def _smooth_max(compute_us: float, memory_us: float) -> float:
    """The compute and memory sides met in a smooth maximum (SMOOTH_P)."""
    return (compute_us ** SMOOTH_P + memory_us ** SMOOTH_P) ** _INV_P


_INV_P = 1 / SMOOTH_P
_INV_MEMORY_P = 1 / MEMORY_P


L2_BANDWIDTH = 14.0e12
"""A nominal L2 bandwidth (bytes per second), a ceiling: each config's fitted fraction g of
it is what its tiles' operand reads reach. Bounded, it fitted better than unbounded: 10-fold
CV over 696 H100 shapes, picks more than 2 % slower than the default 19 against 29. At
10e12 nearly every config's g sat at its bound (0.98-0.99), and 64x256 tiles read their
operands faster than that (809x5120x25856: 4.3 GB of tile reads in 312 µs, 13.8e12); of
10, 12, 14, 20 and 30e12, 12e12 cross-validated best over 915 H100 shapes then (pick / best
0.981 -> 0.987). With the memory terms in their own sharp maximum and the programs side by
side on an SM, the 64x256 tile's g sat at its bound again (0.99; its large problems predicted
10 % slow) and the thin TMA tiles read 13.5e12 on the H200; of 12 to 16 and 20e12, 14e12
replayed best on the files the model was not fitted on (the H100's draws 0.9853 -> 0.9863
of the best, the H200's sweeps 0.9828 -> 0.9839, fewer picks more than 2 % slower than the
default on both: docs/selector.md, "An L2 ceiling of 14 TB/s"). A selector file stores the
ceiling it was fitted with (``Model.from_json`` reads a file of another ceiling, or of none:
12e12, by rescaling its g)."""
LEGACY_L2_BANDWIDTH = 12.0e12
"""The L2 ceiling of selector files that do not store theirs (written before it changed)."""
LEGACY_L2_REREAD = 1.0
"""``Model.l2_reread`` of selector files that do not store one: every read of an operand
through L2 at the same cost, as they were fitted."""
LEGACY_DRAM_TAIL = 0.0
"""``Model.dram_tail`` of selector files that do not store one: a grid's bytes at its fitted
bandwidth whatever its last round holds, as they were fitted."""
MAX_DRAM_TAIL = 2.0
"""The largest ``Model.dram_tail`` a selector file may hold: at 2 a last round of one tile
would count a grid's bytes up to twice, beyond anything measured."""
COPY_BANDWIDTH = 3.0e12
"""Bytes per second of a device-to-device copy (read + write) on the H100; the memory
term's efficiency constant e_c is relative to it."""
REACH_BYTES = 80 * 1024
"""Operand bytes in flight per SM (stages x the tile's A and B slices, over the programs the
grid runs) at which a grid draws the whole gain of a faster DRAM (``Model.dram_gain``)."""
TAIL_BANDWIDTH = 20.0e12
"""Bytes per second at which a stream-K tail's chunks read their tiles' operands, a bound
that rarely binds: the chunks of one K range run at once, so tail tiles that share a row
or column of the output share those reads in L2. Fitted to the H100's stream-K twins
against their data-parallel tiles (480 pairs; RMS log error of the predicted ratio): 10e12
bound the tails with no whole wave and ran 8 % pessimistic there (0.145; 0.101 over all),
20e12 and up fitted alike (0.111; 0.083) (docs/kernel-notes.md)."""
FIXUP_US = 3.0
"""µs of the stream-K fix-up's launch, beyond the partials it moves."""
PARTIAL_BANDWIDTH = 6.0e12
"""Bytes per second at which the stream-K tail's float32 partials are written and read back
by the fix-up: they stay in L2 between the two kernels, so faster than a copy through DRAM.
Fitted to the H100's stream-K twins against their data-parallel tiles once the fix-up ran
in pieces (680 pairs; RMS log error of the predicted ratio): 3e12 (COPY_BANDWIDTH) 0.109,
4e12 0.089, 6e12 0.086, 9e12 0.097 (docs/kernel-notes.md)."""


EPILOGUE_EXCESS_NS = {"gelu": (0.28, 0.15), "gelu_tanh": (0.012, 0.035), "silu": (0.012, 0.035)}
"""(TMA kernel, pointer kernels): ns x SMs per output element by which an activation's
epilogue costs more where 4 warps hold the tile, 128 or more accumulator elements a thread
(128x128 at 4 warps), than at 8 warps. One warp per SM sub-partition, its registers full,
cannot hide the math's dependent chains. Measured on an H200 (bf16, bias; 128x128x64 at 4
and 8 warps, three or four problems of 2-34 M outputs; docs/kernel-notes.md): the exact
gelu's erfc fit 0.26-0.33 on the TMA kernel (0.21-0.35 with the degree-6 fit that replaced
it), 0.13-0.16 on the pointer kernel; gelu_tanh
0.006-0.021 and 0.02-0.05; silu 0.008-0.013 on the TMA kernel (on the pointer kernel taken
as gelu_tanh's, the same sigmoid: not measured there); relu none; 64x128 tiles at 4 warps (64
elements a thread) no more than 8 warps. The fitted constants come from problems with no
activation (or gelu_tanh and silu, nearly alike on every tile), so this is the term they
lack; a new activation with a long epilogue needs its own."""


def epilogue_excess_us(activation: str, m: int, n: int, programs: int) -> tuple[float, float] | None:
    """µs that ``activation``'s epilogue adds to an M x N output on tiles of 4 full warps, on
    the TMA kernel and on the pointer kernels (``EPILOGUE_EXCESS_NS``), or None where it is
    alike on every tile."""
    excess = EPILOGUE_EXCESS_NS.get(activation)
    return None if excess is None else (excess[0] * m * n / programs * 1e-3, excess[1] * m * n / programs * 1e-3)


def streamk_waves(units: int, programs: int, sk_progs: int, a: float, k_us: float, bm: int, bn: int, k: int,
                  itemsize: int, head: float = 0.0) -> float:
    """The waves of the TMA kernel with a stream-K tail, for the model's compute term (one
    wave: a tile's fixed ``a`` plus its K loop's ``k_us``): the whole waves, then the tail
    as a fraction of a wave: one chunk of a tail tile's K loop with its fixed part
    (``sk_progs``, from ``tail_cut``, gives the chunks), or the tail's operand reads at
    TAIL_BANDWIDTH, whichever is longer. ``head``: the share of a tile's K steps in one head
    where the tail is cut in heads and tails (``tail_cut``; ``sk_progs`` then gives the
    heads): the longer of a head and the tails one program runs."""
    full, tail = divmod(units, programs)
    if head:
        heads = sk_progs // tail - 1
        rounds = head_rounds(tail, programs, heads)[1]
        rest = 1 - heads * head
        share, chunk_us = max(head, rounds * rest), max(a + k_us * head, rounds * (a + k_us * rest))
    else:
        chunks = sk_progs // tail
        share, chunk_us = 1 / chunks, k_us / chunks + a
    if a + k_us <= 0:  # constants that give a tile no time (made-up ones): the chunk's share of a wave
        return full + share
    reads_us = tail * (bm + bn) * k * itemsize / TAIL_BANDWIDTH * 1e6
    return full + max(chunk_us, reads_us) / (a + k_us)


def streamk_fixup_us(sk_progs: int, bm: int, bn: int) -> float:
    """µs the stream-K fix-up adds: its launch, and the float32 partials (one per chunk:
    ``sk_progs``) written and read at PARTIAL_BANDWIDTH."""
    return FIXUP_US + 2 * sk_progs * bm * bn * 4 / PARTIAL_BANDWIDTH * 1e6


STREAMK_MIN_M = 257
"""The fewest rows M for which the selector considers a stream-K tail after whole waves.
At M <= 256 (one or two rows of 128-row tiles, the skinny class) the problem is bound by
reading B, and on the H100 the stream-K pick lost on every such problem measured (six, M
of 103-258, 0.83-0.97x the pick without it), the tail's gain in waves being no gain in
time there (docs/kernel-notes.md). Not for the thin TMA tiles (64 rows, K steps of 128):
their flattened twin runs its tail from THIN_TAIL_MIN_M rows on (``streamk_applies``)."""


STREAMK_FEW_MIN_M = 33
"""The fewest rows M for which the selector considers the stream-K tail where the tiles are
fewer than the SMs (no whole wave: split-K on TMA in aligned chunks). Skinny problems
gain there: the SMs a whole wave would fill sit idle, where after whole waves they do
not (STREAMK_MIN_M). Measured on the H100 for 65 <= M <= 256, then on the H200 for the
decode rows the thin TMA tiles take (33-64; below, the pointer kernels' thin tiles and
split-K): there the pick moved on 32 of 5000 fresh problems, 1.05x faster (25 of another
4000, 1.09x), mostly from pointer split-K and the data-parallel thin tiles to their
unflattened twins (docs/kernel-notes.md)."""


THIN_TAIL_MIN_M = 65
"""The fewest rows M for which the selector considers a thin TMA tile's flattened stream-K
twin after whole waves (``streamk_applies``). At 33-64 rows the 17 fresh problems whose pick
it took ran 0.989x the pick without it on the H200 (docs/kernel-notes.md)."""


def streamk_applies(m: int, units: int, programs: int, sk_progs: int, flatten: bool,
                    thin: bool = False) -> bool:
    """Whether the selector scores the TMA kernel's stream-K tail for these tiles: a partial
    wave whose tiles are cut in two chunks or more (``sk_progs``, from ``tail_cut``; one
    chunk: the plain kernel runs), after whole waves for M of STREAMK_MIN_M or more, or
    alone (fewer tiles than SMs: every tile is the tail, cut along K as split-K is) for M
    of STREAMK_FEW_MIN_M or more.

    After whole waves only ``flatten``ed configs, the twins first checked there: on the
    H100 the unflattened twins won nothing there that a flattened one did not (best share
    0.93-0.97 against 0.95-0.97 over 45 problems) and lost 0.66x on one fresh problem to a
    misprediction of the 128x128 tile; with no whole wave, where each program runs one
    tile, they ran at 0.99 of the best (docs/kernel-notes.md).

    ``thin``: a thin TMA tile (``candidates.thin_tma``), whose flattened twin takes a tail
    after whole waves from THIN_TAIL_MIN_M rows on. Its 64-row tiles leave a skinny
    problem more rounds than the 128-row ones, the last often nearly empty; on the H200,
    over 70 drawn problems of 65-256 rows with more of its tiles than SMs, the twin ran
    1.07x its data-parallel tile (geomean; up to 1.46x with a long K, down to 0.90x with a
    short one: the fix-up's cost, which the model counts) (docs/kernel-notes.md)."""
    tail = units % programs
    if tail == 0 or sk_progs < 2 * tail:
        return False
    if units < programs:
        return m >= STREAMK_FEW_MIN_M
    return flatten and m >= (THIN_TAIL_MIN_M if thin else STREAMK_MIN_M)


def kernel_kind(config: KernelConfig, tma: bool) -> str:
    """Which kernel a config runs: "splitk", "streamk", "tma" or "grouped" (``tma``: whether
    the TMA kernel can take these operands on this GPU, for "auto" and "tma"): the kernels'
    own rule (``kernels.fit.kernel_for``), the dtype aside (the candidates are fp16/bf16)."""
    return kernel_for(config, tma=tma)


def features(config: KernelConfig, m: int, n: int, k: int, dtype: torch.dtype, tma: bool,
             programs: int, reread: float = LEGACY_L2_REREAD,
             tail: float = LEGACY_DRAM_TAIL) -> tuple[float, float, float, float]:
    """(waves, K per program, bytes, L2 bytes): what the model's constants multiply. ``tma``: whether
    the TMA kernel can take the operands. ``reread``: the model's ``Model.l2_reread``; ``tail``:
    its ``Model.dram_tail``."""
    return _terms(config, kernel_kind(config, tma), m, n, k, dtype.itemsize, programs, reread, tail)


def round_idle(units: int, programs: int) -> float:
    """The share of the SMs' rounds a persistent grid leaves idle in its last round, past one
    round: (ceil(W) - W) / ceil(W), W = units / programs; 0 within one round (a grid short of
    the SMs is a bandwidth matter, ``e`` per config) and for whole rounds."""
    if units <= programs:
        return 0.0
    rounds = -(-units // programs)
    return (rounds - units / programs) / rounds


def _terms(config: KernelConfig, kind: str, m: int, n: int, k: int, itemsize: int,
           programs: int, reread: float = LEGACY_L2_REREAD,
           tail: float = LEGACY_DRAM_TAIL) -> tuple[float, float, float, float]:
    """``features`` with the kernel kind given (the selector keeps it per candidate: a new
    shape's pick then costs arithmetic only).

    Waves: the rounds of tiles the busiest SM runs, ceil(units / SMs), for every kernel but
    stream-K, which spreads the last round's work over every SM (units / SMs). The pointer
    kernels run several programs to an SM where they fit, but co-resident programs share it:
    counting whole waves of the programs that fit at once (ceil(units / (SMs * occupancy)))
    saw one wave where the tiles outnumber the SMs, and mispredicted decode configs with deep
    pipelines (on the H100 16x64x128 at 5-6 stages ran at 0.79-0.98x the 4-stage default's
    speed once the tiles outnumbered the SMs). Each config's constants take in what sharing
    an SM costs it. 10-fold CV over 696 H100 shapes: picks more than 2 % slower than the default
    19 -> 8, pick / best 0.979 -> 0.978, cuBLAS / pick 0.886 -> 0.885."""
    split = config.split_k
    if config.swap_ab and kind == "tma":  # the kernel computes C^T: N x M tiles, B^T read first
        m, n = n, m
    units = _cdiv(m, config.block_m) * _cdiv(n, config.block_n) * split
    k_per = _cdiv(_cdiv(max(k, 1), split), config.block_k) * config.block_k
    waves = units / programs if kind == "streamk" else float(_cdiv(units, programs))
    nbytes = (m * k + k * n + m * n) * itemsize
    if tail and kind == "tma":  # Model.dram_tail: the persistent grid's last round
        nbytes *= 1.0 + tail * round_idle(units, programs)
    if split > 1:
        nbytes += 2 * m * n * 4 * split  # the fp32 partial tiles, written then summed
    # The operands as the tiles read them through L2: A once per column of tiles, B once
    # per row of tiles (thin tiles re-read the other operand many times), each read after
    # the first at ``reread`` of the first's cost (Model.l2_reread).
    l2_bytes = (m * k * (1.0 + reread * (_cdiv(n, config.block_n) - 1))
                + k * n * (1.0 + reread * (_cdiv(m, config.block_m) - 1))) * itemsize
    return waves, float(k_per), float(nbytes), float(l2_bytes)


SHARING_KINDS = ("grouped", "splitk")
"""The kernels whose grids launch every program at once (``programs_per_sm``), so that an SM
runs several of them side by side where they fit; the TMA kernels' grids are persistent."""


def co_resident(units: int, programs: int, per_sm: int) -> int:
    """Of the programs the busiest SM runs (ceil(units / SMs)), those that run beside another
    on it: it holds at most ``per_sm`` at once, so they run in groups of ``per_sm`` and a last
    group of the rest, and every program of a group but one runs beside the others.

    Programs side by side share an SM's loads and tensor cores, but a memory-bound tile
    alone leaves both idle part of the time: two or three together take less than their
    rounds one after the other. Counted as whole rounds (waves = ceil(units / SMs)), the
    model scored the decode tiles (16x64x128 at 61 KiB, three to an SM) 5-13 % slow between
    one and two rounds of programs and fast below one (H100 and H200 sweeps); each such
    program now costs the config's fitted share s of a round (``Constants.s``)."""
    busiest = -(-units // programs)
    groups, rest = divmod(busiest, per_sm)
    return groups * (per_sm - 1) + max(rest - 1, 0)


def sharing(config: KernelConfig, m: int, n: int, dtype: torch.dtype, tma: bool, programs: int) -> int:
    """``co_resident`` for ``config`` on an M x N output: 0 for the TMA kernels."""
    kind = kernel_kind(config, tma)
    if kind not in SHARING_KINDS:  # the TMA kernels (with or without swap_ab) among them
        return 0
    units = _cdiv(m, config.block_m) * _cdiv(n, config.block_n) * config.split_k
    return co_resident(units, programs, programs_per_sm(config, dtype, tma=tma))


@dataclass(frozen=True)
class Constants:
    """A candidate's fitted constants: per-tile fixed µs, µs per tile per unit of K, the
    fraction of copy bandwidth reached, fixed µs per call, the fraction of L2_BANDWIDTH its
    operand reads reach (None in a file fitted without the L2 term), the log of its time
    with B row-major over its time with B as a transposed view (``r``; None in a file fitted
    without it, which then predicts both alike), and the share of a round that each of its
    programs running beside another on an SM costs (``s``, ``co_resident``; None in a file
    fitted without it, which counts them as whole rounds)."""

    a: float
    b: float
    e: float
    d: float
    g: float | None = None
    r: float | None = None
    s: float | None = None

    def predict_us(self, waves: float, k_per: float, nbytes: float, l2_bytes: float = 0.0,
                   b_rows: bool = False, shared: float = 0.0, k_floor: float = 0.0) -> float:
        """``b_rows``: B is row-major (layout "nn" or "tn"), not a transposed view.
        ``shared``: of the ``waves``, the programs that run beside another (``sharing``).
        ``k_floor``: the least µs per unit of K a tile takes (``split_row_floor_us``)."""
        if shared and self.s is not None:
            waves -= (1.0 - self.s) * shared
        compute = waves * (self.a + max(self.b, k_floor) * k_per)
        memory = nbytes * (1e6 / (COPY_BANDWIDTH * self.e))
        if self.g is not None:
            memory = _memory_max(memory, l2_bytes * (1e6 / (L2_BANDWIDTH * self.g)))
        us = _smooth_max(compute, memory) + self.d
        if b_rows and self.r is not None:
            us *= math.exp(self.r)
        return us

    def values(self) -> list[float]:
        # Positional in a selector file: r only beside g, s only beside r (``fit`` gives all).
        return [self.a, self.b, self.e, self.d] + [x for x in (self.g, self.r, self.s) if x is not None]


def config_id(config: KernelConfig) -> str:
    """A config's key in a selector file: its JSON, every field shown."""
    return config.to_json()


def fit(rows: list[dict], programs: int = 132, steps: int = 800, seed: int = 0,
        dram_scale: float = 1.0, l2_reread: float = LEGACY_L2_REREAD,
        dram_tail: float = LEGACY_DRAM_TAIL) -> dict[str, Constants]:
    """Constants per config from sweep rows (``benchmarks/select_sweep.py``: m, n, k, dtype,
    layout, config as a dict, gpu_ms), by least squares on log time with torch's Adam.

    A config needs 4 successful rows to get constants. The constants of every config are
    pulled gently towards the mean of its kernel kind, so that a config timed on few
    shapes does not fit noise. The TMA kernel's stream-K tail (``stream_k`` with variant
    tma) gets none: it is scored with its data-parallel twin's constants and the tail's
    model (``streamk_waves``), which these features (whole waves) do not describe.

    ``dram_scale``: the swept GPU's DRAM bandwidth over the H100's (the datasheets'): each
    config's e is fitted below a ceiling of COPY_BANDWIDTH times it, and returned relative to
    COPY_BANDWIDTH as always (above 1 on a GPU of faster DRAM). With the H100's ceiling an
    H200's decode tiles, which copy at 3.4-4.1 TB/s there, sat at the bound and were
    predicted slow (docs/selector.md).

    ``l2_reread``: the L2 term's cost of each re-read of an operand (``Model.l2_reread``), and
    ``dram_tail`` the DRAM term's for a persistent grid's last round (``Model.dram_tail``); the
    constants hold only under the same values."""
    data: list[tuple[int, tuple[float, float, float]]] = []
    index: dict[str, int] = {}
    kinds: list[str] = []
    per: dict[str, list] = {}
    for row in rows:
        if row.get("config") is None or not row.get("gpu_ms") or row.get("status", "success") != "success":
            continue
        config = KernelConfig.from_dict(row["config"])
        if not _tail_twin(config):
            per.setdefault(config_id(config), []).append((config, row))
    for key, items in per.items():
        if len(items) < 4:
            continue
        index[key] = len(index)
        config = items[0][0]
        kinds.append(kernel_kind(config, True))
        for _, row in items:
            dtype = torch_dtype(row["dtype"])
            tma = tma_aligned(row["m"], row["n"], row["k"], dtype, row.get("layout", "nt"))
            if _left_out(config, row, tma):
                continue
            f = features(config, row["m"], row["n"], row["k"], dtype, tma, programs, l2_reread, dram_tail)
            shared = float(sharing(config, row["m"], row["n"], dtype, tma, programs))
            data.append((index[key], (*f, float(b_row_major(row.get("layout", "nt"))), shared, row["gpu_ms"] * 1e3)))
    if not data:
        return {}
    g = torch.Generator().manual_seed(seed)
    idx = torch.tensor([i for i, _ in data])
    x = torch.tensor([v for _, v in data], dtype=torch.float64)
    waves, k_per, nbytes, l2_bytes, b_rows, shared, t = x.unbind(1)
    n_cfg = len(index)
    theta = torch.zeros(n_cfg, 7, dtype=torch.float64)
    theta[:, 0] = math.log(2.0)
    theta[:, 1] = math.log(0.01)
    theta[:, 2] = 1.0
    theta[:, 3] = math.log(3.0)
    theta[:, 4] = 1.0
    theta[:, 5] = 0.0
    theta[:, 6] = 0.0  # s = 0.5
    theta += 0.01 * torch.randn(theta.shape, generator=g, dtype=torch.float64)
    theta.requires_grad_(True)
    kind_ids = {kind: i for i, kind in enumerate(sorted(set(kinds)))}
    kind_of = torch.tensor([kind_ids[kind] for kind in kinds])
    opt = torch.optim.Adam([theta], lr=0.05)
    for step in range(steps):
        opt.zero_grad()
        a, b, d = theta[idx, 0].exp(), theta[idx, 1].exp(), theta[idx, 3].exp()
        e = dram_scale * torch.sigmoid(theta[idx, 2])
        g_l2 = torch.sigmoid(theta[idx, 4])
        compute = (waves - (1 - torch.sigmoid(theta[idx, 6])) * shared) * (a + b * k_per)
        memory = nbytes / (COPY_BANDWIDTH * e) * 1e6
        l2 = l2_bytes / (L2_BANDWIDTH * g_l2) * 1e6
        memory = _memory_max(memory, l2)
        pred = (compute ** SMOOTH_P + memory ** SMOOTH_P) ** (1 / SMOOTH_P) + d
        loss = ((pred.log() + theta[idx, 5] * b_rows - t.log()) ** 2).mean()
        means = torch.zeros(len(kind_ids), 7, dtype=torch.float64).index_add(0, kind_of, theta)
        counts = torch.zeros(len(kind_ids), dtype=torch.float64).index_add(0, kind_of, torch.ones(n_cfg, dtype=torch.float64))
        prior = ((theta - (means / counts[:, None])[kind_of]) ** 2).mean()
        (loss + 1e-3 * prior).backward()
        opt.step()
        if step == steps * 2 // 3:
            for group in opt.param_groups:
                group["lr"] = 0.01
    theta = theta.detach()
    return {key: Constants(a=float(theta[i, 0].exp()), b=float(theta[i, 1].exp()),
                           e=float(dram_scale * torch.sigmoid(theta[i, 2])), d=float(theta[i, 3].exp()),
                           g=float(torch.sigmoid(theta[i, 4])), r=float(theta[i, 5]),
                           s=float(torch.sigmoid(theta[i, 6])))
            for key, i in index.items()}


def _tail_twin(config: KernelConfig) -> bool:
    """A config of the TMA kernel's stream-K tail: no constants of its own (``fit``)."""
    return config.stream_k and config.variant == "tma"


def _left_out(config: KernelConfig, row: dict, tma: bool) -> bool:
    """Whether ``choose`` never considers ``config`` for the problem of sweep ``row`` (the
    pointer kernels where the TMA kernel runs and ``rows_aligned`` is false): such rows
    neither fit its constants nor count in its error. The pointer kernels ran 2-7x slower
    there than the model predicts them, and those few rows had made the default pointer
    config's error 0.23 instead of 0.09 (docs/selector.md). Likewise the memory-bound TMA
    tiles of thin problems (``candidates.thin_tma``) outside the rows they are considered
    for: their constants describe them where they can be picked. And every config on 16-bit
    operands whose rows split 32-byte sectors (``split_rows``): the constants are of whole
    sectors, the floor ``choose`` puts on such rows models the rest (their TMA tiles ran
    1.1-1.9x the aligned prediction)."""
    layout = row.get("layout", "nt")
    aligned = rows_aligned(row["k"], layout)
    m = row["m"]
    if any(split_rows(m, row["n"], row["k"], torch_dtype(row["dtype"]).itemsize, layout)):
        return True
    if thin_tma(config) and _thin_why_not(config.block_m, m, max(16, _next_pow2(m)), aligned) is not None:
        return True
    return tma and kernel_kind(config, tma) != "tma" and not aligned


def fit_errors(model: "Model", rows: list[dict]) -> dict[str, float]:
    """Per config of ``model`` (by ``config_id``), the RMS of log(predicted / measured) over
    the sweep rows it scores (its own, and those of configs scored with its constants):
    how far its predictions are to be trusted. The stream-K tail's rows are left out, as
    in ``fit``."""
    squares: dict[str, list[float]] = {}
    for row in rows:
        if row.get("config") is None or not row.get("gpu_ms") or row.get("status", "success") != "success":
            continue
        config = KernelConfig.from_dict(row["config"])
        if _tail_twin(config):
            continue
        dtype = torch_dtype(row["dtype"])
        tma = tma_aligned(row["m"], row["n"], row["k"], dtype, row.get("layout", "nt"))
        found = model.constants_for(config, tma)
        if found is None or _left_out(config, row, tma):
            continue
        us = found[0].predict_us(*features(config, row["m"], row["n"], row["k"], dtype, tma, model.programs,
                                           model.l2_reread, model.dram_tail),
                                 b_rows=b_row_major(row.get("layout", "nt")),
                                 shared=sharing(config, row["m"], row["n"], dtype, tma, model.programs))
        squares.setdefault(config_id(found[1]), []).append(math.log(us / (row["gpu_ms"] * 1e3)) ** 2)
    return {key: math.sqrt(sum(v) / len(v)) for key, v in squares.items()}


# ---- choosing --------------------------------------------------------------------------

DEFAULT_MARGIN = 0.03
"""With a model file that holds no errors (``Model.errors``): the default config is replaced
only by a config predicted this much faster. The model's
errors are a few per cent (median 7 % on the H100 sweep), and within them the default,
which many shapes were read for, is the safer choice. 10-fold cross-validation on the H100
sweep: 0.03 gave the best geomean of pick over the sweep's best (docs/selector.md)."""

UNCERTAINTY_Z = 0.35
"""Where the model knows its errors (``Model.errors``), the default config is replaced only
by a config whose predicted gain, as a log ratio, exceeds UNCERTAINTY_Z times the combined
error of the two predictions: sqrt(err_winner^2 + err_default^2), each the RMS log error of
the constants that scored it on the rows they were fitted to: a margin proportional to the
uncertainty of the two predictions (on the H100 about 0.1 for either kernel kind; a config
must then be predicted some 4 % faster). Chosen by 10-fold cross-validation on the H100
sweeps (536 shapes, against a flat 3 % margin: picks more than 2 % slower than the default
37 -> 25, geomean cuBLAS / pick 0.8989 -> 0.8984; again on 696 shapes with the per-SM
waves, z = 0.2-0.4 against 0.3: docs/selector.md). With the programs side by side on an SM
and the L2 ceiling at 14e12 the decode tiles' errors came out smaller, and the margin with
them: over the 1908 shapes 0.35 kept pick / best at 0.986 with 26 picks more than 2 % slower
than the default against 44 at 0.3 (0.4: 0.985, 20; docs/selector.md, "An L2 ceiling of 14
TB/s")."""

SCHEMA = 2
"""Schema 2: the memory terms meet in their own sharp maximum (MEMORY_P); a file of schema 1
was fitted with all three terms in one smooth maximum, and its constants mean other times."""


@dataclass(frozen=True)
class Model:
    """The fitted constants of one GPU: per config (by ``config_id``), the SM count they
    were fitted for, and per config the RMS log error of its predictions on the rows it
    was fitted to (``errors``, from ``fit_errors``; empty in a file written without them,
    where ``choose`` falls back to ``DEFAULT_MARGIN``)."""

    device: str
    programs: int
    constants: dict[str, Constants]
    errors: dict[str, float] = field(default_factory=dict)
    _prepared: dict = field(default_factory=dict, compare=False, repr=False)
    based_on: str | None = field(default=None, compare=False)
    """Where the constants were carried from another GPU's model (``carried``): how, in words."""
    dram_gain: float = 1.0
    """Where carried to a GPU of faster DRAM (``carried``): how many times the fitted GPU's
    bandwidth it has. A grid whose operand reads in flight fall short of REACH_BYTES per SM
    gets that gain in proportion (``choose``); 1.0 for a model fitted on its own GPU."""
    l2_reread: float = LEGACY_L2_REREAD
    """What each read of an operand tile after its first costs the L2 term, as a share of the
    first (``features``): the tiles of a row or column that share an operand run side by side
    in the grouped order, so its later reads hit lines the first brought into L2, and the
    first, a miss, costs L2 its fill as well. Fitted per GPU by replay, stored in the file
    (a file without it: LEGACY_L2_REREAD). On the H200, 0.5: each of its sweeps held out
    of a fit on the others, pick / best 0.9868 (1.0) -> 0.9887 (0.7), 0.9895 (0.5), 0.9882
    (0.3), skinny problems 0.975 -> 0.981, where thin tiles read B once per 64 rows and were
    predicted slow; on the H100's held-out draws 0.5 read 0.9851 against 0.9866, and its
    model keeps 1.0 (docs/selector.md)."""
    dram_tail: float = LEGACY_DRAM_TAIL
    """How much a persistent TMA grid's last round slows its DRAM term: its bytes count
    ``1 + dram_tail * round_idle`` times (``features``), the idle share of the SMs' rounds.
    A memory-bound grid whose last round holds few tiles streams that round through those
    SMs alone, each of which reaches only so much (on the H200 a 64x128 thin tile's last
    round of 39 tiles drew some 2 TB/s where a grid of 86 64x256 tiles drew 4). The pointer
    kernels' grids, whose programs share SMs, are left as they are. Fitted per GPU by replay,
    stored in the file (a file without it: LEGACY_DRAM_TAIL, no such term). On the H200, 0.5:
    its sweeps each held out of a fit on the others, pick / best 0.9893 -> 0.9906 (0.3:
    0.9904, 0.7: 0.9907, 1.0: 0.9905), decode 0.9873 -> 0.9903; the H100's held-out draws
    read 0.9866 -> 0.9860 with it, and its model keeps 0 (docs/selector.md)."""

    def to_json(self) -> str:
        data = {"schema": SCHEMA, "device": self.device, "programs": self.programs, "l2_bandwidth": L2_BANDWIDTH,
                "l2_reread": self.l2_reread, "dram_tail": self.dram_tail,
                "constants": {key: c.values() for key, c in sorted(self.constants.items())}}
        if self.errors:
            data["errors"] = dict(sorted(self.errors.items()))
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "selector file") -> "Model":
        try:
            data = json.loads(text)
            if data.get("schema") != SCHEMA:
                raise ValueError(f"schema {data.get('schema')!r}, this autokernel reads {SCHEMA}")
            constants = {KernelConfig.model_validate_json(key).to_json(): Constants(*map(float, values))
                         for key, values in data["constants"].items()}
            # g is a fraction of the ceiling the file was fitted with: the same bandwidth under ours.
            scale = float(data.get("l2_bandwidth", LEGACY_L2_BANDWIDTH)) / L2_BANDWIDTH
            if scale != 1.0:
                constants = {key: c if c.g is None else replace(c, g=c.g * scale) for key, c in constants.items()}
            errors = {KernelConfig.model_validate_json(key).to_json(): float(value)
                      for key, value in data.get("errors", {}).items()}
            reread = float(data.get("l2_reread", LEGACY_L2_REREAD))
            if not 0.0 <= reread <= 1.0:
                raise ValueError(f"l2_reread {reread} is not a share between 0 and 1")
            tail = float(data.get("dram_tail", LEGACY_DRAM_TAIL))
            if not 0.0 <= tail <= MAX_DRAM_TAIL:
                raise ValueError(f"dram_tail {tail} is not between 0 and {MAX_DRAM_TAIL:g}")
            return cls(str(data["device"]), int(data["programs"]), constants, errors, l2_reread=reread,
                       dram_tail=tail)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{where} is not a selector file: {str(exc).splitlines()[0]}") from None

    @functools.cached_property
    def _by_tile(self) -> dict[tuple, list[tuple[KernelConfig, Constants]]]:
        out: dict[tuple, list] = {}
        for key, c in self.constants.items():
            config = KernelConfig.model_validate_json(key)
            out.setdefault((kernel_kind(config, True), config.block_m, config.block_n, config.swap_ab),
                           []).append((config, c))
        return out

    def constants_for(self, config: KernelConfig, tma: bool) -> tuple[Constants, KernelConfig] | None:
        """The constants to score ``config`` with, and whose they are: its own where it was
        fitted, else those of the fitted config nearest to it that runs the same kernel
        with the same tile; None where there is none."""
        own = self.constants.get(config_id(config))
        if own is not None and (kernel_kind(config, tma) == kernel_kind(config, True)):
            return own, config
        if tma and _tail_twin(config) and not config.flatten:
            # The candidates run an unflattened stream-K tail only with no whole wave, one
            # chunk a program, where flatten changes nothing: the flattened data-parallel
            # twin's constants, fitted on the candidates' sweeps, describe it (the
            # unflattened twin's came from one sweep and rated the thin tiles 7-22 % slow).
            flat = config.model_copy(update={"stream_k": False, "flatten": True})
            found = self.constants.get(config_id(flat))
            if found is not None:
                return found, flat
        kind = kernel_kind(config, tma)
        same = self._by_tile.get((kind, config.block_m, config.block_n, config.swap_ab and kind == "tma"))
        if not same:
            return None

        def distance(item) -> tuple:
            other = item[0]
            return (other.split_k != config.split_k, abs(math.log2(other.block_k / config.block_k)),
                    other.num_warps != config.num_warps, abs(other.num_stages - config.num_stages),
                    other.tma_options() != config.tma_options(), other.group_m != config.group_m,
                    other.variant != config.variant)

        other, c = min(same, key=distance)
        return c, other


def carried(model: Model, device: str, programs: int, memory_scale: float, compute_scale: float) -> Model:
    """``model`` carried to ``device``, a GPU of the same architecture that no model was fitted
    for: ``programs`` SMs, ``memory_scale`` times the DRAM bandwidth of the GPU the model was
    fitted on, and ``compute_scale`` times its tensor throughput per SM (the clock: a tile's
    time divides by it, and the L2's bandwidth, which runs at that clock, multiplies). The
    fixed costs, the row-major factor, the share of programs side by side and the errors stay as fitted.

    A faster DRAM lifts every config's bandwidth ``e`` by ``memory_scale`` where its grid's reads
    in flight fill the SMs; a grid short of that draws its bytes through the SMs it holds, which
    are the fitted GPU's, and gets the gain in proportion (``dram_gain``, applied in ``choose``):
    on the H200 the unsplit 16x64x128 decode tile reached 1.16x the H100's bandwidth at 33-65
    programs, 1.26x at 66-98, 1.38x at 99-131 and 1.34x from 165 on (docs/selector.md). A slower
    DRAM caps every grid alike."""
    constants = {key: Constants(c.a / compute_scale, c.b / compute_scale, c.e * memory_scale, c.d,
                                None if c.g is None else c.g * compute_scale, c.r, c.s)
                 for key, c in model.constants.items()}
    gain = " (a grid whose reads in flight leave SMs idle: in proportion)" if memory_scale > 1 else ""
    how = (f"fitted on {model.device}, carried to {programs} SMs, {memory_scale:.2f}x its DRAM bandwidth{gain} and "
           f"{compute_scale:.2f}x its throughput per SM")
    return Model(device, programs, constants, dict(model.errors), based_on=how, dram_gain=max(memory_scale, 1.0),
                 l2_reread=model.l2_reread, dram_tail=model.dram_tail)


class _Prepared:
    """A candidate with what scoring it needs that does not depend on the shape: its kernel,
    constants, and its fields as plain numbers (read from the config once:
    a new shape's pick is then arithmetic on locals)."""

    __slots__ = ("config", "key", "kind", "constants", "scored_as", "bm", "bn", "bk", "split", "needs_tma",
                 "stream_k", "sk_tail", "flatten", "thin", "stage_elems", "a", "b", "inv_bandwidth", "d", "inv_l2_bandwidth", "row_factor",
                 "error", "excess_index", "unshared", "per_sm", "swap")

    def __init__(self, config: KernelConfig, key: tuple, kind: str, constants: Constants | None,
                 scored_as: KernelConfig | None):
        self.config, self.key, self.kind = config, key, kind
        self.constants, self.scored_as = constants, scored_as
        self.error: float | None = None  # the constants' RMS log error, where the model holds errors
        self.bm, self.bn, self.bk, self.split = config.block_m, config.block_n, config.block_k, config.split_k
        self.needs_tma, self.stream_k = config.variant == "tma", config.stream_k
        self.sk_tail = config.stream_k and kind == "tma"  # the TMA kernel's stream-K tail
        self.flatten = config.flatten
        self.swap = config.swap_ab and kind == "tma"  # C^T: bm tiles N, bn tiles M
        self.thin = thin_tma(config)
        self.stage_elems = config.num_stages * (config.block_m + config.block_n) * config.block_k
        # Which EPILOGUE_EXCESS_NS applies: 0 (TMA kernel), 1 (pointer kernels) or None.
        full = (config.num_warps == 4 and not config.warp_specialize and config.split_k == 1
                and config.block_m * config.block_n >= 128 * 128)
        self.excess_index = None if not full else 0 if kind == "tma" else 1
        # Constants.s where several programs share an SM (SHARING_KINDS): the round each
        # program beside another does not cost; None where they never do, or unfitted.
        self.unshared = None
        self.per_sm: dict[int, int] = {}  # programs_per_sm by operand itemsize
        if constants is not None:
            if constants.s is not None and kind in SHARING_KINDS:
                self.unshared = 1.0 - constants.s
            self.a, self.b, self.d = constants.a, constants.b, constants.d
            # Constants.predict_us's multipliers, computed alike
            self.inv_bandwidth = 1e6 / (COPY_BANDWIDTH * constants.e)
            self.inv_l2_bandwidth = None if constants.g is None else 1e6 / (L2_BANDWIDTH * constants.g)
            self.row_factor = None if constants.r is None else math.exp(constants.r)

    @classmethod
    def same(cls, other: "_Prepared", config: KernelConfig) -> "_Prepared":
        """``other``'s numbers for ``config``, an equal config object."""
        if other.config is config:
            return other
        new = cls.__new__(cls)
        for name in cls.__slots__:
            if hasattr(other, name):
                setattr(new, name, getattr(other, name))
        new.config = config
        return new


@dataclass(frozen=True)
class Scored:
    """A config the selector considered: where it came from, its predicted µs, whose
    constants scored it, and how far those constants' predictions are off (``error``: the
    RMS log error on the rows they were fitted to; None in a model fitted without errors)."""

    config: KernelConfig
    source: str
    predicted_us: float | None
    scored_as: KernelConfig | None
    error: float | None = None


def close_calls(ranked: tuple[Scored, ...], pick: KernelConfig) -> tuple[int, float] | None:
    """(how many other ranked configs are predicted within the pick's error of its time, that
    error as a fraction), or None where the model holds no errors or the pick has no
    prediction: how much a race of the top configs (tuning on first use) has to settle."""
    mine = next((s for s in ranked if s.config == pick), None)
    if mine is None or mine.predicted_us is None or mine.error is None:
        return None
    band = mine.error
    near = sum(1 for s in ranked if s is not mine and s.predicted_us is not None
               and abs(math.log(s.predicted_us / mine.predicted_us)) <= band)
    return near, math.exp(band) - 1


@dataclass(frozen=True)
class Choice:
    """The selector's answer: the winner, why, and everything it ranked (``ranked``,
    fastest first; built when asked for: the launch path never asks)."""

    config: KernelConfig
    source: str
    reason: str
    scores: tuple[tuple[float | None, _Prepared, str], ...] = field(repr=False)

    @property
    def ranked(self) -> tuple[Scored, ...]:
        order = sorted(self.scores, key=lambda s: (s[0] is None, s[0] or 0.0))
        return tuple(Scored(p.config, source, us, p.scored_as, p.error)
                     for us, p, source in order)


def _fields(config: KernelConfig) -> tuple:
    """A config's field values: a key that compares and hashes far faster than the model."""
    return tuple(config.__dict__.values())


def _prepare(model: Model, config: KernelConfig, tma: bool) -> _Prepared:
    """``config``'s _Prepared numbers under ``model``, made once per config and kernel (none
    depends on the dtype: the dtype enters a prediction through the shape's bytes)."""
    memo = model._prepared
    # The same config object recurs on every shape (candidates, defaults, tuned entries):
    # found by identity first, which costs less than reading its fields.
    found = memo.get((id(config), tma))
    if found is not None and found.config is config:
        return found
    key = _fields(config)
    found = memo.get((key, tma))
    if found is None:
        constants = model.constants_for(config, tma)
        found = _Prepared(config, key, kernel_kind(config, tma), constants[0] if constants else None,
                          constants[1] if constants else None)
        if model.errors:  # the error of the constants that score it; the largest where unknown
            found.error = model.errors.get(config_id(constants[1]) if constants else "", max(model.errors.values()))
        memo[(key, tma)] = found
    memo[(id(config), tma)] = _Prepared.same(found, config)
    return memo[(id(config), tma)]


_CAP = 512
"""Twice the largest tile dimension a config may have (256): a dimension's covering power of
two past it decides no tile rule, so the rules by size class see it as this."""


def _applies_by_class(p: "_Prepared", tma: bool, thin: int, m_cap: int, n_cap: int, k_cap: int, aligned: bool,
                      m: int) -> bool:
    """``_why_not``'s rules that depend only on the problem's size class, on a candidate's
    numbers: the kernel TMA needs, the tile against M, N and K, the thin tiles' rows."""
    if p.swap:  # _why_not's rules on the C^T the kernel tiles: N x M
        return tma and m_cap <= SWAP_AB_MAX_M and p.bn <= m_cap and p.bm <= n_cap and p.bk <= k_cap
    if (p.needs_tma and not tma) or p.bm < thin or p.bn > n_cap or p.bk > k_cap:
        return False
    if p.thin:  # _thin_why_not
        return not ((p.bm > m_cap and aligned) or m > THIN_TMA_MAX_M)
    return p.bm <= m_cap


def b_row_major(layout: str) -> bool:
    """Whether B is stored row-major (K x N, rows along N: layouts "nn" and "tn") rather than
    as a transposed view (nn.Linear's weight, "nt"). The pointer kernels ran 15 % faster
    with it on the H100, the TMA kernel alike either way (docs/selector.md)."""
    return layout[1] == "n"


def rows_aligned(k: int, layout: str) -> bool:
    """False where an operand stores its rows along K (A row-major, or B as a transposed
    view: nn.Linear's weight) and K is not a multiple of 16 elements. The pointer kernels
    then load the K tail masked, without 16-byte vectors: on the H100 they ran at 0.09-0.26x
    cuBLAS on such problems of 568 rows and more (K = 1000), where the TMA kernel ran at
    0.53-0.72x (benchmarks/results/select_resweep_h100.jsonl)."""
    return k % 16 == 0 or not any(_along_k(layout))


def split_rows(m: int, n: int, k: int, itemsize: int, layout: str) -> tuple[bool, bool]:
    """(A, B): whether each operand, stored as ``Problem.make_inputs`` stores it (rows along K
    for A row-major and B as a transposed view, along M and N otherwise), has rows whose
    length is a multiple of 16 bytes but not of 32: they take 16-byte vectors and a TMA
    descriptor, but every other row starts in the middle of a 32-byte sector, so a tile's
    rows of it span one sector more each (K of 1000 or 3000 halves). Their loads then cap a
    tile's K loop (``SPLIT_ROW_BANDWIDTH``). For 16-bit operands only: the cap was measured on
    them, and wider ones take no TMA kernel."""
    if itemsize != 2:
        return False, False
    a_lead = k if layout[0] == "n" else m
    b_lead = k if layout[1] == "t" else n

    def split(lead: int, other: int) -> bool:
        return min(lead, other) > 1 and (lead * itemsize) % 32 == 16

    return split(a_lead, m if layout[0] == "n" else k), split(b_lead, n if layout[1] == "t" else k)


SPLIT_ROW_BANDWIDTH = {"tma": 80e9, "pointer": 40e9}
"""Bytes per second per SM at which a tile's K loop loads operands whose rows split 32-byte
sectors (``split_rows``), on the TMA kernel and on the pointer kernels: a K step then takes at
least its bytes of such operands at this rate, whatever the config's fitted time per step
(``Constants.b``). Fitted on an H200 to 70 drawn problems with K of 8 modulo 16 (every
candidate timed; docs/selector.md, "Rows that split 32-byte sectors"): on the TMA kernel the
time over the aligned model's prediction ran 1.10x on 128x256 tiles, 1.34-1.46x on 128x128,
1.6x on 64x256 and 1.9x on 64x64, which a cap of 80e9 fits within 12 % (RMS log error over 627
config-problem pairs, bias 1.05). The pointer kernels' times scatter far more (their K loops
of 128 ran 4-8x the prediction): 40e9 ranks their decode tiles, the only ones the selector
lets run on such rows (``SPLIT_ROWS_POINTER_MAX_M``)."""


def split_row_floor_us(config: KernelConfig, kind: str, itemsize: int, sectors: tuple[bool, bool]) -> float:
    """The least µs per unit of K a tile of ``config`` (on kernel ``kind``) takes where the
    operands ``sectors`` names (A, B; ``split_rows``) split 32-byte sectors: its rows of
    them at SPLIT_ROW_BANDWIDTH. A tile of C^T (``swap_ab`` on the TMA kernel) reads B's rows
    as its first operand."""
    first, second = (sectors[1], sectors[0]) if config.swap_ab and kind == "tma" else sectors
    per_byte = 1e6 * itemsize / SPLIT_ROW_BANDWIDTH["tma" if kind == "tma" else "pointer"]
    return (config.block_m * first + config.block_n * second) * per_byte


SPLIT_ROW_POINTER_LOADS_MAX = 96
"""The most elements of operands whose rows split 32-byte sectors (``split_rows``), both
together, that a pointer config may load a thread per K step where such rows leave the
pointer kernels among the candidates (``SPLIT_ROWS_POINTER_MAX_M``): on an H200 the tiles
that load 128-144 (64x64x128 and 16x128x128 at 4 warps) ran 4-5x the aligned model's
prediction on such rows, those that load 64-96 (16x64x128, 32x64x128, 64x64x64) 1.2-1.7x."""


SPLIT_ROWS_POINTER_MAX_M = 16
"""The most rows M for which the pointer kernels stay among the candidates where an
operand's rows along K split 32-byte sectors and the TMA kernel can run (``choose``'s
``aligned``): above, only TMA configs are scored (the pointer kernels' K loops of 128 ran
4-8x their aligned prediction there). On an H200 the pointer kernels' decode tiles with
split-K were the fastest config of 14 of 23 such problems of at most 16 rows, up to 3.2x
faster than the thin TMA tile picked without them, and of 1 of 5 at 17-64 rows; on two
fresh draws the pointer tiles picked at 17-39 rows ran 0.54-0.89x as fast as the tiles of C^T
they displaced on three problems, 1.15x on one."""


def _along_k(layout: str) -> tuple[bool, bool]:
    """(A, B): whether each operand stores its rows along K: A row-major ("n"), B as a
    transposed view ("t": nn.Linear's weight)."""
    return layout[0] == "n", layout[1] == "t"


SCALAR_LOADS_MAX = 32
"""The most elements of an operand whose rows along K are not 16-byte aligned that a pointer
config may load per thread and K step (``unvectorized``). Such rows (K of 50257, a GPT-2
vocabulary, in a backward GEMM; any odd K) take no 16-byte vectors and no TMA: every element
is its own load, and configs that load more than this per thread ran at a fifth of the best
(128x128x64 at 4 warps: 0.165 of the best, geomean over 23 problems of odd or
not-8-divisible K on an H200; docs/selector.md, "Operands whose rows take no vectors")."""


def unvectorized(k: int, itemsize: int, layout: str, m: int | None = None) -> tuple[bool, bool]:
    """(A, B): whether each operand stores its rows along K (A row-major, B as a transposed
    view) with a row length that is not a multiple of 16 bytes, so that its rows take no
    16-byte vectors (``SCALAR_LOADS_MAX``). With ``m`` given, A as a transposed view counts
    too where its rows, along M, are such and M >= SCALAR_ROWS_MIN_M."""
    odd = (k * itemsize) % 16 != 0
    a, b = _along_k(layout)
    a_along_m = m is not None and not a and m >= SCALAR_ROWS_MIN_M and (m * itemsize) % 16 != 0
    return (odd and a) or a_along_m, odd and b


SCALAR_ROWS_MIN_M = 1024
"""The fewest rows M for which A as a transposed view with rows along M of no multiple of 16
bytes (dW's dY^T where the layer's outputs are odd: a vocabulary of 30522 or 50257) counts as
``unvectorized``. On two fresh draws of such problems on an H200 the bound moved 12 picks from
1024 rows on, 10 of them 1.2-5.4x faster and 2 0.91-0.92x, and at 87-402 rows 12 picks
0.21-2.5x (docs/selector.md, "A transposed view whose rows take no vectors")."""


SCALAR_SQUARE = KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=8, num_stages=4,
                             variant="grouped")
"""The pointer tile that joins the candidates where both operands' rows take no vectors
(``unvectorized``: B as nn.Linear's weight with an odd K): 32 elements of each operand a
thread per K step, the most MMA work per load within SCALAR_LOADS_MAX. Over 17 such problems
of more than 64 rows on an H200 it reached 0.925 of the best config measured (geomean),
where the one candidate within the bound, 64x64x64 at 4 warps, reached 0.793
(docs/selector.md, "Operands whose rows take no vectors"). Scored with the constants of the
nearest fitted config of its tile (``Model.constants_for``)."""


def _scalar_loads(p: "_Prepared", a_odd: bool, b_odd: bool) -> float:
    """The most elements ``p`` loads a thread per K step of an operand ``unvectorized``
    names (the TMA kernel never runs on such operands)."""
    return max(p.bm * p.bk if a_odd else 0, p.bn * p.bk if b_odd else 0) / (32 * p.config.num_warps)


def choose(model: Model, m: int, n: int, k: int, dtype: torch.dtype, *, tma: bool, default: KernelConfig,
           tuned: tuple[tuple[KernelConfig, str], ...] = (), fits=lambda config: True, fits_key=None,
           margin: float = DEFAULT_MARGIN, z: float = UNCERTAINTY_Z, aligned: bool = True,
           b_rows: bool = False, activation: str = "none", scalar: tuple[bool, bool] = (False, False),
           sectors: tuple[bool, bool] = (False, False)) -> Choice:
    """The config to launch for M x N x K, by the model: the candidates that apply
    (``why_not``), tuned configs of other shapes (``tuned``: (config, where); one with
    ``swap_ab`` only for at most SWAP_AB_MAX_M rows, as the candidates), and the
    default, each scored; those ``fits`` refuses (shared memory, in the launch's mode) are
    left out. The fastest predicted wins, unless it beats the default's prediction by less
    than the two predictions' uncertainty (``UNCERTAINTY_Z``, ``z``; where the model holds
    its errors), else than ``margin``. Where the TMA kernel can run and the operands' rows along K are
    not ``aligned`` (``rows_aligned``), the pointer kernels (the default among them, if
    it is one) are left out while a TMA config the model can score remains, above
    SPLIT_ROWS_POINTER_MAX_M rows. ``sectors``: which operands' rows split 32-byte sectors
    (``split_rows``): each config's K loop then runs no faster than its tile loads those
    operands at SPLIT_ROW_BANDWIDTH. ``scalar``: which
    operands take no 16-byte vectors (``unvectorized``); where one does, the configs that load
    more than SCALAR_LOADS_MAX of its elements a thread per K step are left out (the default
    too: the model's ranking of equals does not hold where each element is a load), or, where
    no config the model can score loads so few (the decode tiles of B as nn.Linear's weight:
    64 and more), all but those that load the fewest. ``b_rows``: B is row-major
    (``b_row_major``). ``activation``: the epilogue's, whose excess where 4 warps hold a
    128x128 tile or larger is added to those configs (``EPILOGUE_EXCESS_NS``).

    ``fits_key``: a hashable that fixes what ``fits`` answers for a config (the dtype and
    the launch's mode); given, the candidates' answers are kept per key, so that a new
    shape costs arithmetic only (tens of µs)."""
    itemsize = dtype.itemsize
    programs = model.programs
    memo = model._prepared
    cache_key = (itemsize, tma, fits_key)
    candidates = memo.get(cache_key) if fits_key is not None else None
    if candidates is None:
        candidates = tuple(_prepare(model, c, tma) for c in CANDIDATES if fits(c))
        if fits_key is not None:
            memo[cache_key] = candidates
    pool: list[tuple[_Prepared, str]] = []
    seen: set[tuple] = set()

    def allowed(p: _Prepared, config: KernelConfig) -> bool:  # fits, kept per fits_key where given
        if fits_key is None:
            return fits(config)
        ok = memo.get(("fits", p.key, fits_key))
        if ok is None:
            ok = memo[("fits", p.key, fits_key)] = bool(fits(config))
        return ok

    for config, source in ((default, "default"), *tuned):
        if config.swap_ab and m > SWAP_AB_MAX_M and source != "default":
            continue  # a tile of C^T tuned for few rows: its constants say nothing of more
        p = _prepare(model, config, tma)
        if p.key not in seen and allowed(p, config):
            seen.add(p.key)
            pool.append((p, source))
    # The candidates that apply: why_not's rules on each candidate's numbers. Those that
    # depend on the problem's size class only (the tile against the next powers of two of
    # M, N and K, which only matter up to twice the largest tile, and M's thinness) are
    # applied once per class and kept; split-K's and stream-K's per problem.
    m_cap, n_cap, k_cap = max(16, _next_pow2(max(m, 1))), max(16, _next_pow2(max(n, 1))), max(16, _next_pow2(max(k, 1)))
    thin = 16 if m <= 64 else 32 if m <= 128 else 64
    class_key = ("class", cache_key, thin, min(m_cap, _CAP), min(n_cap, _CAP), min(k_cap, _CAP), aligned,
                 m > THIN_TMA_MAX_M)
    applying = memo.get(class_key) if fits_key is not None else None
    if applying is None:
        applying = tuple(p for p in candidates if _applies_by_class(p, tma, thin, m_cap, n_cap, k_cap, aligned, m))
        if fits_key is not None:
            memo[class_key] = applying
    cuts: dict[tuple[int, int], tuple[int, int]] = {}  # tail_cut by (tiles, K steps): twins share tiles
    for p in applying:
        if p.key in seen:
            continue
        split = p.split
        if split > 1 and (k // split < 2 * p.bk or -(-m // p.bm) * -(-n // p.bn) >= programs):
            continue
        if p.stream_k:
            tiles = -(-n // p.bm) * -(-m // p.bn) if p.swap else -(-m // p.bm) * -(-n // p.bn)
            if p.sk_tail:
                key = (tiles, -(-k // p.bk))
                sk = cuts.get(key)
                if sk is None:
                    sk = cuts[key] = tail_cut(tiles, programs, key[1])
                if not streamk_applies(m, tiles, programs, sk[0], p.flatten, p.thin):
                    continue
            elif -(-k // p.bk) < 2 or tiles % programs == 0 or tiles < programs:
                continue
        pool.append((p, "candidate"))
    a_split, b_split = sectors
    if (tma and not aligned and m > SPLIT_ROWS_POINTER_MAX_M
            and any(p.kind == "tma" and p.constants is not None for p, _ in pool)):
        pool = [(p, source) for p, source in pool if p.kind == "tma"]
    left_out = ""
    if (a_split or b_split) and any(p.kind != "tma" for p, _ in pool):
        narrow = [(p, source) for p, source in pool
                  if p.kind == "tma" or (p.bm * a_split + p.bn * b_split) * p.bk
                  <= SPLIT_ROW_POINTER_LOADS_MAX * 32 * p.config.num_warps]
        if len(narrow) < len(pool) and any(p.constants is not None for p, _ in narrow):
            left_out = (f"; {len(pool) - len(narrow)} pointer configs left out that load more than "
                        f"{SPLIT_ROW_POINTER_LOADS_MAX} elements a thread per K step of rows that split sectors")
            pool = narrow
    if scalar[0] and scalar[1] and m > 64:
        p = _prepare(model, SCALAR_SQUARE, tma)
        if p.key not in seen and p.constants is not None and allowed(p, SCALAR_SQUARE):
            pool.append((p, "candidate"))
    if scalar[0] or scalar[1]:
        loads = {p.key: _scalar_loads(p, *scalar) for p, _ in pool}
        scored = [loads[p.key] for p, _ in pool if p.constants is not None]
        bound = max(SCALAR_LOADS_MAX, min(scored)) if scored else math.inf
        narrow = [(p, source) for p, source in pool if loads[p.key] <= bound]
        if len(narrow) < len(pool):
            left_out = (f"; {len(pool) - len(narrow)} configs left out that load more than {bound:g} elements a "
                        "thread per K step of an operand whose rows take no 16-byte vectors")
            pool = narrow
    # The predictions: features() and Constants.predict_us written out on each candidate's
    # numbers, operation for operation (the same floats; tests compare the two), and the
    # carried model's DRAM gain by the grid's reach.
    k1 = max(k, 1)
    dram_gain = model.dram_gain
    gain_over = dram_gain - 1.0
    nbytes0 = (m * k + k * n + m * n) * itemsize
    a_reads, b_reads = m * k * itemsize, k * n * itemsize  # _terms's l2_bytes, per operand
    reread = model.l2_reread
    dram_tail = model.dram_tail
    partials = 2 * m * n * 4
    excess = epilogue_excess_us(activation, m, n, programs)  # by kernel: _Prepared.excess_index
    split_load = ({kind: 1e6 * itemsize / bandwidth for kind, bandwidth in SPLIT_ROW_BANDWIDTH.items()}
                  if a_split or b_split else None)
    rows_of: dict[int, int] = {}  # tile rows, columns and K per program by block size: candidates share them
    cols_of: dict[int, int] = {}
    k_per_of: dict[tuple[int, int], float] = {}
    scores = []
    # The first of equal predictions wins: the pool's order (default, tuned, candidates).
    best_us = default_us = best = best_source = at_default = None
    for p, source in pool:
        if p.constants is None:
            scores.append((None, p, source))
            continue
        split, bk, bm, bn = p.split, p.bk, p.bm, p.bn
        first_reads, second_reads = a_reads, b_reads
        if p.swap:  # C^T = B^T A^T: N x M tiles, B read as the first operand
            rows, cols = -(-n // bm), -(-m // bn)
            first_reads, second_reads = b_reads, a_reads
        else:
            rows = rows_of.get(bm)
            if rows is None:
                rows = rows_of[bm] = -(-m // bm)
            cols = cols_of.get(bn)
            if cols is None:
                cols = cols_of[bn] = -(-n // bn)
        units = rows * cols * split
        k_per = k_per_of.get((split, bk))
        if k_per is None:
            k_per = k_per_of[split, bk] = float(-(-(-(-k1 // split)) // bk) * bk)
        k_us = p.b
        if a_split or b_split:  # split_row_floor_us, written out
            first, second = (b_split, a_split) if p.swap else (a_split, b_split)
            k_us = max(k_us, (bm * first + bn * second) * split_load["tma" if p.kind == "tma" else "pointer"])
        tile_us = p.a + k_us * k_per
        # A TMA stream-K config whose tiles leave no tail to cut (a tuned entry or the
        # default: the candidates' rules skip those) runs the plain kernel (plan_matmul_tma).
        cut = False
        if p.sk_tail:
            k_steps = -(-k1 // bk)
            sk = cuts.get((units, k_steps))
            if sk is None:  # a tuned entry or the default: not among the candidates above
                sk = cuts[units, k_steps] = tail_cut(units, programs, k_steps)
            sk_progs, head = sk
            cut = sk_progs != units % programs
        if cut:
            waves = streamk_waves(units, programs, sk_progs, p.a, k_us * k_per, bm, bn, k1, itemsize,
                                  head / k_steps)
        else:
            waves = units / programs if p.stream_k and not p.sk_tail else float(-(-units // programs))
            if p.unshared is not None and units > programs:  # Constants.predict_us's shared programs
                per_sm = p.per_sm.get(itemsize)
                if per_sm is None:
                    per_sm = p.per_sm[itemsize] = programs_per_sm(p.config, dtype, tma=tma)
                waves -= p.unshared * co_resident(units, programs, per_sm)
        compute = waves * tile_us
        # (an int times a float converts the int first: float(x) * y)
        if dram_tail and p.kind == "tma" and not cut and units > programs:  # Model.dram_tail
            memory = nbytes0 * (1.0 + dram_tail * round_idle(units, programs)) * p.inv_bandwidth
        else:
            memory = (nbytes0 + partials * split if split > 1 else nbytes0) * p.inv_bandwidth
        if gain_over and not cut:  # Model.dram_gain: a grid whose reads in flight fall short
            reach = units * p.stage_elems * itemsize / (programs * REACH_BYTES)
            if reach < 1.0:
                memory *= dram_gain / (1.0 + gain_over * reach)
        if p.inv_l2_bandwidth is not None:
            l2_us = ((first_reads * (1.0 + reread * (cols - 1)) + second_reads * (1.0 + reread * (rows - 1)))
                     * p.inv_l2_bandwidth)
            memory = (memory ** MEMORY_P + l2_us ** MEMORY_P) ** _INV_MEMORY_P  # _memory_max
        us = (compute ** SMOOTH_P + memory ** SMOOTH_P) ** _INV_P + p.d  # _smooth_max
        if b_rows and p.row_factor is not None:
            us *= p.row_factor
        if cut:
            us += streamk_fixup_us(sk_progs, bm, bn)
        if excess is not None and p.excess_index is not None:
            us += excess[p.excess_index]
        scores.append((us, p, source))
        if best_us is None or us < best_us:
            best_us, best, best_source = us, p, source
        if source == "default":
            default_us, at_default = us, p
    scores = tuple(scores)
    if best_us is None:
        if not any(source == "default" for _, _, source in scores):
            raise ValueError("no config fits")  # the caller's fit rules shrink the default first
        return Choice(default, "default", "no config could be scored", scores)
    if best_source == "default":
        return Choice(default, "default", "the default is predicted fastest" + left_out, scores)
    if default_us is not None and model.errors:
        need = z * math.sqrt(best.error ** 2 + at_default.error ** 2)
        if math.log(default_us / best_us) <= need:
            return Choice(default, "default", f"the best prediction ({best.config.short()}, {best_us:.1f} µs) beats "
                          f"the default's ({default_us:.1f} µs) by less than the model's uncertainty "
                          f"({math.exp(need) - 1:.0%})" + left_out, scores)
    elif default_us is not None and best_us > default_us * (1 - margin):
        return Choice(default, "default", f"the best prediction ({best.config.short()}) is within "
                      f"{margin:.0%} of the default's" + left_out, scores)
    reason = f"predicted {best_us:.1f} µs" + (f", the default {default_us:.1f} µs" if default_us is not None else "")
    return Choice(best.config, "selected" if best_source == "candidate" else best_source, reason + left_out, scores)


def predict_us(model: Model, config: KernelConfig, m: int, n: int, k: int, dtype: torch.dtype, *, tma: bool,
               layout: str = "nn", activation: str = "none") -> float | None:
    """``model``'s predicted µs of ``config`` on an M x N x K problem in ``layout`` with
    ``activation`` (``choose``'s arithmetic, on that config alone); None where the model
    cannot score it."""
    choice = choose(model, m, n, k, dtype, tma=tma, default=config, fits=lambda c: c is config,
                    aligned=rows_aligned(k, layout), b_rows=b_row_major(layout), activation=activation,
                    scalar=unvectorized(k, dtype.itemsize, layout, m),
                    sectors=split_rows(m, n, k, dtype.itemsize, layout))
    return next((us for us, _, source in choice.scores if source == "default"), None)
