"""The TMA kernel's stream-K tail (kernels/matmul_tma.py: whole waves data-parallel, the
tail's K steps shared, a fix-up summing the partials) against a float64 torch reference,
under the interpreter, where ``programs`` stands in for the GPU's SM count."""

import zlib

import pytest
import torch

import autokernel as ak
from autokernel import plans
from autokernel.config import KernelConfig
from autokernel.evaluate import reference_activation
from autokernel.kernels import matmul_tma
from autokernel.kernels.matmul_tma import (HEAD_AND_TAILS_MAX_ROUNDS, HEADS_MAX, MIN_CHUNK_STEPS, SK_SPLIT,
                                           TmaLaunch, TmaStreamKLaunch, sk_heads, sk_programs, tail_cut)
from tests.helpers import run_tma as run
from tests.helpers import tma_case_operands as operands

pytestmark = pytest.mark.skipif(torch.cuda.is_available() and not plans.runtime.INTERPRETER,
                                reason="places the tail with a programs count: the interpreter's launch")


def cfg(bm=16, bn=16, bk=16, **extra) -> KernelConfig:
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=2, num_warps=1, num_stages=1, variant="tma",
                        stream_k=True, **extra)


# (m, n, k, programs) with 16x16 tiles and 16-wide K steps:
CASES = {
    "a full wave and a tail of 2": (48, 64, 272, 5),  # 12 tiles: 10 whole, 2 in 2 chunks (8 and 9 steps)
    "fewer tiles than programs": (32, 16, 256, 5),  # 2 tiles, each in 2 chunks
    "one tail tile, K not a multiple": (48, 16, 264, 2),  # 3 tiles: 2 whole, 1 in 2 chunks; K's last step 8 wide
    "uneven chunks": (40, 48, 600, 4),  # 9 tiles, 1 in the tail: 38 steps in 4 chunks
    "eight chunks": (160, 16, 1024, 9),  # 10 tiles, 1 in the tail in 8 chunks of 8 steps
    "a tail over 10 programs": (64, 64, 320, 11),  # 16 tiles: 11 whole, 5 in 2 chunks of 10 steps
    "M and N not multiples of the tile": (40, 56, 200, 4),  # 12 tiles: 3 waves, no tail: the plain kernel
    "chunks too short to cut": (48, 64, 160, 5),  # a tail of 2, 10 steps: the plain kernel
    "a tail of more than half the programs": (32, 64, 480, 5),  # 8 tiles: 5 whole, 3 in a head of 20 steps
    # and a tail of 10, two programs running the tails (two rounds)
    "heads and three rounds of tails": (48, 16, 632, 4),  # 3 tiles on 4 programs: heads of 30 steps, tails of 10
    "tails too short to cut": (32, 64, 320, 5),  # a tail of 3, 20 steps: tails of 7: the plain kernel
    "two heads and a tail": (112, 16, 1512, 5),  # 7 tiles: 5 whole, 2 in two heads of 38 steps and a tail of 19
    # the last row and column of tiles 8 wide, in the tail: its tiles and the whole ones share an edge
    "partial edge tiles in the tail": (40, 40, 512, 7),  # 9 tiles: 7 whole, (2, 1) and (2, 2) in 3 chunks
    "partial edge tiles in heads and tails": (40, 40, 640, 5),  # 9 tiles: 5 whole, 4 in a head of 32 and a tail of 8
}
PLAIN = ("M and N not multiples of the tile", "chunks too short to cut", "tails too short to cut")


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["nn", "tt", "nt"])
def test_tails_odd_shapes_transposed_views_every_epilogue(case, layout):
    m, n, k, programs = CASES[case]
    seed = zlib.crc32(f"{case}{layout}".encode())
    a, b, bias = operands(m, n, k, layout, torch.float16, seed)
    acts = ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]
    act = acts[seed % len(acts)]
    z = torch.full((m, n), float("nan"), dtype=torch.float16)
    c, launch = run(a, b, bias, act, cfg(), programs, z=z)
    tiles = -(-m // 16) * -(-n // 16)
    split = tail_cut(tiles, programs, -(-k // 16))[0] > tiles % programs
    assert isinstance(launch, TmaStreamKLaunch) == split and isinstance(launch, TmaLaunch)
    assert split == (case not in PLAIN)
    z_ref = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(z.double(), z_ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(c.double(), reference_activation(z_ref, act, 0.2), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("piece", [(8, 8), (16, 8), (8, 16)])
@pytest.mark.parametrize("case", ["a full wave and a tail of 2", "fewer tiles than programs", "uneven chunks"])
def test_the_fixup_sums_a_tile_in_pieces(case, piece, monkeypatch):
    """The fix-up's programs each take a piece of a tail tile (``FIXUP_PIECE``): with pieces
    smaller than the 16x16 tiles, every piece of every tail tile is summed and stored once,
    with the epilogue's bias, Z and activation."""
    monkeypatch.setattr(matmul_tma, "FIXUP_PIECE", piece)
    m, n, k, programs = CASES[case]
    a, b, bias = operands(m, n, k, "nt", torch.float16, zlib.crc32(f"{case}{piece}".encode()))
    z = torch.full((m, n), float("nan"), dtype=torch.float16)
    c, launch = run(a, b, bias, "gelu_tanh", cfg(), programs, z=z)
    assert isinstance(launch, TmaStreamKLaunch)
    tail = (-(-m // 16) * -(-n // 16)) % programs
    assert launch.fixup.grid[0] == tail * (16 // piece[0]) * (16 // piece[1])
    z_ref = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(z.double(), z_ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(c.double(), reference_activation(z_ref, "gelu_tanh", 0.2), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("extra", [dict(epilogue_subtile=2), dict(flatten=True), dict(bm=32, bn=32, bk=32)])
def test_tma_options_and_bf16(extra):
    m, n, k = 72, 96, 800
    a, b, bias = operands(m, n, k, "nt", torch.bfloat16, 7)
    shape = {key: extra.pop(key) for key in ("bm", "bn", "bk") if key in extra}
    c, launch = run(a, b, None, "silu", cfg(**shape, **extra), programs=7)
    assert isinstance(launch, TmaStreamKLaunch)
    ref = reference_activation(a.double() @ b.double(), "silu")
    torch.testing.assert_close(c.double(), ref, rtol=2e-2, atol=2e-2)


def test_the_sum_is_the_same_every_launch():
    a, b, bias = operands(48, 64, 272, "nn", torch.float16, 3)
    first, launch = run(a, b, bias, "gelu", cfg(), 5)
    again, _ = run(a, b, bias, "gelu", cfg(), 5)
    assert isinstance(launch, TmaStreamKLaunch)
    assert torch.equal(first, again)


def test_chunks_cover_each_tail_tile_once():
    """The split the kernels compute, in Python: a whole number of chunks per tail tile, at
    most SK_SPLIT, at least MIN_CHUNK_STEPS steps each (or one chunk), on no more programs
    than the grid has; the chunks' K ranges cover every step once."""
    for tiles in range(1, 300, 7):
        for programs in (3, 5, 132):
            tail = tiles % programs
            for k_tiles in (2, 3, 16, 30, 444):
                progs = sk_programs(tiles, programs, k_tiles)
                if not tail:
                    assert progs == 0
                    continue
                chunks = progs // tail
                assert progs % tail == 0 and 1 <= chunks <= SK_SPLIT and progs <= programs
                assert chunks == 1 or k_tiles // chunks >= MIN_CHUNK_STEPS
                steps = sorted(s for c in range(chunks) for s in range(c * k_tiles // chunks, (c + 1) * k_tiles // chunks))
                assert steps == list(range(k_tiles))


def test_heads_and_tails_cover_each_tail_tile_once():
    """Where equal chunks would leave programs idle, the kernel's assignment in Python:
    program p < q * tail runs head p // tail of tile p % tail, the others the tails in
    rounds; every step of every tail tile runs once, at most HEADS_MAX heads and
    HEAD_AND_TAILS_MAX_ROUNDS tails to a program, each piece at least MIN_CHUNK_STEPS steps,
    and the longest program shorter than equal chunks would make it (else: equal chunks)."""
    cut = {1: 0, 2: 0}
    for programs in (3, 5, 7, 9, 132):
        for tail in range(1, programs):
            for k_tiles in (8, 20, 24, 30, 100, 160, 444):
                partials, head = tail_cut(programs + tail, programs, k_tiles)
                heads = sk_heads(programs + tail, programs, k_tiles)[0]
                if not head:
                    assert partials == sk_programs(programs + tail, programs, k_tiles)
                    continue
                cut[heads] += 1
                helpers = programs - heads * tail
                rounds = -(-tail // helpers)
                assert partials == (heads + 1) * tail and heads <= HEADS_MAX and rounds <= HEAD_AND_TAILS_MAX_ROUNDS
                assert k_tiles - heads * head >= MIN_CHUNK_STEPS
                runs = [(p % tail, p // tail * head, (p // tail + 1) * head) for p in range(heads * tail)]
                runs += [(q + j * helpers, heads * head, k_tiles) for q in range(helpers) for j in range(rounds)
                         if q + j * helpers < tail]
                for t in range(tail):
                    steps = sorted(s for tile, lo, hi in runs if tile == t for s in range(lo, hi))
                    assert steps == list(range(k_tiles)), (programs, tail, k_tiles)
                assert rounds * (k_tiles - heads * head) <= head <= k_tiles // heads - MIN_CHUNK_STEPS, (programs, tail, k_tiles)
    assert cut[1] > 20 and cut[2] > 5, cut


def test_matmul_takes_the_tail_where_the_config_asks_and_the_pointer_kernel_elsewhere(monkeypatch):
    a, b, bias = operands(32, 32, 600, "nn", torch.float16, 11)  # 4 tiles on 3 programs: a tail of 1
    c = torch.empty(32, 32, dtype=torch.float16)
    assert isinstance(plans._plan_kernel(a, b, c, bias, "relu", 0.01, cfg(), None), TmaStreamKLaunch)
    out = ak.matmul(a, b, bias, "relu", config=cfg())
    torch.testing.assert_close(out.double(), torch.relu(a.double() @ b.double() + bias.double()), rtol=1e-2,
                               atol=1e-2)
    a32, b32 = a.float(), b.float()  # no TMA for float32: the pointer stream-K kernel
    c = torch.empty(32, 32)
    assert type(plans._plan_kernel(a32, b32, c, None, "none", 0.01, cfg(), None)).__name__ == "StreamKLaunch"


def test_config_rules():
    with pytest.raises(ValueError, match="stream_k has no warp-specialized kernel"):
        KernelConfig(block_m=128, block_n=128, block_k=64, group_m=8, num_warps=4, num_stages=3, variant="tma",
                     stream_k=True, warp_specialize=True)
    assert cfg(flatten=True).short().endswith("tma fl sk")
    assert cfg(epilogue_subtile=2).epilogue_subtile == 2
