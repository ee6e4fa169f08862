"""The TMA kernel where C's rows take no descriptor (N not a multiple of 8 halves: GPT-2's
vocabulary of 50257 columns): A and B still move by TMA, C is stored through masked pointer
stores. Against a float64 reference under the interpreter, every epilogue and the stream-K
tail, transposed views, and the rule that sends such problems to the TMA kernel."""

import pytest
import torch

import autokernel as ak
from autokernel import plans, select
from autokernel.config import KernelConfig
from autokernel.evaluate import reference_activation
from autokernel.kernels import matmul_tma
from autokernel.kernels.matmul_tma import TmaLaunch, TmaStreamKLaunch

interpreter_only = pytest.mark.skipif(torch.cuda.is_available() and not plans.runtime.INTERPRETER,
                                      reason="places the tail with a programs count: the interpreter's launch")


def cfg(bm=16, bn=16, bk=16, **extra) -> KernelConfig:
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk, group_m=2, num_warps=1, num_stages=1, variant="tma",
                        **extra)


def operands(m, n, k, layout, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t()  # B's rows along K (nn.Linear's weight): aligned whatever N is
    bias = torch.randn(n, generator=g)
    return (a / k ** 0.5).to(dtype), b.to(dtype), bias.to(dtype)


CONFIGS = {
    "plain": cfg(),
    "flattened, C stored in column halves": cfg(bn=32, flatten=True, epilogue_subtile=2),
    "stream-K tail": cfg(stream_k=True),
    "warp-specialized (descriptors made by the programs)": cfg(warp_specialize=True),
}


@interpreter_only
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("m,n,k,programs", [(48, 61, 272, 5), (40, 37, 512, 3), (8, 77, 96, 4)])
@pytest.mark.parametrize("layout", ["nt", "tt"])
def test_odd_columns_stored_through_pointers_every_epilogue(name, m, n, k, programs, layout):
    a, b, bias = operands(m, n, k, layout, torch.float16, m * 31 + n + len(name))
    act = ["gelu_tanh", "silu", "relu", "leaky_relu", "gelu"][(m + n + len(name)) % 5]
    c = torch.full((m, n), float("nan"), dtype=torch.float16)
    z = torch.full((m, n), float("nan"), dtype=torch.float16)
    ops = matmul_tma.tma_operands(a, b, c)
    assert ops is not None and ops[2] is False  # A and B by descriptors, C through pointers
    config = CONFIGS[name]
    launch = matmul_tma.plan_matmul_tma(a, b, c, bias, act, 0.2, config, ops, True, z=z, programs=programs)
    if not config.warp_specialize:
        assert isinstance(launch, TmaLaunch) and len(launch.specs) == 2
    launch(a, b, c, bias, z)
    if config.stream_k and m == 48:  # 12 tiles on 5 programs: a tail of 2, each in 2 chunks
        assert isinstance(launch, TmaStreamKLaunch)
    z_ref = a.double() @ b.double() + bias.double()
    torch.testing.assert_close(z.double(), z_ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(c.double(), reference_activation(z_ref, act, 0.2), rtol=1e-2, atol=1e-2)


@interpreter_only
def test_bfloat16_without_bias_or_z():
    a, b, _ = operands(33, 53, 200, "nt", torch.bfloat16, 5)
    c = torch.full((33, 53), float("nan"), dtype=torch.bfloat16)
    ops = matmul_tma.tma_operands(a, b, c)
    launch = matmul_tma.plan_matmul_tma(a, b, c, None, "none", 0.0, cfg(), ops, True, programs=3)
    launch(a, b, c, c, c)
    torch.testing.assert_close(c.double(), a.double() @ b.double(), rtol=2e-2, atol=2e-2)


def test_the_rule_keeps_c_s_unit_stride_a_s_and_b_s_descriptors_and_a_long_enough_k():
    a = torch.randn(40, 256, dtype=torch.float16)
    w = torch.randn(45, 256, dtype=torch.float16)
    assert matmul_tma.tma_operands(a, w.t(), torch.empty(40, 45, dtype=torch.float16))[2] is False
    assert matmul_tma.tma_operands(a, w.t(), torch.empty(40, 48, dtype=torch.float16)[:, :45])[2] is True
    assert matmul_tma.tma_operands(a, w.t(), torch.empty(45, 40, dtype=torch.float16).t()) is None  # no unit stride
    assert matmul_tma.tma_operands(a, torch.randn(256, 45, dtype=torch.float16), torch.empty(40, 45)) is None  # B's rows
    # K of fewer than POINTER_C_K_PER_ROW x M steps (and under POINTER_C_MIN_K): the pointer kernels
    tall = torch.randn(65, 256, dtype=torch.float16)
    assert 256 < matmul_tma.POINTER_C_K_PER_ROW * 65
    assert matmul_tma.tma_operands(tall, w.t(), torch.empty(65, 45, dtype=torch.float16)) is None
    assert matmul_tma.tma_operands(tall, w.t(), torch.empty(65, 48, dtype=torch.float16))[2] is True
    # the selector scores the TMA kernel for such problems where B's rows are aligned and K is long enough
    assert select.tma_aligned(2048, 50257, matmul_tma.POINTER_C_MIN_K, torch.float16, "nt")
    assert select.tma_aligned(128, 50257, 768, torch.float16, "nt")  # K >= 4 M
    assert not select.tma_aligned(2048, 50257, 768, torch.float16, "nt")
    assert not select.tma_aligned(2048, 50257, 4096, torch.float16, "nn")


def test_matmul_runs_the_tma_kernel_on_odd_columns(device):
    a, b, bias = operands(24, 45, 96, "nt", torch.float16, 9)
    a, b, bias = a.to(device), b.to(device), bias.to(device)
    plan = plans.gemm_plan(a, b, bias, "silu", 0.01, cfg())
    assert isinstance(plan.launch, TmaLaunch)
    out = ak.matmul(a, b, bias, "silu", config=cfg())
    ref = reference_activation(a.double() @ b.double() + bias.double(), "silu", 0.0)
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2)


def test_an_output_at_a_misaligned_address_is_stored_through_pointers(device):
    a, b, bias = operands(16, 48, 96, "nt", torch.float16, 4)
    a, b, bias = a.to(device), b.to(device), bias.to(device)
    out = torch.full((16 * 48 + 1,), float("nan"), dtype=torch.float16, device=device)[1:].view(16, 48)
    assert out.data_ptr() % 16 != 0
    ops = matmul_tma.tma_operands(a, b, out)
    assert ops is not None and ops[2] is False
    ak.matmul(a, b, bias, "relu", config=cfg(), out=out)
    ref = reference_activation(a.double() @ b.double() + bias.double(), "relu", 0.0)
    torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-2)
