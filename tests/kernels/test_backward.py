"""Gradients of autokernel.linear against float32 torch autograd, under the interpreter."""

import zlib

import pytest
import torch

import autokernel
from autokernel import runtime
from autokernel.autograd import linear_backward
from autokernel.config import KernelConfig
from autokernel.evaluate import reference_activation
from tests.helpers import FP32_TOL, fp32_tol

DEVICE = runtime.kernel_device()
SLOPE = 0.01
# Relative-RMSE bounds: fp32 is exact under the interpreter (tf32 on the GPU).
TOL = {torch.float32: FP32_TOL, torch.float16: 3e-3, torch.bfloat16: 2e-2}


def assert_close(got, ref, dtype, what):
    got, ref = got.detach().float(), ref.detach().float()
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    assert torch.isfinite(got).all(), f"{what}: non-finite values"
    err = float((got - ref).norm() / ref.norm().clamp_min(1e-12))
    assert err < TOL[dtype], f"{what}: relative error {err:.2e} >= {TOL[dtype]:.0e}"


def make_inputs(lead, k, n, dtype, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, k, generator=g).to(DEVICE, dtype)
    w = (torch.randn(n, k, generator=g) / k**0.5).to(DEVICE, dtype)
    b = torch.randn(n, generator=g).to(DEVICE, dtype) if bias else None
    return x, w, b


def reference_grads(x, w, b, activation, grad_y, wanted):
    """Forward output and gradients of the wanted inputs from float32 torch autograd."""
    xr, wr = x.detach().float(), w.detach().float()
    br = b.detach().float() if b is not None else None
    leaves = [t for t, want in zip((xr, wr, br), wanted) if want]
    for t in leaves:
        t.requires_grad_()
    y = reference_activation(torch.nn.functional.linear(xr, wr, br), activation, SLOPE)
    return y, torch.autograd.grad(y, leaves, grad_y.float())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("activation", autokernel.ACTIVATIONS)
def test_gradients_match_torch(activation, bias, dtype):
    seed = zlib.crc32(f"{activation} {bias}".encode()) % 1000
    x, w, b = make_inputs((2, 3, 17), 33, 65, dtype, bias, seed=seed)
    leaves = [t.requires_grad_() for t in (x, w, b) if t is not None]
    y = autokernel.linear(x, w, b, activation, slope=SLOPE)
    grad_y = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 1)).to(DEVICE, dtype)
    if activation in ("relu", "leaky_relu"):
        # act'(Z) jumps at Z = 0: where Z is within rounding of 0 (tf32 on the GPU), the
        # kernel and the float32 reference may take opposite sides, and one such element
        # moved dX by 3.5 %. No gradient flows there; everywhere else it is checked.
        z_ref = torch.nn.functional.linear(x.detach().float(), w.detach().float(),
                                           None if b is None else b.detach().float())
        grad_y = grad_y.masked_fill(z_ref.abs() < 1e-2, 0)
    grads = torch.autograd.grad(y, leaves, grad_y)
    y_ref, refs = reference_grads(x, w, b, activation, grad_y, (True, True, bias))
    assert_close(y, y_ref, dtype, "y")
    for name, got, ref in zip(("dx", "dweight", "dbias"), grads, refs):
        assert got.dtype == dtype
        assert_close(got, ref, dtype, f"{name} ({activation}, {dtype})")


@pytest.mark.parametrize("wanted", [(True, False, False), (False, True, False), (False, False, True),
                                    (False, True, True), (True, False, True)])
@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_only_requested_gradients(activation, wanted):
    x, w, b = make_inputs((19,), 21, 35, torch.float32, seed=3)
    for t, want in zip((x, w, b), wanted):
        t.requires_grad_(want)
    y = autokernel.linear(x, w, b, activation)
    grad_y = torch.randn(y.shape).to(DEVICE)
    y.backward(grad_y)
    _, refs = reference_grads(x, w, b, activation, grad_y, wanted)
    refs = iter(refs)
    for name, t, want in zip(("dx", "dweight", "dbias"), (x, w, b), wanted):
        if want:
            assert_close(t.grad, next(refs), torch.float32, name)
        else:
            assert t.grad is None


def test_backward_computes_only_what_is_asked():
    x, w, b = make_inputs((9,), 17, 24, torch.float16)
    z = torch.randn(9, 24).to(DEVICE, torch.float16)
    dy = torch.randn(9, 24).to(DEVICE, torch.float16)
    for needs in [(True, False, False), (False, True, False), (False, False, True), (False, False, False)]:
        got = linear_backward(dy, x, w, z, "silu", SLOPE, needs=needs)
        assert [g is not None for g in got] == list(needs)


@pytest.mark.parametrize("activation", ["relu", "silu"])
def test_non_contiguous_grad_output(activation):
    x, w, b = make_inputs((2, 13), 18, 26, torch.float16, seed=5)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    y = autokernel.linear(x, w, b, activation)
    base = torch.randn(26, 13, 2).to(DEVICE, torch.float16)
    grad_y = base.permute(2, 1, 0)  # shape (2, 13, 26), no dimension contiguous
    assert not grad_y.is_contiguous()
    grads = torch.autograd.grad(y, leaves, grad_y)
    _, refs = reference_grads(x, w, b, activation, grad_y, (True, True, True))
    for name, got, ref in zip(("dx", "dweight", "dbias"), grads, refs):
        assert_close(got, ref, torch.float16, name)


@pytest.mark.parametrize("activation", ["none", "gelu_tanh"])
def test_broadcast_grad_output_from_sum(activation):
    # y.sum() hands backward an expanded gradient: all strides zero.
    x, w, b = make_inputs((4, 5), 20, 12, torch.float32, seed=7)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    grads = torch.autograd.grad(autokernel.linear(x, w, b, activation).sum(), leaves)
    _, refs = reference_grads(x, w, b, activation, torch.ones(4, 5, 12, device=DEVICE), (True, True, True))
    for name, got, ref in zip(("dx", "dweight", "dbias"), grads, refs):
        assert_close(got, ref, torch.float32, name)


@pytest.mark.parametrize("shape", [(0, 8, 6), (5, 0, 6), (5, 8, 0)], ids=["M=0", "K=0", "N=0"])
@pytest.mark.parametrize("activation", ["none", "silu"])
def test_zero_size_dimensions(shape, activation):
    m, k, n = shape
    x, w, b = make_inputs((m,), k, n, torch.float32)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    y = autokernel.linear(x, w, b, activation)
    assert y.shape == (m, n)
    grad_y = torch.randn(m, n).to(DEVICE)
    grads = torch.autograd.grad(y, leaves, grad_y)
    _, refs = reference_grads(x, w, b, activation, grad_y, (True, True, True))
    # Empty reductions give zeros (dX for N = 0, dW and db for M = 0); db for K = 0 is not empty.
    for got, ref, t in zip(grads, refs, leaves):
        assert got.shape == t.shape
        torch.testing.assert_close(got, ref, atol=fp32_tol(1e-5), rtol=fp32_tol(1e-5))


def test_zero_size_batch_with_leading_dims():
    x, w, b = make_inputs((3, 0), 10, 7, torch.float16)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    y = autokernel.linear(x, w, b, "relu")
    assert y.shape == (3, 0, 7)
    dx, dw, db = torch.autograd.grad(y, leaves, torch.randn(3, 0, 7).to(DEVICE, torch.float16))
    assert dx.shape == (3, 0, 10) and not dw.any() and not db.any()


def test_backward_configs_are_used():
    x, w, b = make_inputs((40,), 48, 56, torch.float32, seed=11)
    leaves = [t.requires_grad_() for t in (x, w, b)]
    small = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=2, num_warps=1, num_stages=1)
    y = autokernel.linear(x, w, b, "leaky_relu", config=small, dx_config=small, dw_config=small)
    grad_y = torch.randn(y.shape).to(DEVICE)
    grads = torch.autograd.grad(y, leaves, grad_y)
    _, refs = reference_grads(x, w, b, "leaky_relu", grad_y, (True, True, True))
    for name, got, ref in zip(("dx", "dweight", "dbias"), grads, refs):
        assert_close(got, ref, torch.float32, name)
    with pytest.raises(TypeError, match="KernelConfig"):
        autokernel.linear(x, w, b, dx_config={"block_m": 16}).sum().backward()


@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_linear_backward_against_its_formulas(activation):
    x, w, _ = make_inputs((23,), 30, 41, torch.float32, seed=13)
    z = torch.randn(23, 41).to(DEVICE)
    dy = torch.randn(23, 41).to(DEVICE)
    dx, dw, db = linear_backward(dy, x, w, z, activation, SLOPE, needs=(True, True, True))
    act = torch.nn.functional.gelu if activation == "gelu" else (lambda t: t)
    dz = dy * torch.func.grad(lambda t: act(t).sum())(z)
    assert_close(dx, dz @ w, torch.float32, "dx")
    assert_close(dw, dz.t() @ x, torch.float32, "dw")
    assert_close(db, dz.sum(0), torch.float32, "db")


def test_no_grad_mode_skips_autograd():
    x, w, b = make_inputs((5,), 8, 6, torch.float32)
    w.requires_grad_()
    with torch.no_grad():
        y = autokernel.linear(x, w, b)
    assert y.grad_fn is None
    assert autokernel.linear(x, w, b).grad_fn is not None


def test_argument_checks_still_apply_with_grad():
    x, w, b = make_inputs((5,), 8, 6, torch.float32)
    w.requires_grad_()
    with pytest.raises(ValueError, match="bias has length"):
        autokernel.linear(x, w, b[:3])
    with pytest.raises(ValueError, match="activation must be one of"):
        autokernel.linear(x, w, b, "tanh")
    with pytest.raises(TypeError, match="dtype"):
        autokernel.linear(x, w.half())


@pytest.mark.parametrize("activation", ["none", "gelu"])
def test_non_contiguous_bias_forward_and_backward(activation):
    # The bias is a column of a 2-D leaf: its stride is 3, and db flows back into that column.
    x, w, _ = make_inputs((4, 9), 19, 37, torch.float32, bias=False, seed=8)
    table = torch.randn(37, 3).to(DEVICE).requires_grad_()
    x.requires_grad_()
    y = autokernel.linear(x, w, table[:, 1], activation, slope=SLOPE)
    grad_y = torch.randn(y.shape).to(DEVICE)
    y.backward(grad_y)
    bias = table.detach()[:, 1].clone()
    y_ref, (dx_ref, db_ref) = reference_grads(x, w, bias, activation, grad_y, (True, False, True))
    assert_close(y, y_ref, torch.float32, "y")
    assert_close(x.grad, dx_ref, torch.float32, "dx")
    assert_close(table.grad[:, 1], db_ref, torch.float32, "dbias")
    assert not table.grad[:, [0, 2]].any()


@pytest.mark.parametrize("layout", ["nn", "tn", "nt"])
@pytest.mark.parametrize("activation", ["none", "leaky_relu", "silu"])
def test_matmul_is_differentiable(activation, layout):
    # matmul takes the autograd route of linear when an input requires grad.
    g = torch.Generator().manual_seed(len(layout) + len(activation))
    m, k, n = 23, 31, 45
    a = torch.randn(k, m, generator=g).t() if layout[0] == "t" else torch.randn(m, k, generator=g)
    b = torch.randn(n, k, generator=g).t() if layout[1] == "t" else torch.randn(k, n, generator=g)
    a, b = a.to(DEVICE).requires_grad_(), (b / k**0.5).to(DEVICE).requires_grad_()
    bias = torch.randn(n, generator=g).to(DEVICE).requires_grad_()
    y = autokernel.matmul(a, b, bias, activation, slope=SLOPE)
    assert y.requires_grad
    grad_y = torch.randn(y.shape, generator=g).to(DEVICE)
    grads = torch.autograd.grad(y, (a, b, bias), grad_y)
    leaves = [t.detach().clone().requires_grad_() for t in (a, b, bias)]
    y_ref = reference_activation(leaves[0] @ leaves[1] + leaves[2], activation, SLOPE)
    refs = torch.autograd.grad(y_ref, leaves, grad_y)
    assert_close(y, y_ref, torch.float32, "y")
    for name, got, ref in zip(("da", "db", "dbias"), grads, refs):
        assert_close(got, ref, torch.float32, f"{name} ({activation}, {layout})")


def test_matmul_out_with_grad_raises_as_torch_does():
    a = torch.randn(5, 7).to(DEVICE).requires_grad_()
    b = torch.randn(7, 6).to(DEVICE)
    out = torch.empty(5, 6).to(DEVICE)
    with pytest.raises(RuntimeError, match="out="):
        torch.matmul(a, b, out=out)
    with pytest.raises(RuntimeError, match="out="):
        autokernel.matmul(a, b, out=out)
    with torch.no_grad():  # no graph to record: out= is fine, as in torch
        autokernel.matmul(a, b, out=out)
    torch.testing.assert_close(out, (a @ b).detach(), rtol=FP32_TOL, atol=FP32_TOL)



def test_out_saved_for_a_backward_is_marked_modified():
    """out= under no_grad into a tensor a graph saved (exp saves its output): the backward
    raises as torch's does after its out=, on a cached layout too, rather than computing
    gradients from what the kernel wrote."""
    a, b = torch.randn(5, 7, device=DEVICE), torch.randn(7, 6, device=DEVICE)
    for _ in range(2):
        x = torch.ones(5, 6, device=DEVICE, requires_grad=True)
        y = x.exp()
        with torch.no_grad():
            autokernel.matmul(a, b, out=y)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_a_second_derivative_raises_and_first_derivatives_under_create_graph_hold():
    """Under create_graph (a gradient penalty) the first derivatives are the same; taking a
    derivative of them raises, where it gave a silently wrong weight gradient before."""
    x, w, b = make_inputs((4,), 24, 9, torch.float32, seed=21)
    x, w = x.requires_grad_(), w.requires_grad_()
    y = autokernel.linear(x, w, b, "gelu")
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    ref, = torch.autograd.grad(reference_activation(x.float() @ w.float().t() + b.float(), "gelu").sum(), x)
    assert_close(g, ref, torch.float32, "dX under create_graph")
    with pytest.raises(RuntimeError, match="no second derivative"):
        (y.sum() + (g ** 2).sum()).backward()


@pytest.mark.parametrize("needs", ["a", "out"])
def test_out_with_autograd_raises_as_torch_does(needs):
    """out= with a tensor that requires grad, an input or out itself: torch.matmul refuses
    both, and so does matmul, writing nothing."""
    a, b = torch.randn(8, 16, device=DEVICE), torch.randn(16, 8, device=DEVICE)
    out = torch.full((8, 8), 7.0, device=DEVICE)
    (a if needs == "a" else out).requires_grad_()
    with pytest.raises(RuntimeError, match="out="):
        torch.matmul(a, b, out=out)
    with pytest.raises(RuntimeError, match="out="):
        autokernel.matmul(a, b, out=out)
    assert (out.detach() == 7).all()


def test_bias_of_another_dtype_is_added_in_float32_and_gets_its_own_gradient():
    """A float32 bias on a float16 layer (torch.addmm refuses one): the forward adds it in
    float32, and its gradient comes back as float32, the column sums of dY."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(19, 40, generator=gen).to(DEVICE, torch.float16).requires_grad_()
    w = torch.randn(24, 40, generator=gen).to(DEVICE, torch.float16).requires_grad_()
    b = (torch.randn(24, generator=gen) * 1e3).to(DEVICE).requires_grad_()  # large: float16 would round it
    y = autokernel.linear(x, w, b, "silu", config=KernelConfig(block_m=16, block_n=16, block_k=16, num_warps=1))
    ref = torch.nn.functional.silu(x.detach().float() @ w.detach().float().t() + b.detach())
    assert y.dtype == torch.float16
    assert_close(y.float(), ref, torch.float16, "forward")
    dy = torch.randn(19, 24, generator=gen).to(DEVICE, torch.float16)
    y.backward(dy)
    assert b.grad.dtype == torch.float32
    z = x.detach().float() @ w.detach().float().t() + b.detach()
    want = (dy.float() * torch.sigmoid(z) * (1 + z * (1 - torch.sigmoid(z)))).sum(0)
    assert_close(b.grad, want, torch.float16, "dbias")


def test_the_activation_pass_takes_two_row_tiles_a_program():
    from autokernel.kernels.backward import row_tiles_for

    # two at every size measured (GPT-2's 2048 tokens to 16384 x 4096), one where M fits a tile
    assert [row_tiles_for(m, n, 132) for m, n in ((2048, 768), (8192, 4096), (65536, 8192))] == [2, 2, 2]
    assert row_tiles_for(32, 4096, 132) == row_tiles_for(1, 1, 132) == 1


@pytest.mark.parametrize("row_tiles", [1, 3])
def test_the_activation_pass_sums_every_row_whatever_the_rows_per_program(row_tiles, device):
    """dZ = dY * act'(Z) and db with its sums kept per row across the row tiles: ragged M and
    N, strided dY and Z, rows past M masked out of both the store and the sum."""
    import triton

    dy = torch.randn(150, 90, device=device, dtype=torch.float16)[::2, 3:80]  # 75 x 77, strided
    z = torch.randn(77, 75, device=device, dtype=torch.float16).t()
    dz = torch.full((75, 77), float("nan"), device=device, dtype=torch.float16)
    block_m, block_n = 16, 64
    grid = (triton.cdiv(75, block_m * row_tiles), triton.cdiv(77, block_n))
    db = _run_pass(grid, dy, z, dz, "silu", True, row_tiles, block_m, block_n)
    zf = z.float()
    want = dy.float() * torch.sigmoid(zf) * (1 + zf * (1 - torch.sigmoid(zf)))
    assert_close(dz, want, torch.float16, "dZ")
    assert_close(db, want.sum(0), torch.float16, "db")


def _run_pass(grid, dy, z, dz, act: str, store_dz: bool, row_tiles: int, block_m: int, block_n: int):
    """db from the pass on a 75 x 77 dY, launched twice: the last program of each column
    block sums the partials (in chunks of 2 rows, so that the loop runs several with a
    masked last one), leaves the counts at 0 and gives the same bits the second time."""
    from autokernel.kernels.backward import _activation_grad_kernel, column_counts

    partial = torch.full((grid[0], 77), float("nan"), dtype=torch.float32, device=dy.device)
    counts = column_counts(dy.device, grid[1])
    finish = grid[0] > 1
    runs = []
    for _ in range(2):
        db = torch.full((77,), float("nan"), dtype=torch.float16, device=dy.device)
        _activation_grad_kernel[grid](dy, z, dz, partial, db, counts, 75, 77, *dy.stride(), *z.stride(), *dz.stride(),
                                      0.0, GRAD_ACTIVATION=act, STORE_DZ=store_dz, COLUMN_SUM=True, FINISH=finish,
                                      ROW_TILES=row_tiles, BLOCK_M=block_m, BLOCK_N=block_n, SUM_ROWS=2)
        runs.append(db if finish else partial[0].clone())
        assert not counts[:grid[1]].any(), "the counts are left at 0 for the next launch"
    assert torch.equal(runs[0], runs[1])
    return runs[0]


def test_db_alone_gives_a_program_more_rows_while_half_the_sms_stay_busy():
    from autokernel.kernels.backward import row_tiles_for

    # 2048x768 (384 tiles of 32x128): 4 rows of tiles a program leaves 96 programs for 132 SMs
    assert row_tiles_for(2048, 768, 132, sum_only=True) == 4
    # a power of two, at most 16
    assert [row_tiles_for(4096, 1024, 132, sum_only=True), row_tiles_for(8192, 2304, 132, sum_only=True)] == [8, 16]
    assert row_tiles_for(65536, 8192, 132, sum_only=True) == 16
    # too few tiles to share: one each
    assert row_tiles_for(512, 1024, 132, sum_only=True) == row_tiles_for(1, 1, 132, sum_only=True) == 1


@pytest.mark.parametrize("row_tiles", [1, 3, 16])
def test_db_alone_sums_every_row_whatever_the_rows_per_program(row_tiles, device):
    """The unrolled db-only form of the pass: ragged M and N, a strided dY, rows past M masked."""
    import triton

    dy = torch.randn(150, 90, device=device, dtype=torch.float16)[::2, 3:80]  # 75 x 77, strided
    block_m, block_n = 16, 64
    grid = (triton.cdiv(75, block_m * row_tiles), triton.cdiv(77, block_n))
    db = _run_pass(grid, dy, dy, dy, "none", False, row_tiles, block_m, block_n)
    assert_close(db, dy.float().sum(0), torch.float16 if grid[0] > 1 else torch.float32, "db")


@pytest.mark.parametrize("act, store_dz, column_sum", [("none", False, True), ("gelu", True, True), ("silu", True, False)])
def test_the_pass_builds_its_gpu_launch(monkeypatch, act, store_dz, column_sum):
    """The GPU launch takes every constexpr in the kernel's order (the interpreter's does not
    check it): built here off the GPU, with an H100's SM count."""
    from autokernel import runtime
    from autokernel.kernels import backward

    monkeypatch.setattr(runtime, "sm_count", lambda *a, **k: 132)
    dy = torch.empty(4096, 3072, dtype=torch.float16)
    launch = backward.plan_activation_grad(dy, dy if act != "none" else None, dy if store_dz else None, act, 0.01,
                                           column_sum, False)
    finish = launch.args_tail[backward._activation_grad_kernel.arg_names.index("FINISH") - 6]
    assert launch.grid[0] > 1 and finish == column_sum


@pytest.mark.parametrize("slope", [0.01, -0.2, 0.0])
@pytest.mark.parametrize("activation", ["relu", "leaky_relu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_preactivation_of_exactly_zero_takes_torchs_side_of_the_kink(activation, slope, dtype):
    """Rows of zeros and no bias (padding tokens) make Z exactly 0, where act' jumps: every
    gradient must be torch's, which takes the side below there (relu 0, leaky_relu the
    slope; saved off Y for a positive slope, off Z otherwise)."""
    x, w, _ = make_inputs((12,), 24, 20, dtype, bias=False, seed=7)
    x[3:9] = 0  # six rows of Z exactly 0 (and -0.0 nowhere else)
    dy = torch.randn(12, 20, generator=torch.Generator().manual_seed(8)).to(DEVICE, dtype)
    mine = [t.detach().clone().requires_grad_() for t in (x, w)]
    autokernel.linear(*mine, None, activation, slope=slope).backward(dy)
    theirs = [t.detach().float().requires_grad_() for t in (x, w)]
    z = torch.nn.functional.linear(*theirs)
    y = torch.relu(z) if activation == "relu" else torch.nn.functional.leaky_relu(z, slope)
    y.backward(dy.float())
    for name, got, ref in zip(("dx", "dweight"), (mine[0].grad, mine[1].grad), (theirs[0].grad, theirs[1].grad)):
        assert_close(got, ref, dtype, f"{name} ({activation}, slope {slope})")
