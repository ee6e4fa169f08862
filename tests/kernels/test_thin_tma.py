"""The memory-bound TMA tiles of thin problems (``candidates.THIN_TMA``): 64-row tiles with
K steps of 128 on problems of fewer rows than the tile, against a float64 reference under
the interpreter (rows past M come in as zeros and are clipped on store), and the rule that
confines them to thin problems."""

import pytest
import torch

from autokernel import plans, select
from autokernel.candidates import CANDIDATES, THIN_TMA, THIN_TMA_MAX_M, thin_tma
from autokernel.evaluate import reference_activation
from autokernel.kernels import matmul_tma
from autokernel.kernels.matmul_tma import TmaStreamKLaunch, sk_programs

interpreter_only = pytest.mark.skipif(torch.cuda.is_available() and not plans.runtime.INTERPRETER,
                                      reason="places the tail with a programs count: the interpreter's launch")


def operands(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g) / k ** 0.5
    weight = torch.randn(n, k, generator=g)  # nn.Linear's weight: B is its transposed view
    return a.half(), weight.half().t(), torch.randn(n, generator=g).half()


@interpreter_only
@pytest.mark.parametrize("config", THIN_TMA, ids=lambda c: c.short())
@pytest.mark.parametrize("m,n,k,programs", [(1, 200, 384, 4), (5, 96, 1000, 4), (37, 160, 2048, 9), (100, 120, 2176, 9),
                                            (200, 56, 2176, 9)])
def test_thin_problems_in_64_row_tiles_every_epilogue(config, m, n, k, programs):
    a, b, bias = operands(m, n, k, m * 7 + n)
    act = ["gelu_tanh", "silu", "relu"][m % 3]
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    z = torch.full((m, n), float("nan"), dtype=torch.float16)
    ops = matmul_tma.tma_operands(a, b, c)
    assert ops is not None and ops[1][1]  # B read through a descriptor over the weight's rows
    launch = matmul_tma.plan_matmul_tma(a, b, c, bias, act, 0.0, config, ops, True, z=z, programs=programs)
    launch(a, b, c, bias, z)
    if config.stream_k and m > 64:  # 2 to 4 tiles on 9 programs, 17 K steps: each tile cut in 2 chunks
        assert isinstance(launch, TmaStreamKLaunch)
        assert sk_programs(-(-m // 64) * -(-n // config.block_n), programs, 17) > 2
    z_ref = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(z.double(), z_ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(c.double(), reference_activation(z_ref, act, 0.0), rtol=1e-2, atol=1e-2)


def test_thin_tiles_are_candidates_for_thin_problems_only():
    assert all(c in CANDIDATES for c in THIN_TMA)
    plain = [c for c in THIN_TMA if not c.stream_k]
    for m in (33, 64, 100, THIN_TMA_MAX_M):
        assert all(select.why_not(c, m, 8192, 4096, True, 132) is None for c in plain), m
    for m in (THIN_TMA_MAX_M + 1, 4096):
        for c in THIN_TMA:
            assert "thin problems" in select.why_not(c, m, 8192, 4096, True, 132), (m, c.short())
    # 64-row tiles on 32 rows or fewer compute mostly padding: left to the pointer kernels' thin tiles,
    # unless those would load a masked K tail (rows along K not 16-aligned: K = 1000)
    assert all(select.why_not(c, 32, 8192, 4096, True, 132) for c in THIN_TMA)
    assert all(select.why_not(c, 32, 8192, 1000, True, 132) for c in THIN_TMA)
    for m in (1, 7, 32):
        assert all(select.why_not(c, m, 8192, 1000, True, 132, aligned=False) is None for c in plain), m
        assert all("stream-K" in select.why_not(c, m, 8192, 1000, True, 132, aligned=False)
                   for c in THIN_TMA if c.stream_k), m
    assert all(select.why_not(c, 8, 8192, 1000, False, 132, aligned=False) for c in THIN_TMA)  # no descriptor
    # the stream-K twins where the tiles are fewer than the SMs, from STREAMK_FEW_MIN_M rows
    twins = [c for c in THIN_TMA if c.stream_k]
    assert select.STREAMK_FEW_MIN_M == 33
    for m in (33, 60, 100):
        assert all(select.why_not(c, m, 2048, 8192, True, 132) is None for c in twins), m
    assert all(select.why_not(c, 32, 2048, 8192, True, 132) for c in twins)
    # after whole waves the flattened thin twin only from THIN_TAIL_MIN_M rows
    flat = [c for c in twins if c.flatten]
    assert flat and all(select.why_not(c, 65, 20000, 8192, True, 132) is None for c in flat)
    assert all("stream-K" in select.why_not(c, 64, 20000, 8192, True, 132) for c in flat)


def test_the_pick_takes_a_thin_tile_where_the_pointer_kernels_would_load_a_masked_k_tail():
    from autokernel import best

    h100 = "NVIDIA H100 80GB HBM3"
    for m in (1, 5, 24):
        unaligned = best.pick(m, 1664, 1000, torch.float16, "none", False, "nt", device=h100)
        assert thin_tma(unaligned.choice.config), (m, unaligned.choice.config.short())
        aligned = best.pick(m, 1664, 1024, torch.float16, "none", False, "nt", device=h100)
        assert aligned.choice.config.variant != "tma", (m, aligned.choice.config.short())
    # past 128 rows the model scores them beside every other candidate
    scored = best.pick(231, 3840, 3712, torch.float16, "none", False, "nt", device=h100, rank=True)
    assert any(thin_tma(p.config) for us, p, _ in scored.choice.scores if us is not None)


def test_the_flattened_thin_twin_cuts_a_skinny_tail_after_whole_waves():
    """After whole waves a skinny problem (65-256 rows) may take a stream-K tail only on the
    thin 64-row tile's flattened twin: 149x13824x18944 makes 324 such tiles, a tail of 60
    (on the H200 its tail ran 1.13x the data-parallel tile there), while the 128-row twins and
    the unflattened thin twin stay data-parallel there, and a decode problem takes none."""
    flat = [c for c in THIN_TMA if c.stream_k and c.flatten]
    assert len(flat) == 1 and flat[0].block_m == 64
    twin = flat[0]
    for m in (65, 149, 256):
        assert select.why_not(twin, m, 13824, 18944, True, 132) is None, m
    assert "stream-K" in select.why_not(twin, 60, 13824, 18944, True, 132)  # decode: not measured
    others = [c for c in CANDIDATES if c.stream_k and c.variant == "tma" and c != twin]
    for c in others:
        if -(-149 // c.block_m) * -(-13824 // c.block_n) > 132:
            assert "stream-K" in select.why_not(c, 149, 13824, 18944, True, 132), c.short()
    assert select.streamk_applies(149, 324, 132, 240, True, thin=True)
    assert not select.streamk_applies(149, 324, 132, 240, True)
    assert not select.streamk_applies(149, 324, 132, 240, False, thin=True)


def test_the_shipped_models_take_the_thin_tail_for_a_long_k_only():
    """Scored with the flattened tile's constants and the tail's model (fix-up included), the
    cut pays where K is long (measured on the H200: 1.13x at K = 18944) and not where it is
    short (229x4608x2176: the twin ran 0.90x its tile)."""
    from autokernel import best

    for device in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
        long_k = best.pick(149, 13824, 18944, torch.bfloat16, "none", False, "nt", device=device)
        assert long_k.choice.config.stream_k and thin_tma(long_k.choice.config), device
        short_k = best.pick(229, 4608, 2176, torch.bfloat16, "none", False, "nt", device=device)
        assert not short_k.choice.config.stream_k, device
