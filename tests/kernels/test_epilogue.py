"""The fused activations and their derivatives over the whole float32 range, against
float64: C = act(x) from a K = 1 GEMM of the column x by [[1]], act'(x) from its backward."""

import math
import warnings

import pytest
import torch

import autokernel as ak
from autokernel import runtime

# Every value exactly representable in tf32 too (the GPU's fp32 dot), so C = act(x) there as well.
X = torch.cat([
    torch.arange(-1280, 1281) / 64,  # [-20, 20]
    torch.arange(-1024, 1025) / 1024,  # [-1, 1], finer
    torch.tensor([-1e4, 1e4, -200.0, 200.0, -100.0, 100.0, -90.0, -89.0, -88.0, 0.0, 2.0**-100, -(2.0**-100)]),
]).float()
TINY = 1e-30  # below this |reference|, only the absolute error is bounded


def _sigmoid_form(z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return z * torch.sigmoid(x)


def reference(act: str, z: torch.Tensor) -> torch.Tensor:
    if act == "gelu":
        return 0.5 * z * torch.special.erfc(-z / math.sqrt(2))
    if act == "gelu_tanh":
        return _sigmoid_form(z, 2 * math.sqrt(2 / math.pi) * (z + 0.044715 * z**3))
    return _sigmoid_form(z, z)


def reference_grad(act: str, z: torch.Tensor) -> torch.Tensor:
    z = z.clone().requires_grad_()
    reference(act, z).sum().backward()
    return z.grad


def _check(out: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float) -> None:
    assert not out.isnan().any()
    err = (out.double() - ref).abs()
    bound = rtol * ref.abs() + atol
    worst = int((err / bound).argmax())
    assert (err <= bound).all(), f"x = {X[worst].item()}: {out[worst].item()} vs {ref[worst].item()}"


def _quietly(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warnings under the interpreter
        return fn()


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_activation_is_relatively_accurate_everywhere(act, device):
    ref = reference(act, X.double())
    out = _quietly(lambda: ak.matmul(X[:, None].to(device), torch.ones(1, 1, device=device), None, act))[:, 0].cpu()
    big = ref.abs() > TINY
    _check(out[big], ref[big], 2e-5 if runtime.INTERPRETER else 1e-4, 0.0)
    _check(out[~big], ref[~big], 0.0, 1e-30)
    assert out[X == 1e4].item() == 1e4 and abs(out[X == -1e4].item()) < 1e-30


@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu"])
def test_activation_grad_is_accurate_everywhere(act, device):
    """Relatively, but for an absolute float32 rounding where the derivative crosses zero."""
    x = X[:, None].to(device).requires_grad_()
    _quietly(lambda: ak.linear(x, torch.ones(1, 1, device=device), None, act).sum().backward())
    grad = x.grad[:, 0].cpu()
    _check(grad, reference_grad(act, X.double()), 2e-5 if runtime.INTERPRETER else 3e-3, 2e-7)


KERNELS = {
    "grouped": dict(variant="grouped"),
    "split-K": dict(variant="grouped", split_k=2),
    "TMA": dict(variant="tma"),
}


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("act", ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"])
def test_nan_in_an_input_stays_nan_as_in_torch(act, kernel, device):
    """A NaN in A or in the bias reaches every output it feeds, through every activation
    (relu's max once turned it into 0, hiding a diverged step); the other outputs are finite."""
    config = ak.KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1, **KERNELS[kernel])
    a = torch.randn(20, 40, device=device)
    b = torch.randn(40, 24, device=device)
    bias = torch.randn(24, device=device)
    a[3, 5] = float("nan")
    bias[7] = float("nan")
    out = _quietly(lambda: ak.matmul(a, b, bias, act, config=config)).cpu()
    nan = torch.zeros(20, 24, dtype=torch.bool)
    nan[3, :] = True
    nan[:, 7] = True
    assert torch.equal(out.isnan(), nan)
    assert torch.equal(torch.nn.functional.relu(a @ b + bias).isnan().cpu(), nan)


TORCH_ACT = {
    "none": lambda z: z, "relu": torch.relu, "leaky_relu": lambda z: torch.nn.functional.leaky_relu(z, 0.01),
    "gelu": torch.nn.functional.gelu, "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


@pytest.mark.parametrize("act", list(TORCH_ACT))
def test_infinities_and_far_tails_as_torch_gives_them(act, device):
    """act(+-inf) and act of large finite values, one per row: what torch gives in float64 (silu and
    gelu_tanh of -inf are NaN, as -inf * 0; the GPU's ftz reciprocal makes them so, and
    the interpreter's formula must too), zero or the input itself in the far tails. Every
    value is exact in tf32, which float32 GEMMs use on the GPU (1e30 is not: it came back
    rounded by 1e-4 there)."""
    values = [float("-inf"), float("inf"), -2.0**100, -200.0, -90.0, 90.0, 200.0, 2.0**100]
    a = torch.zeros(len(values), 16, device=device)
    a[:, 0] = torch.tensor(values)
    b = torch.zeros(16, 16, device=device)
    b[0] = 1.0
    config = ak.KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1, variant="grouped")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's inf * 0 under the interpreter: the point here
        out = ak.matmul(a, b, None, act, config=config).cpu()[:, 0]
    # torch's float64 path: its float32 CPU kernels give gelu(+inf) as NaN or inf by the CPU's
    # vector width (vectorized or not), and the GPU's as inf.
    want = TORCH_ACT[act](torch.tensor(values, dtype=torch.float64)).float()
    assert torch.equal(out.isnan(), want.isnan()), (out, want)
    assert torch.allclose(out[~want.isnan()], want[~want.isnan()], rtol=1e-6, atol=1e-30), (out, want)


@pytest.mark.parametrize("act", [a for a in TORCH_ACT if a != "none"])
def test_gradient_at_infinities_and_far_tails_as_torch_gives_it(act, device):
    """act'(z) through linear's backward at +-inf and far tails (values exact in tf32), with
    torch's float32 autograd of the same activation as the reference: NaN where torch gives
    NaN (gelu_tanh' of +-2^100 too: z^3 overflows float32 in torch as here)."""
    values = [float("-inf"), float("inf"), -2.0**100, -200.0, -90.0, 90.0, 200.0, 2.0**100]
    x = torch.zeros(len(values), 16, device=device)
    x[:, 0] = torch.tensor(values)
    x.requires_grad_()
    w = torch.zeros(1, 16, device=device)
    w[0, 0] = 1.0
    config = ak.KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1, variant="grouped")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's inf * 0 under the interpreter: the point here
        ak.linear(x, w, None, act, config=config, dx_config=config, dw_config=config).sum().backward()
    got = x.grad[:, 0].cpu()
    z = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    fn = TORCH_ACT[act] if act != "leaky_relu" else (lambda t: torch.nn.functional.leaky_relu(t, 0.01))
    fn(z).sum().backward()
    want = z.grad
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    # On the GPU dX's float32 GEMM takes its operands in TF32 (10 mantissa bits): leaky_relu's
    # slope, 0.01, is not exact there and comes back within 2^-10 of itself.
    rtol = 2.0**-10 if device.type == "cuda" else 1e-5
    assert torch.allclose(got[~want.isnan()], want[~want.isnan()], rtol=rtol, atol=1e-30), (got, want)


def test_normal_cdf_fit_is_within_its_stated_error():
    """The erfc fit behind the exact gelu, in float64: t exp(P(t) - a^2), t = 1 / (1 + T a), within
    1.1e-6 of erfc relatively wherever erfc is a normal float32 (a <= 9.5), so the kernel's
    float32 rounding, not the fit, sets gelu's error."""
    from autokernel.kernels import epilogue

    coefs = [getattr(epilogue, f"_PHI_P{i}").value for i in range(7)]
    a = torch.linspace(0, 9.5, 200001, dtype=torch.float64)
    t = 1 / (1 + epilogue._PHI_T.value * a)
    p = torch.zeros_like(t)
    for c in reversed(coefs):
        p = p * t + c
    rel = (t * torch.exp(p - a * a) / torch.special.erfc(a) - 1).abs()
    assert rel.max().item() < 1.1e-6
