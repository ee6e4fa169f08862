"""Operands whose rows take no 16-byte vectors (K of 50257, a vocabulary; an odd M under a
transposed view; a slice at an odd column) are copied into buffers whose rows do, before the
launch, where ``matmul`` picks the config and the problem is large enough: the copies'
layout, the rule, and results against a float32 reference on every layout, with an
epilogue, through ``linear`` (its weight passed for ``weight.t()``) and its backward."""

import pytest
import torch

import autokernel as ak
from autokernel import plans
from autokernel.config import KernelConfig
from autokernel.evaluate import reference_activation


def operand(rows, cols, transposed, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(cols, rows, generator=g).t() if transposed else torch.randn(rows, cols, generator=g)
    return (t / cols ** 0.5).to(device=device, dtype=dtype)


def rel(x, ref):
    return float((x.detach().float() - ref.detach()).norm() / ref.detach().norm())


@pytest.fixture
def no_floor(monkeypatch):
    """Padding at the tests' small sizes (the work floor is for GPU launch costs)."""
    monkeypatch.setattr(plans, "PAD_MIN_FLOP", 0)
    plans.clear_launch_cache()
    yield
    plans.clear_launch_cache()


def test_rows_unaligned_names_odd_rows_misaligned_bases_and_nothing_else():
    x = torch.zeros(64, 80, dtype=torch.float16)
    assert not plans.rows_unaligned(x) and not plans.rows_unaligned(x.t())
    assert plans.rows_unaligned(torch.zeros(64, 77, dtype=torch.float16))
    assert plans.rows_unaligned(torch.zeros(64, 77, dtype=torch.float16).t())  # a transposed view: rows along M = 77
    assert plans.rows_unaligned(x[:, 1:])  # base off 16 bytes
    assert not plans.rows_unaligned(torch.zeros(1, 77, dtype=torch.float16))  # one row: a vector either way
    assert not plans.rows_unaligned(torch.zeros(64, 80, dtype=torch.float16)[:, ::2])  # no unit stride


def test_the_rule_asks_for_reuse_work_and_16_bit_operands():
    a = torch.zeros(128, 77, dtype=torch.bfloat16)
    b = torch.zeros(77, 128, dtype=torch.bfloat16)  # rows along N = 128: aligned
    big = plans.PAD_MIN_FLOP
    pad = plans.Padding.of(a, b, 128, 128, int(big))  # K stands in for the work
    assert pad is not None and (pad.a, pad.b) == (True, False)
    assert plans.Padding.of(a, b, 128, 128, 77) is None  # too little work
    assert plans.Padding.of(a, b, 128, plans.PAD_MIN_REUSE - 1, int(big)) is None  # too few columns reuse A
    assert plans.Padding.of(a.float(), b.float(), 128, 128, int(big)) is None  # float32: no TMA, no copy
    b_odd = torch.zeros(77, 129, dtype=torch.bfloat16)
    pad = plans.Padding.of(a[: plans.PAD_MIN_REUSE - 1], b_odd, plans.PAD_MIN_REUSE - 1, 129, int(big))
    assert pad is not None and (pad.a, pad.b) == (True, False)  # B reused by too few rows of C


def test_a_alone_is_copied_beside_an_unaligned_b_only_from_enough_rows():
    big = int(plans.PAD_MIN_FLOP)
    few, enough = plans.PAD_MIN_ROWS + 4, plans.PAD_A_ALONE_MIN_ROWS
    assert few < enough < plans.PAD_MIN_REUSE
    weight = torch.zeros(128, 77, dtype=torch.float16)  # nn.Linear's weight, odd K: B = weight.t()
    aligned_b = torch.zeros(77, 128, dtype=torch.float16)
    for m, b, want in ((few, weight.t(), None), (enough, weight.t(), (True, False)), (few, aligned_b, (True, False))):
        pad = plans.Padding.of(torch.zeros(m, 77, dtype=torch.float16), b, m, 128, big)
        assert (None if pad is None else (pad.a, pad.b)) == want, (m, b.stride())
    assert plans.padding_for(few, 128, 77 + big, torch.float16, "nt") == (False, False)
    assert plans.padding_for(few, 128, 77 + big, torch.float16, "nn") == (True, False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout,m,n,k", [("nn", 70, 72, 77), ("nt", 66, 72, 77), ("tn", 75, 72, 64),
                                          ("tt", 75, 66, 48), ("nn", 70, 66, 80)])
def test_matmul_on_padded_copies_matches_the_reference(no_floor, device, dtype, layout, m, n, k):
    a = operand(m, k, layout[0] == "t", dtype, 1, device)
    b = operand(k, n, layout[1] == "t", dtype, 2, device)
    bias = operand(1, n, False, dtype, 3, device)[0]
    assert plans.Padding.of(a, b, m, n, k) is not None
    a0, b0 = a.clone(), b.clone()
    c = ak.matmul(a, b, bias, "gelu_tanh")
    ref = reference_activation(a.float() @ b.float() + bias.float(), "gelu_tanh")
    assert rel(c, ref) < (2e-2 if dtype == torch.bfloat16 else 2e-3)
    assert torch.equal(a, a0) and torch.equal(b, b0)  # the operands are read, never padded in place
    c2 = ak.matmul(a, b, bias, "gelu_tanh")  # the cached plan: copies made again
    assert torch.equal(c2, c)


def test_an_explicit_config_runs_on_the_operands_as_they_are(no_floor, device):
    a = operand(70, 77, False, torch.float16, 4, device)
    b = operand(77, 72, False, torch.float16, 5, device)
    config = KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1, num_stages=1, variant="grouped")
    plan = plans._make_plan(a, b, None, "none", 0.01, config, None, False)
    assert plan.pad is None
    assert plans._make_plan(a, b, None, "none", 0.01, None, None, False).pad is not None
    assert rel(ak.matmul(a, b, config=config), a.float() @ b.float()) < 2e-3


@pytest.mark.parametrize("features", [77, 72])
def test_linear_and_its_backward_on_padded_copies(no_floor, device, features):
    """A square weight of odd width: linear passes it for weight.t(), whose view the copy is
    made from again (same shape, other strides). Forward, dX and dW against float32."""
    x = operand(70, 77, False, torch.float16, 6, device).requires_grad_()
    w = operand(features, 77, False, torch.float16, 7, device).requires_grad_()
    y = ak.linear(x, w, None, "silu")
    xr = x.detach().float().requires_grad_()
    wr = w.detach().float().requires_grad_()
    yr = torch.nn.functional.silu(xr @ wr.t())
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(8)).to(device=device, dtype=y.dtype)
    y.backward(g)
    yr.backward(g.float())
    assert rel(y, yr) < 2e-3 and rel(x.grad, xr.grad) < 5e-3 and rel(w.grad, wr.grad) < 5e-3
    with torch.no_grad():
        assert rel(ak.linear(x, w, None, "silu"), yr) < 2e-3
