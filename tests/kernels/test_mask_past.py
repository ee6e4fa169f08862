"""The pointer kernels' rows past M and columns past N, masked where the tile is at least four
times the dimension (``kernels.matmul.mask_past``), against a float32 torch reference under the
interpreter: the one-pass, split-K and stream-K kernels, odd shapes, transposed views, an
epilogue, and the plan's switches checked so that the masked loads are the ones that ran.
The rows past M never reach the output: what can go wrong is a mask that drops a row (a
column) within M (N), which these references catch."""

import zlib

import pytest
import torch

from autokernel import api
from autokernel.config import KernelConfig
from autokernel.evaluate import reference
from autokernel.kernels.matmul import mask_past
from autokernel.kernels.splitk import SplitKLaunch
from autokernel.kernels.streamk import plan_matmul_streamk

from tests.helpers import rel_error


def cfg(bm: int = 16, bn: int = 16, **extra) -> KernelConfig:
    return KernelConfig(block_m=bm, block_n=bn, block_k=16, group_m=2, num_warps=1, num_stages=1,
                        variant="grouped", **extra)


def operands(m, n, k, layout, device, dtype=torch.float16):
    g = torch.Generator().manual_seed(zlib.crc32(f"{m}x{n}x{k}{layout}".encode()))
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    bias = torch.randn(n, generator=g)
    return (a / k ** 0.5).to(device, dtype), b.to(device, dtype), bias.to(device, dtype)


def switches(launch) -> tuple[bool, bool]:
    kwargs = (launch.partial if isinstance(launch, SplitKLaunch) else launch).kwargs
    return kwargs["MASK_M"], kwargs["MASK_N"]


@pytest.mark.parametrize("size,block,masked", [(1, 16, True), (4, 16, True), (5, 16, False), (15, 16, False),
                                               (16, 16, False), (8, 32, True), (9, 32, False), (32, 128, True),
                                               (100, 16, False)])
def test_the_rule(size, block, masked):
    assert mask_past(size, block) is masked


# (m, n, k, tile): rows past M masked, columns past N masked, both, neither (the wrap).
SHAPES = [(1, 70, 300, (16, 32)), (3, 45, 129, (16, 16)), (130, 2, 300, (16, 64)), (2, 3, 129, (16, 16)),
          (7, 33, 65, (16, 16))]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s[:3])))
@pytest.mark.parametrize("layout", ["nn", "nt", "tt"])
@pytest.mark.parametrize("split_k", [1, 4])
def test_one_pass_and_split_k(shape, layout, split_k, device):
    check_one_pass_and_split_k(shape, layout, split_k, torch.float16, device)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("split_k", [1, 2])
def test_other_dtypes(dtype, split_k, device):
    check_one_pass_and_split_k((2, 5, 100, (16, 32)), "tn", split_k, dtype, device)


def check_one_pass_and_split_k(shape, layout, split_k, dtype, device):
    m, n, k, (bm, bn) = shape
    a, b, bias = operands(m, n, k, layout, device, dtype)
    config = cfg(bm, bn, split_k=split_k)
    c = torch.full((m, n), float("nan"), dtype=a.dtype, device=device)
    launch = api._plan_kernel(a, b, c, bias, "gelu", 0.01, config, None)
    assert isinstance(launch, SplitKLaunch) == (split_k > 1)
    assert switches(launch) == (4 * m <= bm, 4 * n <= bn)
    launch(a, b, c, bias, c)
    assert not torch.isnan(c).any()
    assert rel_error(c, reference(a, b, bias, "gelu")) < (1.5e-2 if dtype == torch.bfloat16 else 1e-2)


@pytest.mark.parametrize("shape", [(2, 150, 200), (3, 90, 37)])
@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_stream_k(shape, layout, device):
    m, n, k = shape
    a, b, bias = operands(m, n, k, layout, device)
    c = torch.full((m, n), float("nan"), dtype=a.dtype, device=device)
    launch = plan_matmul_streamk(a, b, c, bias, "silu", 0.01, cfg(16, 16, stream_k=True), True, programs=4)
    assert launch.sk_tiles > 0
    assert launch.kernel.kwargs["MASK_M"] and not launch.kernel.kwargs["MASK_N"]
    launch(a, b, c, bias, c)
    assert not torch.isnan(c).any()
    assert rel_error(c, reference(a, b, bias, "silu")) < 1e-2
