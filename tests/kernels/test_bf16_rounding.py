"""bfloat16 outputs rounded to nearest, ties to even, as the GPU rounds them; under the
interpreter too, whose own cast from float32 truncates (``runtime.round_bfloat16_to_nearest``)."""

import numpy as np
import pytest
import torch

import autokernel as ak
from autokernel import runtime


@pytest.mark.parametrize("layout", ["nn", "nt"])
@pytest.mark.parametrize("bias", [False, True])
def test_bf16_outputs_are_the_exact_sums_rounded_to_nearest_even(layout, bias, device):
    """Small integers sum exactly in float32, so the one rounding is the output's: each
    element must be torch's round-to-nearest-even of the exact sum. Sums past 256 fall
    between bfloat16's neighbours (ties among them), which truncation would round down."""
    g = torch.Generator().manual_seed(11)
    a = torch.randint(-9, 10, (37, 64), generator=g).float()
    b = torch.randint(-9, 10, (64, 29) if layout[1] == "n" else (29, 64), generator=g).float()
    b = b if layout[1] == "n" else b.t()
    bb = torch.randint(-300, 300, (29,), generator=g).bfloat16().float() if bias else None  # exact in bfloat16
    exact = a @ b + (bb if bias else 0)
    assert (exact.abs() > 256).sum() > 100 and torch.equal(exact, exact.round())
    to = dict(device=device, dtype=torch.bfloat16)
    out = ak.matmul(a.to(**to), b.to(**to), bb.to(**to) if bias else None)
    assert torch.equal(out.cpu(), exact.bfloat16())
    assert not torch.equal(exact.bfloat16(), _truncated(exact))  # the test can tell the two apart


def _truncated(x: torch.Tensor) -> torch.Tensor:
    bits = x.float().numpy().view(np.uint32) >> 16
    return torch.from_numpy(bits.astype(np.uint16).view(np.int16).copy()).view(torch.bfloat16)


@pytest.mark.skipif(not runtime.INTERPRETER, reason="the interpreter's cast; the GPU's rounds in hardware")
def test_the_interpreter_cast_rounds_ties_to_even_and_keeps_specials():
    import triton
    import triton.language as tl

    @triton.jit
    def cast(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n).to(tl.bfloat16), mask=offs < n)

    one = 1.0
    values = torch.tensor([one + 2**-8, one + 3 * 2**-8, one + 2**-8 + 2**-20, -(one + 3 * 2**-8), 3.4e38, -3.4e38,
                           float("inf"), float("-inf"), float("nan"), -0.0, 1e-40, 257.0, 259.0, 0.1])
    got = torch.empty(len(values), dtype=torch.bfloat16)
    cast[(1,)](values, got, len(values), BLOCK=16)
    want = values.bfloat16()
    assert torch.equal(got[~values.isnan()], want[~values.isnan()])
    assert got[values.isnan()].isnan().all()
    assert got[0] == 1.0 and got[1] == one + 2**-6 and got[2] == one + 2**-7  # ties to even; above a tie, up
    assert got[4].isinf() and torch.signbit(got[9])
