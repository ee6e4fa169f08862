"""Mixed-precision training with torch.autocast: float32 weights, activations in the autocast
dtype. autokernel's linear, matmul and nn.Linear take their inputs as torch's linear and
matmul do there (floating ones cast to the autocast dtype), so a model of float32 layers
swapped to ours trains as it did, its gradients reaching the float32 weights."""

import pytest
import torch
import torch.nn.functional as F

import autokernel
from autokernel import runtime
from autokernel.nn import Linear, swap_linear

DEVICE = runtime.kernel_device()
HALF = torch.float16  # the interpreter's bfloat16 tl.dot is not to be trusted (docs/gpu.md)


def _autocast(enabled=True):
    return torch.autocast(DEVICE.type, dtype=HALF, enabled=enabled)


def _rel(got, ref):
    got, ref = got.detach().float(), ref.detach().float()
    return float((got - ref).norm() / ref.norm())


def _models():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(40, 56), torch.nn.GELU(), torch.nn.Linear(56, 24)).to(DEVICE)
    ours = swap_linear(torch.nn.Sequential(torch.nn.Linear(40, 56), torch.nn.GELU(), torch.nn.Linear(56, 24)))
    ours.load_state_dict(ref.state_dict())
    return ref, ours.to(DEVICE)


def test_a_swapped_model_trains_under_autocast_as_torchs_does():
    ref, ours = _models()
    assert all(isinstance(m, Linear) for m in (ours[0], ours[2]))
    x = torch.randn(2, 9, 40, device=DEVICE)
    grads = []
    for model in (ref, ours):
        with _autocast():
            y = model(x)
            loss = y.float().square().mean()
        loss.backward()
        grads.append([p.grad for p in model.parameters()])
        assert y.dtype == HALF  # the second layer's input is the first's half-precision output
    for got, want in zip(*grads):
        assert got.dtype == torch.float32  # the float32 weights' gradients, through the cast
        assert _rel(got, want) < 2e-2


def test_a_torch_layers_half_output_into_ours():
    # The first layer torch's (autocast runs it in half precision), the second ours with
    # float32 weights: without the cast, a dtype mismatch.
    ref, _ = _models()
    second = Linear(56, 24, device=DEVICE)
    second.load_state_dict(ref[2].state_dict())
    ours = torch.nn.Sequential(ref[0], ref[1], second)
    x = torch.randn(7, 40, device=DEVICE)
    with _autocast():
        got, want = ours(x), ref(x)
    assert got.dtype == want.dtype == HALF
    assert _rel(got, want) < 1e-2


def test_linear_and_matmul_run_in_the_autocast_dtype():
    x, w, b = (torch.randn(13, 40, device=DEVICE), torch.randn(24, 40, device=DEVICE),
               torch.randn(24, device=DEVICE))
    with _autocast():
        y = autokernel.linear(x, w, b, "silu")
        z = autokernel.matmul(x, w.t(), b)
        want = F.silu(F.linear(x, w, b))
    assert y.dtype == z.dtype == HALF == want.dtype
    assert _rel(y, want) < 1e-2
    assert _rel(z, x @ w.t() + b) < 1e-2


def test_no_cast_where_autocast_is_off_or_out_is_given():
    x, w = torch.randn(13, 40, device=DEVICE), torch.randn(40, 24, device=DEVICE)
    with _autocast(), _autocast(enabled=False):
        assert autokernel.matmul(x, w).dtype == torch.float32
    out = torch.empty(13, 24, device=DEVICE)
    with _autocast():  # torch's autocast leaves out= calls alone: so do we
        assert autokernel.matmul(x, w, out=out) is out
    torch.testing.assert_close(out, x @ w, atol=2e-2, rtol=2e-2)  # tf32 on the GPU


@pytest.mark.parametrize("through", ["module", "matmul"])
def test_compiled_code_under_autocast_traces_one_graph(through):
    _, ours = _models()
    x, w = torch.randn(9, 40, device=DEVICE), torch.randn(40, 24, device=DEVICE)
    fn = ours if through == "module" else (lambda a: autokernel.matmul(a, w))
    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    with _autocast():
        got, want = compiled(x), fn(x)
    assert got.dtype == want.dtype == HALF
    assert _rel(got, want) < 1e-2
