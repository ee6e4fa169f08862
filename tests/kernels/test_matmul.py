"""The forward kernel against a float32 torch reference, under the interpreter."""

import zlib

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import autokernel as ak
from autokernel import plans, runtime
from autokernel.evaluate import reference
from autokernel.kernels.matmul import group_sizes, grouped_tile

from tests.helpers import FP32_TOL, rel_error

ACTS = ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]
TOL = {torch.float16: 1e-2, torch.bfloat16: 1.5e-2, torch.float32: FP32_TOL}


def _inputs(m, n, k, dtype, device, layout="nn", bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    a = (a / max(k, 1) ** 0.5).to(device, dtype)
    b = b.to(device, dtype)
    bb = torch.randn(n, generator=g).to(device, dtype) if bias else None
    return a, b, bb


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("bias", [False, True])
def test_activations_bias_dtypes(dtype, act, bias, device):
    a, b, bb = _inputs(37, 45, 70, dtype, device, bias=bias, seed=zlib.crc32(f"{dtype} {act} {bias}".encode()) % 1000)
    out = ak.matmul(a, b, bb, act)
    assert out.dtype == dtype and out.shape == (37, 45)
    assert rel_error(out, reference(a, b, bb, act)) < TOL[dtype]


def test_bf16_is_not_interpreter_garbage(device):
    # The interpreter's bf16 tl.dot multiplies raw bits; the kernel must upcast there.
    a, b, _ = _inputs(32, 32, 32, torch.bfloat16, device, bias=False)
    out = ak.matmul(a, b)
    assert out.float().abs().max() < 100
    assert rel_error(out, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("shape", [(1, 1, 1), (17, 33, 65), (127, 255, 63), (3, 200, 17), (65, 1, 129)])
@pytest.mark.parametrize("layout", ["nn", "tn", "nt", "tt"])
def test_odd_shapes_and_transposed_views(shape, layout, device):
    m, n, k = shape
    a, b, bb = _inputs(m, n, k, torch.float16, device, layout=layout, seed=m * 7 + n)
    if layout[0] == "t":
        assert not a.is_contiguous() or m == 1 or k == 1
    out = ak.matmul(a, b, bb, "gelu_tanh")
    assert rel_error(out, reference(a, b, bb, "gelu_tanh")) < 1e-2


def test_strided_slices(device):
    big = torch.randn(64, 96).to(device, torch.float16)
    a = big[::2, 5:45]  # row stride 192, a sliced column window
    b = torch.randn(80, 30).to(device, torch.float16)[::2]
    out = ak.matmul(a, b)
    assert rel_error(out, a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (5, 0, 3), (0, 0, 0)])
def test_zero_size_output(m, n, k, device):
    a = torch.randn(m, k).to(device, torch.float16)
    b = torch.randn(k, n).to(device, torch.float16)
    out = ak.matmul(a, b, activation="relu")
    assert out.shape == (m, n) and out.dtype == torch.float16


@pytest.mark.parametrize("act", ["none", "gelu", "leaky_relu"])
def test_k_zero_applies_bias_and_activation(act, device):
    a = torch.randn(6, 0).to(device, torch.float16)
    b = torch.randn(0, 9).to(device, torch.float16)
    bias = torch.randn(9).to(device, torch.float16)
    out = ak.matmul(a, b, bias, act)
    expected = reference(a, b, bias, act)
    assert out.shape == (6, 9)
    assert torch.allclose(out.float(), expected, atol=1e-3, rtol=1e-3)


def test_leaky_relu_slope_parameter(device):
    a, b, _ = _inputs(20, 20, 20, torch.float32, device, bias=False)
    out = ak.matmul(a, b, activation="leaky_relu", slope=0.2)
    assert torch.allclose(out, F.leaky_relu(a.double() @ b.double(), 0.2).float(), atol=FP32_TOL, rtol=FP32_TOL)


def test_every_element_written_with_explicit_config(device):
    a, b, bb = _inputs(70, 90, 50, torch.float16, device)
    out = torch.full((70, 90), float("nan"), dtype=torch.float16, device=device)
    cfg = ak.KernelConfig(block_m=32, block_n=64, block_k=16, group_m=2, num_warps=4, num_stages=1)
    ak.matmul(a, b, bb, "silu", config=cfg, out=out)
    assert not torch.isnan(out).any()
    assert rel_error(out, reference(a, b, bb, "silu")) < 1e-2


# 7 rows of 16-row tiles: group_m 2 and 3 leave one row past their full groups (merged into
# the last), 4 leaves three (a group of its own), 1 and 64 make no partial group.
GROUP_VARIANTS = [dict(), dict(split_k=2), dict(stream_k=True), dict(variant="tma", block_k=32),
                  dict(variant="tma", block_k=16, stream_k=True)]


@pytest.mark.parametrize("group_m", [1, 2, 3, 4, 64])
@pytest.mark.parametrize("extra", GROUP_VARIANTS, ids=lambda e: "-".join(f"{k}={v}" for k, v in e.items()) or "grouped")
def test_group_order_covers_every_tile(group_m, extra, device):
    a, b, bb = _inputs(100, 72, 64, torch.float16, device)
    fields = dict(block_m=16, block_n=16, block_k=16, group_m=group_m, num_warps=1, num_stages=1) | extra
    out = torch.full((100, 72), float("nan"), dtype=torch.float16, device=device)
    ak.matmul(a, b, bb, "relu", config=ak.KernelConfig(**fields), out=out)
    assert not torch.isnan(out).any()
    assert rel_error(out, reference(a, b, bb, "relu")) < 1e-2


@triton.jit
def _order_kernel(out_ptr, M, N, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = grouped_tile(pid, M, N, 1, 1, GROUP_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def _tile_order(rows: int, cols: int, group_m: int) -> list[tuple[int, int]]:
    """(pid_m, pid_n) of each program id under the kernels' grouped order, on 1x1 tiles."""
    out = torch.full((rows * cols, 2), -1, dtype=torch.int32, device=runtime.kernel_device())
    _order_kernel[(rows * cols,)](out, rows, cols, GROUP_M=group_m)
    return [tuple(x) for x in out.tolist()]


@pytest.mark.parametrize("rows,group_m,groups", [(9, 8, [9]), (12, 8, [12]), (13, 8, [8, 5]), (17, 8, [8, 9]),
                                                 (16, 8, [8, 8]), (5, 8, [5]), (7, 3, [3, 4]), (6, 1, [1] * 6)])
def test_grouped_order_merges_a_small_last_group(rows, group_m, groups):
    """Rows of tiles go GROUP_M at a time, column by column; those left past the last full
    group join it where they are at most half a group (one pass over B fewer)."""
    cols = 3
    order = _tile_order(rows, cols, group_m)
    assert sorted(order) == [(r, c) for r in range(rows) for c in range(cols)]
    assert order == _grouped_order(groups, cols)
    assert group_sizes(rows, group_m) == tuple(groups)


def _grouped_order(groups, cols: int) -> list[tuple[int, int]]:
    """(pid_m, pid_n) per program id for groups of these many tile-rows, each column by column."""
    expected, first = [], 0
    for size in groups:
        expected += [(first + i % size, i // size) for i in range(size * cols)]
        first += size
    return expected


def test_group_sizes_mirror_the_kernels_order():
    """``group_sizes`` (the tuning space's test of two group_m values being one order) against
    the order the kernels launch, over every split of up to 40 tile-rows (two columns, so
    that a group's bounds show in the order)."""
    for group_m in (1, 2, 3, 4, 8, 16):
        for rows in range(1, 41):
            assert _tile_order(rows, 2, group_m) == _grouped_order(group_sizes(rows, group_m), 2), (rows, group_m)


def test_linear_leading_dims_and_weight_layout(device):
    x = torch.randn(2, 3, 19).to(device, torch.float16)
    w = torch.randn(23, 19).to(device, torch.float16) / 19**0.5
    bias = torch.randn(23).to(device, torch.float16)
    y = ak.linear(x, w, bias, "relu")
    assert y.shape == (2, 3, 23)
    ref = F.relu(F.linear(x.float(), w.float(), bias.float()))
    assert rel_error(y, ref) < 1e-2


# ---- bad input: TypeError / ValueError naming the argument and the value ----

def test_bad_dtype(device):
    a = torch.ones(4, 4, dtype=torch.int32, device=device)
    with pytest.raises(TypeError, match=r"^a has dtype torch.int32"):
        ak.matmul(a, a)


def test_mixed_dtypes(device):
    a = torch.ones(4, 4, dtype=torch.float16, device=device)
    with pytest.raises(TypeError, match="b has dtype torch.bfloat16"):
        ak.matmul(a, a.to(torch.bfloat16))


def test_not_a_tensor():
    with pytest.raises(TypeError, match="a must be a torch.Tensor, got list"):
        ak.matmul([[1.0]], torch.ones(1, 1))


def test_shape_mismatch(device):
    a = torch.ones(4, 5, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match=r"inner dimensions differ: a is \(4, 5\), b is \(4, 5\)"):
        ak.matmul(a, a)


def test_wrong_rank(device):
    with pytest.raises(ValueError, match=r"a must be 2-D, got shape \(3,\)"):
        ak.matmul(torch.ones(3, dtype=torch.float16, device=device), torch.ones(3, 3, dtype=torch.float16, device=device))


def test_bad_bias_length(device):
    a = torch.ones(4, 4, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="bias has length 3, expected N = 4"):
        ak.matmul(a, a, torch.ones(3, dtype=torch.float16, device=device))


def test_unknown_activation(device):
    a = torch.ones(4, 4, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="activation must be one of .*got 'tanh'"):
        ak.matmul(a, a, activation="tanh")


def test_wrong_device_is_named():
    from autokernel import runtime

    if not runtime.INTERPRETER:
        pytest.skip("on a GPU machine CPU tensors are the wrong device")
    a = torch.ones(4, 4, dtype=torch.float16, device="meta")
    with pytest.raises(ValueError, match="a is on meta"):
        ak.matmul(a, a)


def test_linear_feature_mismatch(device):
    x = torch.ones(2, 5, dtype=torch.float16, device=device)
    w = torch.ones(3, 4, dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="x has 5 features but weight is"):
        ak.linear(x, w)



@pytest.mark.parametrize("kind", ["sparse_coo", "sparse_csr", "nested"])
def test_a_tensor_that_is_not_dense_is_named(kind, device):
    """Sparse and nested tensors have no strides or storage for the kernels to read: a
    TypeError naming the argument and its kind, from matmul and linear, with and without
    grad, and after a dense call of the same shape."""
    dense = torch.ones(4, 4, device=device)

    def odd(t):
        if kind == "nested":
            return torch.nested.nested_tensor([t, t[:2]])
        return t.to_sparse() if kind == "sparse_coo" else t.to_sparse_csr()

    ak.matmul(dense, dense)
    ak.linear(dense, dense)
    calls = {"a": lambda: ak.matmul(odd(dense), dense), "b": lambda: ak.matmul(dense, odd(dense)),
             "out": lambda: ak.matmul(dense, dense, out=odd(torch.zeros(4, 4, device=device))),
             "x": lambda: ak.linear(odd(dense), dense),
             "weight": lambda: ak.linear(dense.clone().requires_grad_(), odd(dense))}
    if kind == "sparse_coo":  # the one of the three that may be 1-D
        calls["bias"] = lambda: ak.matmul(dense, dense, odd(torch.ones(4, device=device)))
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"^{name} is a {kind} tensor; the kernels take dense"):
            call()


def test_a_negated_view_is_named_and_resolved_where_torch_resolves_it(device):
    """A negated view (torch._neg_view; the .imag of a conjugated view) keeps its sign as a
    flag, not in memory, which the kernels would not read: matmul and linear name it, also
    after a call of the same layout without the flag; nn.Linear and linear's backward
    resolve it, as torch does."""
    gen = torch.Generator(device=device).manual_seed(0)
    a, b, bias = (torch.randn(*s, generator=gen, device=device) for s in ((5, 7), (7, 3), (3,)))
    ak.matmul(a, b, bias)
    ak.linear(a, b.t().contiguous())
    calls = {"a": lambda: ak.matmul(torch._neg_view(a), b), "b": lambda: ak.matmul(a, torch._neg_view(b)),
             "bias": lambda: ak.matmul(a, b, torch._neg_view(bias)),
             "out": lambda: ak.matmul(a, b, out=torch._neg_view(torch.zeros(5, 3, device=device))),
             "x": lambda: ak.linear(torch._neg_view(a), b.t().contiguous())}
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"^{name} is a negated view"):
            call()
    layer = ak.nn.Linear(7, 3, device=device)
    torch.testing.assert_close(layer(torch._neg_view(a)), layer(-a))
    x = a.clone().requires_grad_()
    ak.linear(x, b.t().contiguous()).backward(torch._neg_view(torch.ones(5, 3, device=device)))
    torch.testing.assert_close(x.grad, -(torch.ones(5, 3, device=device) @ b.t()), rtol=1e-2, atol=1e-2)


# ---- the Hopper TMA variant (its descriptors run in the interpreter too) ----

TMA_CFG = dict(block_m=16, block_n=32, block_k=16, group_m=2, num_warps=1, num_stages=1, variant="tma")


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tma_variant_every_layout(layout, dtype, device, monkeypatch):
    # 40x72x56: every stride is 16-byte aligned, so descriptors are used (checked below);
    # edges are ragged against the 16x32x16 tile, so TMA's zero padding and clipping count.
    import autokernel.kernels.matmul as grouped

    monkeypatch.setattr(grouped, "plan_matmul", lambda *a, **k: pytest.fail("fell back to the grouped kernel"))
    a, b, bb = _inputs(40, 72, 56, dtype, device, layout=layout, seed=len(layout))
    out = torch.full((40, 72), float("nan"), dtype=dtype, device=device)
    ak.matmul(a, b, bb, "gelu_tanh", config=ak.KernelConfig(**TMA_CFG), out=out)
    assert not torch.isnan(out).any()
    assert rel_error(out, reference(a, b, bb, "gelu_tanh")) < TOL[dtype]


@pytest.mark.parametrize("shape", [(17, 33, 65), (40, 72, 0), (8, 9, 16)])
def test_tma_variant_falls_back_when_descriptors_cannot_be_made(shape, device):
    m, n, k = shape
    a, b, bb = _inputs(m, n, k, torch.float16, device, seed=3)
    out = ak.matmul(a, b, bb, "silu", config=ak.KernelConfig(**TMA_CFG))
    assert rel_error(out, reference(a, b, bb, "silu")) < 1e-2


def test_tma_operands_rules(device):
    from autokernel.kernels.matmul_tma import tma_operands

    a = torch.randn(40, 56).to(device, torch.float16)
    w = torch.randn(72, 56).to(device, torch.float16)
    c = torch.empty(40, 72, dtype=torch.float16, device=device)
    (av, at), (bv, bt), c_described = tma_operands(a, w.t(), c)
    assert (at, bt, c_described) == (False, True, True) and bv.shape == (72, 56)
    assert tma_operands(a[:, 1:], w.t()[1:], c) is None  # base not 16-byte aligned
    assert tma_operands(a.float(), w.t().float(), c.float()) is None  # fp32 stays on the pointer kernel


@pytest.mark.parametrize("variant", ["grouped", "tma"])
def test_epilogue_stores_preactivation_beside_output(variant, device):
    # autograd keeps Z = A @ B + bias for act'(Z); one launch writes both Z and Y.
    from autokernel.api import launch

    a, b, bb = _inputs(40, 72, 56, torch.float16, device, layout="nt", seed=11)
    y = torch.full((40, 72), float("nan"), dtype=torch.float16, device=device)
    z = torch.full_like(y, float("nan"))
    cfg = ak.KernelConfig(**{**TMA_CFG, "variant": variant})
    launch(a, b, y, bb, "silu", 0.01, cfg, z=z)
    assert not torch.isnan(z).any() and not torch.isnan(y).any()
    assert rel_error(z, reference(a, b, bb, "none")) < 1e-2
    assert rel_error(y, reference(a, b, bb, "silu")) < 1e-2


# ---- hardening: strided bias, outputs that overlap inputs ----

def _strided_biases(n, dtype, device):
    """Non-contiguous biases of length n: a slice with step 2, a column of a matrix, a
    broadcast scalar (stride 0)."""
    g = torch.Generator().manual_seed(5)
    return {
        "step 2": torch.randn(2 * n, generator=g).to(device, dtype)[::2],
        "column": torch.randn(n, 3, generator=g).to(device, dtype)[:, 1],
        "stride 0": torch.randn(1, generator=g).to(device, dtype).expand(n),
    }


@pytest.mark.parametrize("variant", ["grouped", "tma"])
@pytest.mark.parametrize("kind", ["step 2", "column", "stride 0"])
def test_non_contiguous_bias(kind, variant, device):
    a, b, _ = _inputs(40, 72, 56, torch.float16, device, seed=21)
    bias = _strided_biases(72, torch.float16, device)[kind]
    assert not bias.is_contiguous()
    out = ak.matmul(a, b, bias, "gelu", config=ak.KernelConfig(**{**TMA_CFG, "variant": variant}))
    assert rel_error(out, reference(a, b, bias.contiguous(), "gelu")) < 1e-2


def test_non_contiguous_bias_small_float32(device):
    # A strided bias, as a user passes it: autokernel.matmul(a, b, torch.arange(12.)[::2]).
    a, b = torch.randn(5, 7).to(device), torch.randn(7, 6).to(device)
    out = ak.matmul(a, b, torch.arange(12.0).to(device)[::2])
    torch.testing.assert_close(out, a @ b + torch.arange(0.0, 12.0, 2.0).to(device), rtol=FP32_TOL, atol=FP32_TOL)


def test_linear_non_contiguous_bias(device):
    x = torch.randn(3, 5, 24).to(device, torch.float16)
    w = (torch.randn(40, 24) / 24**0.5).to(device, torch.float16)
    bias = _strided_biases(40, torch.float16, device)["column"]
    y = ak.linear(x, w, bias, "silu")
    assert rel_error(y, F.silu(F.linear(x.float(), w.float(), bias.float()))) < 1e-2


def _overlapping_outs(device):
    """(name, a, b, bias, out) where out shares memory with an input."""
    x = torch.randn(24, 24).to(device)
    w = torch.randn(24, 24).to(device)
    buf = torch.randn(40, 24).to(device)
    yield "out is a", x, w, None, x
    yield "out is b", x, w, None, w
    yield "out is b transposed", x, w.t(), None, w
    yield "out half over a", buf[:24], w, None, buf[12:36]
    yield "bias is a row of out", x, w, buf[0], buf[:24]


@pytest.mark.parametrize("case", range(5))
def test_out_overlapping_an_input_is_rejected(case, device):
    name, a, b, bias, out = list(_overlapping_outs(device))[case]
    before = [t.clone() for t in (a, b, out)]
    with pytest.raises(ValueError, match="out overlaps"):
        ak.matmul(a, b, bias, out=out)
    for t, old in zip((a, b, out), before):
        assert torch.equal(t, old), name  # refused before any launch


def _twin(t):
    """A tensor of ``t``'s layout on memory of its own."""
    if t is None:
        return None
    twin = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return twin.copy_(t)


@pytest.mark.parametrize("case", range(5))
def test_out_overlapping_an_input_is_rejected_on_a_layout_seen_before(case, device):
    # The first call, on operands apart, makes the layout's plan; the overlap is then
    # found by the plan's own check (addresses against each operand's extent).
    name, a, b, bias, out = list(_overlapping_outs(device))[case]
    ak.matmul(_twin(a), _twin(b), _twin(bias), out=_twin(out))
    key = (plans._layout(a), plans._layout(b), plans._layout(bias), plans._layout(out), None, 0.01, None, False)
    assert key in plans._PLANS, name
    before = [t.clone() for t in (a, b, out)]
    with pytest.raises(ValueError, match="out overlaps"):
        ak.matmul(a, b, bias, out=out)
    for t, old in zip((a, b, out), before):
        assert torch.equal(t, old), name


def test_out_with_elements_sharing_memory_is_rejected(device):
    a, b = torch.randn(8, 8).to(device), torch.randn(8, 8).to(device)
    with pytest.raises(ValueError, match="share memory"):
        ak.matmul(a, b, out=torch.empty(8, 1, device=device).expand(8, 8))


def test_out_as_an_inference_tensor_is_written_only_in_inference_mode(device):
    """As torch's out= does: outside inference mode an inference tensor is refused before any
    launch (it was written, behind torch's rule); inside, it is written."""
    a, b = torch.randn(8, 8).to(device), torch.randn(8, 8).to(device)
    with torch.inference_mode():
        out = torch.zeros(8, 8, device=device)
    for _ in range(2):  # the second call through the layout's plan
        with pytest.raises(RuntimeError, match="inference tensor"):
            ak.matmul(a, b, out=out)
        assert not out.any()
    with torch.inference_mode():
        ak.matmul(a, b, out=out)
    torch.testing.assert_close(out, a @ b, rtol=FP32_TOL, atol=FP32_TOL)


def test_out_beside_inputs_in_one_buffer_is_fine(device):
    # Views of one buffer that touch disjoint elements: halves, and interleaved columns
    # (their byte spans meet). Twice each: the second call goes through the layout's plan.
    buf = torch.randn(48, 24).to(device)
    cols = torch.randn(24, 48).to(device)
    a, out = buf[:24], buf[24:]
    cases = [(a, torch.randn(24, 24).to(device), out), (a, cols[:, 1::2], cols[:, ::2])]
    for a, b, out in cases:
        ref = a @ b
        for _ in range(2):
            out.zero_()
            ak.matmul(a, b, out=out)
            torch.testing.assert_close(out, ref, rtol=FP32_TOL, atol=FP32_TOL)

