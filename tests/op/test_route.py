"""The backend switch (autokernel.route): where ``auto`` sends a GEMM, the cuBLAS table it
predicts from, and the torch launch a routed layout runs (under the interpreter: torch's CPU
kernels against a float32 reference, forward and backward)."""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import autokernel
from autokernel import autotune, best, gpus, plans, route
from autokernel.cli import app
from autokernel.config import KernelConfig

ROOT = Path(__file__).resolve().parents[2]
H100 = "NVIDIA H100 80GB HBM3"
ACTS = ["none", "relu", "leaky_relu", "gelu", "gelu_tanh", "silu"]


@pytest.fixture(autouse=True)
def _unset():
    route.use(None)
    route._warned_values.clear()
    yield
    route.use(None)


@pytest.fixture
def to_cublas(monkeypatch):
    """``auto`` on, and every layout it is asked about sent to cuBLAS."""
    monkeypatch.setattr(route, "decide", lambda *a, **k: route.Route("cublas", 2.0, 1.0, "test"))
    route.use("auto")


def test_the_backend_comes_from_the_switch_else_the_environment(monkeypatch):
    assert route.backend() == "triton"
    monkeypatch.setenv(route.ENV, "auto")
    assert route.backend() == "auto"
    route.use("triton")
    assert route.backend() == "triton"
    route.use(None)
    assert route.backend() == "auto"
    with pytest.raises(ValueError, match="backend must be one of triton, auto"):
        route.use("cublas")


def test_an_unknown_value_in_the_environment_warns_once_and_runs_triton(monkeypatch):
    monkeypatch.setenv(route.ENV, "fastest")
    with pytest.warns(RuntimeWarning, match="AUTOKERNEL_BACKEND='fastest' is neither of triton, auto"):
        assert route.backend() == "triton"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert route.backend() == "triton"


def test_switching_the_backend_forgets_the_planned_layouts(device):
    a, b = torch.randn(8, 16, device=device), torch.randn(16, 8, device=device)
    autokernel.matmul(a, b)
    assert plans._PLANS
    route.use("auto")
    assert not plans._PLANS


def test_the_table_interpolates_between_its_nearest_measurements():
    spec = gpus.detect_gpu(H100)
    table = route.CublasModel(H100, ((*route.point(1024, 1024, 1024, False), math.log(2.0)),
                                     (*route.point(4096, 4096, 4096, False), math.log(1.2)),
                                     (*route.point(1024, 1024, 1024, True), math.log(3.0))))
    again = route.CublasModel.from_json(table.to_json())
    assert again.points == tuple(tuple(round(v, 5) for v in p) for p in table.points)
    roof = route.roofline_us(1024, 1024, 1024, 2, spec)
    assert roof == pytest.approx(max(2 * 1024 ** 3 / 989.5e6, 2 * 3 * 1024 ** 2 / 3350e3))
    # at a measured point its own reading dominates; the epilogue keeps the two apart
    assert table.predict_us(1024, 1024, 1024, 2, False, spec) == pytest.approx(2.0 * roof, rel=0.01)
    assert table.predict_us(1024, 1024, 1024, 2, True, spec) == pytest.approx(3.0 * roof, rel=0.01)
    between = table.inefficiency(2048, 2048, 2048, False)
    assert math.log(1.2) < between < math.log(2.0)


@pytest.mark.parametrize("text, why", [("{", "Expecting"), ('{"schema": 9, "device": "x", "points": []}', "schema 9"),
                                       ('{"schema": 1, "device": "x", "points": [[1, 2]]}', "five finite")])
def test_a_broken_table_is_refused_in_one_line_naming_it(text, why):
    with pytest.raises(ValueError, match=f"t.json is not a cuBLAS table: .*{why}"):
        route.CublasModel.from_json(text, "t.json")


def test_the_shipped_tables_speak_for_the_gpus_of_their_architecture_only_their_own_first():
    def devices(name):
        return [t.device for t in route.cublas_models(name)]

    assert devices(H100) == [H100, "NVIDIA H200"]
    assert devices("NVIDIA H200") == ["NVIDIA H200", H100]
    assert devices("NVIDIA H200 NVL") == [H100, "NVIDIA H200"]  # none of its own: both carried
    assert devices("NVIDIA A100-SXM4-80GB") == devices("a GPU nobody knows") == []


def test_the_table_s_method_predicts_cublas_on_a_draw_left_out_of_it():
    """The shipped table's recipe (benchmarks/fit_cublas.py) on the recorded sweeps: built
    without one fresh draw, it predicts that draw's cuBLAS times within 15 % (RMS of the log)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fit_cublas

    results = ROOT / "benchmarks" / "results"
    held = results / "check_random_h100_27.jsonl"
    others = [str(p) for p in sorted(results.glob("check_random_h100_*.jsonl")) if p != held]
    table = fit_cublas.table_from(others + [str(results / "select_train_fit_h100.jsonl")])
    spec = gpus.detect_gpu(H100)
    rows = [r for r in fit_cublas.fs.read_rows([str(held)]) if r["config"] is None]
    assert len(rows) > 40
    errors = [math.log(table.predict_us(r["m"], r["n"], r["k"], 2, r["bias"] or r["activation"] != "none", spec)
                       / (r["gpu_ms"] * 1000)) for r in rows]
    assert math.sqrt(sum(e * e for e in errors) / len(errors)) < 0.15


def _pick(m, n, k, dtype=torch.float16, activation="none"):
    return best.pick(m, n, k, dtype, activation, False, "nt", device=H100, rank=True)


def test_auto_routes_where_cublas_is_predicted_faster_by_more_than_the_margin():
    found = _pick(1024, 2304, 768)
    triton_us = next(s.predicted_us for s in found.choice.ranked if s.config == found.config)
    roof = route.roofline_us(1024, 2304, 768, 2, gpus.detect_gpu(H100))
    assert route.MARGIN == 0.05
    for ratio, library in ((0.5, "cublas"), (0.94, "cublas"), (0.97, "triton"), (1.5, "triton")):
        table = route.CublasModel(H100, ((*route.point(1024, 2304, 768, False), math.log(ratio * triton_us / roof)),))
        where = route.decide(1024, 2304, 768, torch.float16, "none", False, H100, found, tables=(table,))
        assert where.library == library, (ratio, where)
        assert where.cublas_us == pytest.approx(ratio * triton_us, rel=1e-3)


def test_a_table_of_another_gpu_compares_the_two_libraries_where_cuBLAS_was_measured():
    """The pick's predicted time on the H100 (its model) against the H100 table's cuBLAS time
    sets the ratio; the H200's cuBLAS time is the pick's predicted time there over that ratio.
    With the H200's own table beside it, the prediction is the geometric mean of the two."""
    from autokernel import select

    h200 = "NVIDIA H200"
    found = best.pick(2048, 2304, 768, torch.bfloat16, "none", False, "nt", device=h200, rank=True)
    here = next(s.predicted_us for s in found.choice.ranked if s.config == found.config)
    there = select.predict_us(best.selector_model(H100), found.config, 2048, 2304, 768, torch.bfloat16,
                              tma=True, layout="nt")
    own, h100 = route.cublas_models(h200)
    cublas_there = h100.predict_us(2048, 2304, 768, 2, False, gpus.detect_gpu(H100))
    carried = route.decide(2048, 2304, 768, torch.bfloat16, "none", False, h200, found, "nt", tables=(h100,))
    assert carried.triton_us == here and there != here
    assert carried.cublas_us == pytest.approx(here * cublas_there / there, rel=1e-9)
    assert carried.library == ("cublas" if carried.cublas_us * (1 + route.MARGIN) < here else "triton")
    direct = own.predict_us(2048, 2304, 768, 2, False, gpus.detect_gpu(h200))
    alone = route.decide(2048, 2304, 768, torch.bfloat16, "none", False, h200, found, "nt", tables=(own,))
    assert alone.cublas_us == pytest.approx(direct, rel=1e-9) and direct != pytest.approx(carried.cublas_us, rel=1e-3)
    both = route.decide(2048, 2304, 768, torch.bfloat16, "none", False, h200, found, "nt")
    assert both.cublas_us == pytest.approx(math.sqrt(direct * carried.cublas_us), rel=1e-9)
    assert [d for d, _ in both.by_table] == [h200, H100]
    assert [us for _, us in both.by_table] == pytest.approx([direct, carried.cublas_us], rel=1e-9)


def test_a_bias_alone_costs_cublas_nothing_but_an_activation_does():
    """torch.addmm adds the bias in cuBLAS's own epilogue; an activation is a second kernel."""
    found = _pick(2048, 2304, 768)
    plain = route.decide(2048, 2304, 768, torch.float16, "none", False, H100, found, "nt")
    biased = route.decide(2048, 2304, 768, torch.float16, "none", True, H100, found, "nt")
    activated = route.decide(2048, 2304, 768, torch.float16, "relu", True, H100, found, "nt")
    assert plain.cublas_us == biased.cublas_us < activated.cublas_us


def test_auto_keeps_triton_where_only_a_s_rows_take_no_vectors():
    """GPT-2's dX (K = 50257, nn): cuBLAS's tables, of aligned problems, predict it fast;
    measured, it was slower there. With B's rows unvectorized too (nt) the tables decide."""
    h200 = "NVIDIA H200"
    found = best.pick(2048, 768, 50257, torch.float16, "none", False, "nn", device=h200, rank=True)
    where = route.decide(2048, 768, 50257, torch.float16, "none", False, h200, found, "nn")
    assert where.library == "triton" and where.cublas_us is None and "no 16-byte vectors" in where.reason
    both = best.pick(2048, 768, 50257, torch.float16, "none", False, "nt", device=h200, rank=True)
    assert route.decide(2048, 768, 50257, torch.float16, "none", False, h200, both, "nt").cublas_us is not None
    aligned = best.pick(2048, 768, 50304, torch.float16, "none", False, "nn", device=h200, rank=True)
    assert route.decide(2048, 768, 50304, torch.float16, "none", False, h200, aligned, "nn").cublas_us is not None


def test_auto_keeps_triton_where_only_c_s_rows_take_no_vectors():
    """GPT-2's vocabulary projection (N = 50257, nt): the tables, of aligned problems, predict
    cuBLAS faster; measured, it was 5x slower. With B row-major (nn) its rows are unaligned
    too and the tables decide, as they do where N is aligned."""
    h200 = "NVIDIA H200"
    for layout in ("nt", "tt"):
        found = best.pick(2048, 50257, 768, torch.float16, "none", False, layout, device=h200, rank=True)
        where = route.decide(2048, 50257, 768, torch.float16, "none", False, h200, found, layout)
        assert where.library == "triton" and where.cublas_us is None and "C's rows" in where.reason
    assert route.odd_output(30522, 2, "nt") and not route.odd_output(30528, 2, "nt")
    assert not route.odd_output(50257, 2, "nn") and not route.odd_output(50257, 2, "tn")
    for n, layout in ((50257, "nn"), (50304, "nt")):
        found = best.pick(2048, n, 768, torch.float16, "none", False, layout, device=h200, rank=True)
        assert route.decide(2048, n, 768, torch.float16, "none", False, h200, found, layout).cublas_us is not None


def test_auto_keeps_triton_where_a_transposed_view_s_rows_along_m_take_no_vectors():
    """BERT-large's vocabulary dW (dY^T of 30522 rows, tn): cuBLAS ran 2.4x slower; below
    SCALAR_ROWS_MIN_M rows, or with B's rows unaligned too, the tables decide."""
    from autokernel import select

    h200 = "NVIDIA H200"
    found = best.pick(30522, 1024, 2048, torch.bfloat16, "none", False, "tn", device=h200, rank=True)
    where = route.decide(30522, 1024, 2048, torch.bfloat16, "none", False, h200, found, "tn")
    assert where.library == "triton" and where.cublas_us is None and "transposed view" in where.reason
    for m, n, layout in ((select.SCALAR_ROWS_MIN_M - 1, 1024, "tn"), (30522, 1023, "tn"), (30528, 1024, "tn")):
        found = best.pick(m, n, 2048, torch.bfloat16, "none", False, layout, device=h200, rank=True)
        assert route.decide(m, n, 2048, torch.bfloat16, "none", False, h200, found, layout).cublas_us is not None, m


def test_auto_keeps_triton_for_float32_exact_entries_and_gpus_with_no_model():
    assert route.decide(64, 64, 64, torch.float32, "none", False, H100, _pick(64, 64, 64, torch.float32)).library == "triton"
    exact = best.load(best.SHIPPED_DIR / "nvidia-h100-80gb-hbm3.json").entries[0]
    found = best.pick(exact.M, exact.N, exact.K, torch.float16 if exact.dtype == "float16" else torch.bfloat16,
                      exact.activation, exact.bias, exact.layout, device=H100, rank=True)
    assert found.exact
    where = route.decide(exact.M, exact.N, exact.K, torch.float16, exact.activation, exact.bias, H100, found)
    assert (where.library, where.reason) == ("triton", "a tuned entry for exactly this problem runs as tuned")
    nothing = best.pick(512, 512, 512, torch.float16, device="a GPU nobody knows", rank=True)
    assert route.decide(512, 512, 512, torch.float16, "none", False, "a GPU nobody knows", nothing).library == "triton"


def _close(got, want, dtype):
    """Within the operands' rounding: the norm of the error over the reference's."""
    bound = 1e-2 if dtype == torch.float16 else 2e-2
    want = want.detach()
    assert float((got.detach().float() - want).norm() / want.norm()) < bound


def _reference(a, b, bias, act):
    z = a.float() @ b.float() + (0 if bias is None else bias.float())
    return autokernel.api.torch_activation(z, act, 0.01)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_routed_matmul_runs_torch_and_matches_the_reference(to_cublas, device, act, dtype):
    g = torch.Generator().manual_seed(5)
    a = torch.randn(37, 53, generator=g).to(device, dtype)
    w = torch.randn(29, 53, generator=g).to(device, dtype)  # b = w.t(): nn.Linear's layout
    bias = torch.randn(29, generator=g).to(device, torch.float32)  # a float32 bias on a half layer
    out = autokernel.matmul(a, w.t(), bias, act)
    plan = next(iter(plans._PLANS.values()))
    assert isinstance(plan.launch, route.TorchLaunch)
    _close(out, _reference(a, w.t(), bias, act), dtype)
    into = torch.empty(37, 29, device=device, dtype=dtype)
    assert autokernel.matmul(a.t().contiguous().t(), w.t(), None, act, out=into) is into
    _close(into, _reference(a, w.t(), None, act), dtype)


@pytest.mark.parametrize("act", ["gelu", "silu", "leaky_relu"])
def test_a_routed_linear_trains_as_torch_does(to_cublas, device, act):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 19, 40, generator=g).to(device, torch.bfloat16).requires_grad_()
    w = torch.randn(24, 40, generator=g).to(device, torch.bfloat16).requires_grad_()
    bias = torch.randn(24, generator=g).to(device, torch.bfloat16).requires_grad_()
    y = autokernel.linear(x, w, bias, act)
    assert any(isinstance(p.launch, route.TorchLaunch) for p in plans._PLANS.values())
    dy = torch.randn(y.shape, generator=g).to(device, torch.bfloat16)
    y.backward(dy)
    xr, wr, br = (t.detach().float().requires_grad_() for t in (x, w, bias))
    yr = autokernel.api.torch_activation(torch.nn.functional.linear(xr, wr, br), act, 0.01)
    yr.backward(dy.float())
    _close(y, yr, torch.bfloat16)
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (bias.grad, br.grad)):
        _close(got, want, torch.bfloat16)
    # no grad: linear passes weight for weight.t(); the launch restores the view
    with torch.no_grad():
        _close(autokernel.linear(x, w, bias, act), yr, torch.bfloat16)


def _grad_fn_names(y) -> set[str]:
    seen, todo = set(), [y.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is not None and type(fn).__name__ not in seen:
            seen.add(type(fn).__name__)
            todo += [f for f, _ in fn.next_functions]
    return seen


def test_a_layer_whose_three_gemms_all_route_trains_on_torchs_own_autograd(to_cublas, device):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 19, 40, generator=g).to(device, torch.float16).requires_grad_()
    w = torch.randn(24, 40, generator=g).to(device, torch.float16).requires_grad_()
    bias = torch.randn(24, generator=g).to(device, torch.float32).requires_grad_()  # a float32 bias
    y = autokernel.linear(x, w, bias, "gelu_tanh")
    names = _grad_fn_names(y)
    assert "LinearFunctionBackward" not in names and "GeluBackward0" in names, names
    dy = torch.randn(y.shape, generator=g).to(device, torch.float16)
    y.backward(dy)
    xr, wr, br = (t.detach().float().requires_grad_() for t in (x, w, bias))
    torch.nn.functional.gelu(torch.nn.functional.linear(xr, wr, br), approximate="tanh").backward(dy.float())
    assert bias.grad.dtype == torch.float32
    for got, want in ((x.grad, xr.grad), (w.grad, wr.grad), (bias.grad, br.grad)):
        _close(got, want, torch.float16)


def test_a_layer_with_a_gemm_left_on_triton_keeps_its_autograd_function(monkeypatch, device):
    forward_only = lambda m, n, k, dtype, act, bias, gpu, found, layout, **_: route.Route(  # noqa: E731
        "cublas" if layout == "nt" else "triton", 2.0, 1.0, "test")
    monkeypatch.setattr(route, "decide", forward_only)
    route.use("auto")
    x = torch.randn(19, 40, device=device, dtype=torch.float16, requires_grad=True)
    w = torch.randn(24, 40, device=device, dtype=torch.float16, requires_grad=True)
    y = autokernel.linear(x, w, None, "silu")
    assert "LinearFunctionBackward" in _grad_fn_names(y)  # dX and dW on the kernels, the forward on cuBLAS
    y.sum().backward()
    xr, wr = (t.detach().float().requires_grad_() for t in (x, w))
    torch.nn.functional.silu(xr @ wr.t()).sum().backward()
    _close(x.grad, xr.grad, torch.float16)
    _close(w.grad, wr.grad, torch.float16)
    # every GEMM routed, but a config given for one of them: the kernels' autograd
    monkeypatch.setattr(route, "decide", lambda *a, **k: route.Route("cublas", 2.0, 1.0, "test"))
    route.use("auto")
    cfg = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")
    y = autokernel.linear(x, w, None, "silu", dx_config=cfg)
    assert "LinearFunctionBackward" in _grad_fn_names(y)
    assert "LinearFunctionBackward" not in _grad_fn_names(autokernel.linear(x, w, None, "silu"))
    route.use("triton")
    assert "LinearFunctionBackward" in _grad_fn_names(autokernel.linear(x, w, None, "silu"))


def test_a_layer_runs_whole_on_torch_where_cublas_ties_on_the_gemms_not_routed(monkeypatch, device):
    """The forward routed, dX and dW predicted no slower on cuBLAS (routed at no margin, not
    at MARGIN): torch's linear runs the whole layer. Where one of them is predicted slower,
    or nothing routes at all, the layer keeps the kernels' autograd."""
    ties = {"nt": "cublas"}  # layout -> the library at MARGIN; at no margin every layout is in `level`
    level = set()

    def decide(m, n, k, dtype, act, bias, gpu, found, layout, margin=route.MARGIN, **_):
        library = ties.get(layout, "triton") if margin > 0 else ("cublas" if layout in level else "triton")
        return route.Route(library, 2.0, 1.0, "test")

    monkeypatch.setattr(route, "decide", decide)
    x = torch.randn(19, 40, device=device, dtype=torch.float16, requires_grad=True)
    w = torch.randn(24, 40, device=device, dtype=torch.float16, requires_grad=True)
    for tied, nothing_routed, whole in (({"nt", "nn", "tn"}, False, True), ({"nt", "nn"}, False, False),
                                        ({"nt", "nn", "tn"}, True, False)):
        level.clear()
        level.update(tied)
        ties.clear()
        ties.update({} if nothing_routed else {"nt": "cublas"})
        route.use("auto")
        y = autokernel.linear(x, w, None, "silu")
        assert ("LinearFunctionBackward" not in _grad_fn_names(y)) == whole, (tied, nothing_routed)
        x.grad = w.grad = None
        y.sum().backward()
        xr, wr = (t.detach().float().requires_grad_() for t in (x, w))
        torch.nn.functional.silu(xr @ wr.t()).sum().backward()
        _close(x.grad, xr.grad, torch.float16)
        _close(w.grad, wr.grad, torch.float16)
    ties.clear()  # a plan left on the kernels, cuBLAS tied: no tie where tuning on first use decides
    route.use("auto")
    plan = plans.gemm_plan(x, w.t(), None, "silu", 0.0, None)
    assert not plan.on_torch and plans.cublas_not_slower(plan, x, w.t(), None, "silu")
    monkeypatch.setattr(autotune, "enabled", lambda: True)
    assert not plans.cublas_not_slower(plan, x, w.t(), None, "silu")


def test_a_routed_square_layer_reads_its_weight_transposed(monkeypatch, device):
    """linear passes weight for weight.t() (they share data); a square weight has the view's
    shape, so only its strides tell the launch to restore the view. Checked with the forward
    routed alone (the kernels' autograd around it) and with nothing under grad."""
    monkeypatch.setattr(route, "decide", lambda m, n, k, dtype, act, bias, gpu, found, layout, **_: route.Route(
        "cublas" if layout == "nt" else "triton", 2.0, 1.0, "test"))
    route.use("auto")
    g = torch.Generator().manual_seed(3)
    x = torch.randn(21, 24, generator=g).to(device, torch.float16).requires_grad_()
    w = torch.randn(24, 24, generator=g).to(device, torch.float16).requires_grad_()  # square, not symmetric
    bias = torch.randn(24, generator=g).to(device, torch.float16)
    xr, wr = (t.detach().float().requires_grad_() for t in (x, w))
    want = torch.nn.functional.gelu(torch.nn.functional.linear(xr, wr, bias.float()), approximate="tanh")
    with torch.no_grad():
        _close(autokernel.linear(x, w, bias, "gelu_tanh"), want, torch.float16)
    y = autokernel.linear(x, w, bias, "gelu_tanh")
    assert any(isinstance(p.launch, route.TorchLaunch) for p in plans._PLANS.values())
    _close(y, want, torch.float16)
    dy = torch.randn(y.shape, generator=g).to(device, torch.float16)
    y.backward(dy)
    want.backward(dy.float())
    _close(x.grad, xr.grad, torch.float16)
    _close(w.grad, wr.grad, torch.float16)


def test_a_given_config_and_float32_never_route(to_cublas, device):
    cfg = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")
    a, b = torch.randn(16, 16, device=device, dtype=torch.float16), torch.randn(16, 16, device=device, dtype=torch.float16)
    autokernel.matmul(a, b, config=cfg)
    autokernel.matmul(a[:, ::2], b[::2])  # no unit stride: cuBLAS would copy
    assert not any(isinstance(p.launch, route.TorchLaunch) for p in plans._PLANS.values())


def test_explain_says_where_auto_runs_the_gemm(monkeypatch):
    runner = CliRunner()
    out = runner.invoke(app, ["explain", "--m", "1024", "--n", "2304", "--k", "768", "--device", "h100", "--top", "2"])
    assert out.exit_code == 0, out.output
    assert "cuBLAS (torch) is predicted" in out.output
    assert "would run (with AUTOKERNEL_BACKEND=auto) on" in out.output
    monkeypatch.setenv(route.ENV, "auto")
    data = __import__("json").loads(runner.invoke(app, ["explain", "--m", "4096", "--n", "4096", "--k", "4096",
                                                         "--device", "h100", "--json"]).output)
    assert data["route"]["backend"] == "auto"
    assert data["route"]["library"] in ("triton", "cublas") and data["route"]["cublas_us"] > 0
    by_table = data["route"]["cublas_by_table"]
    assert [t["table"] for t in by_table] == [H100, "NVIDIA H200"]
    assert data["route"]["cublas_us"] == pytest.approx(math.sqrt(by_table[0]["us"] * by_table[1]["us"]), rel=1e-9)
    assert "(the geometric mean of " in out.output and "NVIDIA H200's table, carried)" in out.output


@pytest.mark.parametrize("routed,tied,says", [
    (("nt", "nn", "tn"), (), "on torch's own linear and autograd: its three GEMMs all route to cuBLAS"),
    (("nn", "tn"), (), "on autokernel's autograd (forward on Triton, dX on cuBLAS, dW on cuBLAS)"),
    (("nn",), ("nt", "tn"), "on torch's own linear and autograd: cuBLAS is predicted faster on the forward and dW "
     "too, by less than 5%"),
    ((), ("nt", "nn", "tn"), "on autokernel's autograd (forward on Triton, dX on Triton, dW on Triton)")])
def test_explain_backward_says_what_runs_the_layer_under_auto(monkeypatch, routed, tied, says):
    """Routed GEMMs predicted 2x faster on cuBLAS; tied ones 1.02x (under the margin); others 2x slower."""
    monkeypatch.setattr(route, "decide", lambda m, n, k, dtype, act, bias, gpu, found, layout, **_: route.Route(
        "cublas" if layout in routed else "triton", 2.0, 1.0 if layout in routed else 1.96 if layout in tied else 4.0,
        "test"))
    out = CliRunner().invoke(app, ["explain", "--m", "256", "--n", "512", "--k", "384", "-a", "gelu", "--bias",
                                   "--device", "h100", "--top", "2", "--backward"])
    assert out.exit_code == 0, out.output
    assert f"the layer in training would run (with AUTOKERNEL_BACKEND=auto) {says}" in out.output, out.output
    monkeypatch.setenv(route.ENV, "auto")
    out = CliRunner().invoke(app, ["explain", "--m", "256", "--n", "512", "--k", "384", "--device", "h100",
                                   "--top", "2", "--backward"])
    assert f"the layer in training runs {says}" in out.output, out.output


def test_explain_shapes_tables_every_layer_of_a_file(monkeypatch, tmp_path):
    """Forward routed alone with dX and dW tied: torch's linear; dX and dW routed, the forward
    slower on cuBLAS: split; nothing routed: Triton (as whole_layer_on_torch decides)."""
    routes = {(256, 512, 384): {"nt": (2.0, 1.0), "nn": (2.0, 1.96), "tn": (2.0, 1.96)},
              (64, 512, 384): {"nt": (2.0, 4.0), "nn": (2.0, 1.0), "tn": (2.0, 1.0)},
              (8, 512, 384): {"nt": (2.0, 4.0), "nn": (2.0, 4.0), "tn": (2.0, 4.0)}}

    def decide(m, n, k, dtype, act, bias, gpu, found, layout, **_):
        layer = {"nt": (m, n, k), "nn": (m, k, n), "tn": (k, m, n)}[layout]
        triton_us, cublas_us = routes[layer][layout]
        return route.Route("cublas" if cublas_us * (1 + route.MARGIN) < triton_us else "triton",
                           triton_us, cublas_us, "test")

    monkeypatch.setattr(route, "decide", decide)
    shapes = tmp_path / "layers.csv"
    shapes.write_text("M,N,K,dtype,activation,bias,layout\n256,512,384,bfloat16,gelu,true,nt\n"
                      "64,512,384,float16,none,false,nt\n8,512,384,bfloat16,none,true,nt\n")
    runner = CliRunner()
    out = runner.invoke(app, ["explain", "--shapes", str(shapes), "--device", "h100", "--backward"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    for label, runs in (("256x512x384 bfloat16 nt bias gelu", "torch's linear"),
                        ("64x512x384 float16 nt", "autokernel, split"),
                        ("8x512x384 bfloat16 nt bias", "autokernel, Triton")):
        assert any(label in line and line.rstrip().endswith(runs) for line in lines), (label, out.output)
    assert "3 layers: 1 on torch's linear, 1 on autokernel, split, 1 on autokernel, Triton" in out.output
    data = __import__("json").loads(runner.invoke(app, ["explain", "--shapes", str(shapes), "--device", "h100",
                                                         "--backward", "--json"]).output)
    assert [d["layer"] for d in data] == ["torch's linear", "autokernel, split", "autokernel, Triton"]
    assert [[g["route"]["library"] for g in d["gemms"]] for d in data] == [
        ["cublas", "triton", "triton"], ["triton", "cublas", "cublas"], ["triton"] * 3]
    out = runner.invoke(app, ["explain", "--shapes", str(shapes), "--device", "h100"])  # the forward GEMMs alone
    assert out.exit_code == 0, out.output
    assert "3 problems: 2 on Triton, 1 on cuBLAS" in out.output and "SM rounds" in out.output
    data = __import__("json").loads(runner.invoke(app, ["explain", "--shapes", str(shapes), "--device", "h100",
                                                         "--json"]).output)
    for d in data:  # how each pick's tiles fill the SMs, as explain says it for one problem
        config, grid = d["gemms"][0]["config"], d["gemms"][0]["grid"]
        tiles = -(-d["problem"]["m"] // config["block_m"]) * -(-d["problem"]["n"] // config["block_n"])
        assert grid is None if config["stream_k"] else grid["tiles"] == tiles, d


@pytest.mark.parametrize("args,says", [
    ([], "missing --m, --n, --k: give --m, --n and --k, or --shapes FILE"),
    (["--m", "8"], "missing --n, --k"),
    (["--shapes", "SHAPES", "--m", "8"], "give --shapes or --m, --n and --k, not both"),
    (["--shapes", "MISSING"], "does not exist"),
    (["--shapes", "FP32"], "8x16x32 float32: the selector ranks float16 and bfloat16 problems"),
    (["--shapes", "NN", "--backward"], "--backward explains nn.Linear's layout (nt)")])
def test_explain_refuses_what_it_cannot_explain_in_one_line(tmp_path, args, says):
    files = {"SHAPES": "M,N,K\n8,16,32\n", "FP32": "M,N,K,dtype\n8,16,32,float32\n",
             "NN": "M,N,K,dtype,layout\n8,16,32,float16,nn\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = [str(tmp_path / a) if a in (*files, "MISSING") else a for a in args]
    out = CliRunner().invoke(app, ["explain", *args, "--device", "h100"])
    assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    assert says in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1, out.output


@pytest.mark.parametrize("cublas_fastest", [True, False])
def test_tuning_on_first_use_under_auto_races_cublas_with_the_configs(monkeypatch, device, cublas_fastest):
    """With first-use tuning on, ``auto`` times cuBLAS beside the selector's configs on the
    call's operands and keeps whichever ran fastest (the model is not asked); the kept winner
    serves later plans and ``autokernel cache info`` lists it."""
    from autokernel import autotune

    measured = []

    def measure(fns):  # cuBLAS is raced last
        for fn in fns:
            fn()
        measured.append(len(fns))
        ms = [2.0] * len(fns)
        ms[-1 if cublas_fastest else 0] = 1.0
        return ms

    monkeypatch.setattr(autotune, "_measure", measure)
    monkeypatch.setattr(route, "decide", lambda *a, **k: pytest.fail("the model decided where a race did"))
    autotune.enable(True)
    route.use("auto")
    try:
        a = torch.randn(24, 20, device=device, dtype=torch.float16)
        b = torch.randn(28, 20, device=device, dtype=torch.float16).t()
        out = autokernel.matmul(a, b, None, "silu")
        _close(out, _reference(a, b, None, "silu"), torch.float16)
        (plan,) = plans._PLANS.values()
        assert isinstance(plan.launch, route.TorchLaunch) == cublas_fastest
        (entry,) = autotune.entries()
        # K = 20 halves leave rows TMA cannot load on a GPU: the key says so there
        tma = "" if plans.tma_runs(a, b, out) else "/no-tma"
        assert (entry["config"] == autotune.CUBLAS) == cublas_fastest and entry["mode"] == f"nt{tma}/auto"
        plans.clear_launch_cache()
        autokernel.matmul(a, b, None, "silu")
        assert len(measured) == 1  # read back, not raced again
        shown = CliRunner().invoke(app, ["cache", "info", "--entries"]).stdout
        assert ("cublas" in shown) == cublas_fastest
    finally:
        autotune.enable(None)


def test_the_measuring_commands_time_the_triton_kernels_whatever_the_backend(monkeypatch):
    """bench --backward lets linear pick dX's and dW's configs: under auto those could go to
    cuBLAS and be reported as the Triton kernels'. The measuring commands pin the backend."""
    monkeypatch.setattr(route, "decide", lambda *a, **k: route.Route("cublas", 2.0, 1.0, "test"))
    monkeypatch.setenv(route.ENV, "auto")
    launched = []
    real = route.TorchLaunch.__call__
    monkeypatch.setattr(route.TorchLaunch, "__call__", lambda self, *a: launched.append(1) or real(self, *a))
    interpret = ["--interpret"] if autokernel.runtime.INTERPRETER else []
    for args in (["bench", *interpret, "--m", "24", "--n", "16", "--k", "32", "--backward", "-d", "bf16"],
                 ["validate", *interpret, "-s", "16"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert route.backend() == "triton"
        route.use(None)
    assert launched == []
    a = torch.randn(16, 16, dtype=torch.float16, device=autokernel.runtime.kernel_device())
    autokernel.matmul(a, a)
    assert launched == [1]  # the check above can see a routed launch
