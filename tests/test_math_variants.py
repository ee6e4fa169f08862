"""The internal spellings of gelu_tanh and silu (epilogue.MATH_VARIANTS): refused by the
public API; under the interpreter, where their PTX instructions fall back to the exact
formulas, equal to the public activation (their polynomial exp2 and Newton reciprocal
run as written there, so this checks those too). Their hardware error is measured on the
GPU by scripts/epilogue_math.py; tests/compile_sm90.py compiles them for sm_90."""

import pytest
import torch

import autokernel as ak
from autokernel import api, runtime
from autokernel.config import KernelConfig
from autokernel.evaluate import reference
from autokernel.kernels.epilogue import ACTIVATIONS, MATH_VARIANTS

from conftest import inputs

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # exp(-x) -> inf: sigmoid 0
VARIANTS = [(base, name) for base, names in MATH_VARIANTS.items() for name in names]
GROUPED = KernelConfig(block_m=32, block_n=32, block_k=32, group_m=2, num_warps=4, num_stages=1, variant="grouped")
TMA = KernelConfig(block_m=32, block_n=32, block_k=32, group_m=2, num_warps=4, num_stages=1, variant="tma")


def test_variants_are_internal():
    names = [name for _, name in VARIANTS]
    assert len(names) == 10 and len(set(names)) == 10
    assert not set(names) & set(ACTIVATIONS)


@pytest.mark.parametrize("name", ["gelu_tanh_mufu1", "silu_poly", "GELU-TANH-NEWTON"])
def test_public_api_refuses_variants(name, device):
    a = torch.ones(4, 4, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="activation must be one of .*got '" + name):
        ak.matmul(a, a, activation=name)
    with pytest.raises(ValueError, match="activation must be one of"):
        ak.linear(a, a, activation=name)
    with pytest.raises(ValueError, match="activation must be one of"):
        ak.nn.Linear(4, 4, activation=name)


def _preactivations(lo: float, hi: float, n: int = 64) -> torch.Tensor:
    """[m, n] float32 values from lo to hi (and -0, 0 and extremes), m a multiple of 32."""
    z = torch.cat([torch.linspace(lo, hi, 32 * n - 8),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e4, -1e4, 200.0, -200.0])])
    return z.reshape(-1, n)


def _through_gemm(z: torch.Tensor, act: str, config: KernelConfig) -> torch.Tensor:
    """act(z @ I) by the kernel, in float32: the interpreter's fp32 dot is exact."""
    device = runtime.kernel_device()
    z = z.to(device)
    eye = torch.eye(z.shape[1], device=device)
    out = torch.full(z.shape, float("nan"), device=device)
    api.launch(z, eye, out, None, act, 0.01, config)
    return out.cpu()


def _exact(z: torch.Tensor, base: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(the activation in float64 as z * sigmoid(x), x): torch's gelu, 0.5 z (1 + tanh(u)),
    cancels to 0 in the negative tail even in float64."""
    z = z.double()
    x = 2 * 0.7978845608028654 * (z + 0.044715 * z ** 3) if base == "gelu_tanh" else z
    return z * torch.sigmoid(x), x


@pytest.mark.skipif(not runtime.INTERPRETER, reason="the hardware error is the GPU script's to measure")
@pytest.mark.parametrize("config", [GROUPED, TMA], ids=["grouped", "tma"])
@pytest.mark.parametrize("base,name", VARIANTS)
def test_fallback_equals_public_activation(base, name, config):
    """On [-20, 20] and extremes, each variant is within float32 rounding (mufu*) or the
    polynomial's and Newton's ~1e-5 (newton, poly*) of the exact activation, relative
    to the value for z * sigmoid spellings (no cancellation in either tail), and matches
    the public spelling."""
    z = _preactivations(-20.0, 20.0)
    got, public = _through_gemm(z, name, config), _through_gemm(z, base, config)
    ref, x = _exact(z, base)
    assert torch.isfinite(got).all()
    err = (got.double() - ref).abs()
    # exp(-x) carries x's float32 rounding as a relative error of |x| 2^-24: hence 1 + |x|.
    rtol = (2e-5 if name.endswith(("newton", "poly", "poly0")) else 1e-6) * (1 + x.abs())
    if name.endswith("mufu1"):  # 0.5 z (1 + tanh u): absolute error where tanh -> -1
        bound = rtol * ref.abs() + 4e-6 * z.double().abs()
    else:
        bound = rtol * ref.abs() + 2.0 ** -124 * z.double().abs()  # newton, poly*: 2^x <= 2^125
    assert (err <= bound).all(), (z[err > bound][:5], got[err > bound][:5], ref[err > bound][:5])
    atol = 4e-6 * z.abs() if name.endswith("mufu1") else 1e-6
    assert ((got - public).abs() <= 2e-5 * public.abs() + atol).all()


@pytest.mark.skipif(not runtime.INTERPRETER, reason="the interpreter's fallback")
@pytest.mark.parametrize("base,name", VARIANTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fused_gemm_variant_matches_public(base, name, dtype, device):
    """Through a fused GEMM with bias in 16-bit: the variant's output is the public one's
    up to a rounding of the output dtype."""
    a, b, bias = inputs(40, 72, 56, dtype, device, seed=hash((base, name, str(dtype))) % 1000)
    for config in (GROUPED, TMA):
        out = torch.empty(40, 72, dtype=dtype, device=device)
        api.launch(a, b, out, bias, name, 0.01, config)
        public = ak.matmul(a, b, bias, base, config=config)
        ulp = 2.0 ** -10 if dtype == torch.float16 else 2.0 ** -7
        torch.testing.assert_close(out, public, rtol=ulp, atol=ulp * 1e-2)
        ref = reference(a, b, bias, base)
        assert (out.float() - ref).norm() / ref.norm() < 1e-2
