"""The TMA kernel computing C^T = B^T A^T (``swap_ab``): tiles of N by M, the bias along the
tile's rows, Z's strides swapped and each tile stored transposed into C; with a stream-K tail
and its fix-up too. Against a float64 torch reference under the interpreter, on odd shapes,
every layout and every epilogue; and where the selector, the tuner's space and explain
count its tiles along N first."""

import zlib

import pytest
import torch

import autokernel as ak
from autokernel import best, knobs, plans, select
from autokernel.candidates import CANDIDATES, SWAPPED
from autokernel.config import ConfigError, KernelConfig
from autokernel.evaluate import reference_activation
from autokernel.kernels.matmul_tma import TmaLaunch, TmaStreamKLaunch, tail_cut
from autokernel.records import Problem
from autokernel.tuning.space import SearchSpace
from tests.helpers import run_tma as run
from tests.helpers import tma_case_operands as operands

interpreter_only = pytest.mark.skipif(torch.cuda.is_available() and not plans.runtime.INTERPRETER,
                                      reason="places the tiles with a programs count: the interpreter's launch")


def cfg(bm=32, bn=16, bk=16, **extra) -> KernelConfig:
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=2, num_warps=1, num_stages=1, variant="tma",
                        swap_ab=True, **extra)


ACTS = ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]
# (m, n, k, programs, stream_k): with 32x16 tiles of C^T (32 of N, 16 of M) and 16-wide K steps
CASES = {
    "one tile of M, N not a multiple": (13, 72, 96, 3, False),
    "M over two tiles, its last ending at M": (20, 200, 96, 4, False),
    "M past a tile, N past a tile": (33, 40, 200, 4, False),
    "a stream-K tail cut in chunks": (40, 56, 640, 5, True),
    "a stream-K tail over every program": (24, 48, 512, 5, True),
}


@interpreter_only
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
def test_tiles_of_c_transposed_odd_shapes_every_layout_and_epilogue(case, layout):
    m, n, k, programs, stream_k = CASES[case]
    if layout[0] == "t":  # A as a transposed view: its rows (along M) need 16 bytes for a descriptor
        m = -(-m // 8) * 8
    seed = zlib.crc32(f"{case}{layout}".encode())
    a, b, bias = operands(m, n, k, layout, torch.float16, seed)
    act = ACTS[seed % len(ACTS)]
    z = torch.full((m, n), float("nan"), dtype=torch.float16)
    c, launch = run(a, b, bias, act, cfg(stream_k=stream_k), programs, z=z)
    tiles = -(-n // 32) * -(-m // 16)  # the kernel's tiles: N by block_m, M by block_n
    split = stream_k and tail_cut(tiles, programs, -(-k // 16))[0] > tiles % programs
    assert isinstance(launch, TmaStreamKLaunch) == split and launch.swap
    z_ref = a.double() @ b.double() + bias.double()
    c_ref = reference_activation(z_ref, act, 0.2)
    assert not torch.isnan(c).any() and not torch.isnan(z).any()
    torch.testing.assert_close(z.double(), z_ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(c.double(), c_ref, rtol=2e-2, atol=2e-2)


@interpreter_only
def test_bfloat16_a_halved_epilogue_and_no_bias():
    a, b, _ = operands(24, 96, 160, "nt", torch.bfloat16, 7)
    c, launch = run(a, b, None, "silu", cfg(bm=32, bn=16, epilogue_subtile=2), 3)
    ref = reference_activation(a.double() @ b.double(), "silu", 0.0)
    assert launch.swap and launch.specs[2][2] == [8, 32]  # C's block: the transposed tile's half
    torch.testing.assert_close(c.double(), ref, rtol=3e-2, atol=3e-2)


@interpreter_only
def test_c_without_a_descriptor_runs_unswapped():
    # N = 50 halves: C's rows are no multiple of 16 bytes, and the long K lets the TMA kernel
    # store C through pointers; the tiles of C^T need C's descriptor, so the plain tiles run.
    a, b, bias = operands(20, 50, 4096, "nt", torch.float16, 3)
    c, launch = run(a, b, bias, "relu", cfg(bk=256), 2)
    assert isinstance(launch, TmaLaunch) and not launch.swap and len(launch.specs) == 2
    ref = reference_activation(a.double() @ b.double() + bias.double(), "relu", 0.2)
    torch.testing.assert_close(c.double(), ref, rtol=2e-2, atol=2e-2)


@interpreter_only
def test_matmul_and_linear_backward_with_a_swapped_config():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(21, 48, generator=g).half().requires_grad_(True)
    w = (torch.randn(40, 48, generator=g) / 7).half().requires_grad_(True)
    bias = torch.randn(40, generator=g).half().requires_grad_(True)
    config = cfg()
    y = ak.linear(x, w, bias, "gelu_tanh", config=config)
    dy = torch.randn(y.shape, generator=g).half()
    y.backward(dy)
    xr, wr, br = (t.detach().double().requires_grad_(True) for t in (x, w, bias))
    yr = torch.nn.functional.gelu(xr @ wr.t() + br, approximate="tanh")
    yr.backward(dy.double())
    for got, want in ((y, yr), (x.grad, xr.grad), (w.grad, wr.grad), (bias.grad, br.grad)):
        torch.testing.assert_close(got.double(), want.detach(), rtol=3e-2, atol=3e-2)
    with torch.no_grad():
        out = ak.matmul(x, w.t(), config=config)
    torch.testing.assert_close(out.double(), (x.double() @ w.double().t()), rtol=2e-2, atol=2e-2)


def test_swap_ab_is_an_option_of_the_tma_kernel_alone():
    assert "swap_ab" in knobs.TMA_OPTIONS and KernelConfig(variant="tma", swap_ab=True).short().endswith(" sw")
    with pytest.raises(ConfigError, match="swap_ab"):
        KernelConfig(variant="grouped", swap_ab=True)
    with pytest.raises(ConfigError, match="swap_ab has no warp-specialized kernel"):
        KernelConfig(variant="tma", num_warps=4, swap_ab=True, warp_specialize=True)
    assert KernelConfig(variant="tma", swap_ab=True).on_variant("grouped").swap_ab is False


def test_the_selector_counts_tiles_of_c_transposed_along_n_first():
    swapped = SWAPPED[0]
    plain = swapped.model_copy(update={"swap_ab": False})
    for m, n, k in ((20, 4096, 4096), (40, 1000, 8192), (64, 28672, 1536)):
        assert select.features(swapped, m, n, k, torch.bfloat16, True, 132, 0.5, 0.5) == \
            select.features(plain, n, m, k, torch.bfloat16, True, 132, 0.5, 0.5)
    # considered from 17 rows (a 32-wide tile of M) to SWAP_AB_MAX_M, with N as its tile's rows
    assert select.why_not(swapped, 17, 4096, 4096, True, 132) is None
    assert select.why_not(swapped, knobs.SWAP_AB_MAX_M, 4096, 4096, True, 132) is None
    assert select.why_not(swapped, 20, 64, 4096, True, 132) == "block_m=128 exceeds N=64"
    assert "M <= 64" in select.why_not(swapped, knobs.SWAP_AB_MAX_M + 1, 4096, 4096, True, 132)
    assert "block_n=32 exceeds M=8" in select.why_not(swapped, 8, 4096, 4096, True, 132)
    assert "no TMA" in select.why_not(swapped, 20, 4096, 4096, False, 132)
    assert all(c in CANDIDATES for c in SWAPPED)


def test_the_shipped_h200_model_picks_them_for_few_rows_against_a_wide_weight():
    model = select.Model.from_json((best.SHIPPED_DIR / "selector" / "nvidia-h200.json").read_text())
    default = KernelConfig(block_m=32, block_n=64, block_k=128, num_warps=4, num_stages=4, variant="grouped")
    few = select.choose(model, 20, 14336, 4096, torch.bfloat16, tma=True, default=default)
    assert few.config.swap_ab and few.source == "selected"
    more = select.choose(model, 200, 14336, 4096, torch.bfloat16, tma=True, default=default)
    assert not more.config.swap_ab and all(not s.config.swap_ab for s in more.ranked)


def test_the_space_tries_them_for_few_rows_and_names_the_dimensions_they_tile():
    space = SearchSpace(Problem(20, 4096, 1024), tma=True)
    swapped = KernelConfig(block_m=128, block_n=32, block_k=64, num_warps=4, num_stages=3, variant="tma",
                           swap_ab=True)
    assert space.why_invalid(swapped) is None
    assert "M <= 64" in SearchSpace(Problem(100, 4096, 1024), tma=True).why_invalid(swapped)
    wide = swapped.model_copy(update={"block_n": 128})
    assert space.why_invalid(wide) == "block_n=128 exceeds the problem's M=20"
