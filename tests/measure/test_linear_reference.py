"""The float32 reference of a training step's gradients, and the check built on it."""

from __future__ import annotations

import math

import pytest
import torch

from autokernel import api, runtime
from autokernel.evaluate import (evaluate_linear_training, gradient_terms, linear_reference, reference_activation,
                                 relative_error)
from autokernel.records import Problem
from tests.helpers import KINK_FLIP_SEED, tf32_rounded


def tf32_linear(x, w, b=None, activation="none", slope=0.01, **_):
    """act(x @ w.T + b) with products rounded as tensor cores round float32: a GPU's step."""
    z = tf32_rounded(x) @ tf32_rounded(w).t()
    return reference_activation(z if b is None else z + b, activation, slope)


@pytest.mark.parametrize("act", ["relu", "leaky_relu"])
def test_training_check_passes_a_tf32_step_across_the_kink(monkeypatch, act):
    """A step whose pre-activation lands across 0 from float32's (TF32 products) is within
    tolerance; the same check fails a wrong gradient."""
    problem = Problem(7, 145, 1567, "float32", act)
    monkeypatch.setattr(api, "linear", tf32_linear)
    trial = evaluate_linear_training(problem, seed=KINK_FLIP_SEED)
    assert trial.status == "success", trial.error

    def wrong(x, w, b=None, activation="none", slope=0.01, **_):
        return tf32_linear(x, 1.5 * w, b, activation, slope)

    monkeypatch.setattr(api, "linear", wrong)
    assert evaluate_linear_training(problem, seed=KINK_FLIP_SEED).status == "failed_correctness"


def test_linear_reference_is_autograd_away_from_the_kink():
    """Given the kernel's own output and no element near 0, the kink's side changes nothing:
    the gradients equal float32 autograd's, with a bias, for each activation and leaky_relu's
    slopes of either sign."""
    gen = torch.Generator().manual_seed(3)
    x, w, b, dy = (torch.randn(*s, generator=gen) for s in ((9, 20), (11, 20), (11,), (9, 11)))
    for act, slope in (("none", 0.01), ("relu", 0.01), ("leaky_relu", 0.01), ("leaky_relu", 0.0),
                       ("leaky_relu", -0.1), ("gelu", 0.01), ("silu", 0.01)):
        plain = linear_reference(x, w, b, dy, act, slope)
        sided = linear_reference(x, w, b, dy, act, slope, kernel_y=plain[0])  # a negative slope: y > 0 either side
        assert len(plain) == len(sided) == 4
        for p, s in zip(plain, sided):
            torch.testing.assert_close(p, s)


def test_a_gradient_whose_terms_cancel_is_judged_by_its_terms():
    """db over 5 bfloat16 rows whose dZ lie near silu's turning point (drawn by the fuzz):
    the sum is a quarter of its terms' root sum of squares, and torch's own bfloat16 step
    errs 6 % of it. Judged by the terms, torch's step is within 2 %."""
    x = torch.tensor([[-1.5078125], [-1.40625], [0.63671875], [-0.07470703125], [0.73046875]])
    w, b = torch.tensor([[-0.1796875]]), torch.tensor([-1.515625])
    dy = torch.tensor([[0.84375], [1.46875], [1.0078125], [-1.8828125], [0.9375]])
    xh, wh, bh = (t.bfloat16().requires_grad_() for t in (x, w, b))
    torch.nn.functional.silu(torch.nn.functional.linear(xh, wh, bh)).backward(dy.bfloat16())
    _, *want = linear_reference(x, w, b, dy, "silu")
    terms = gradient_terms(x, w, b, dy, "silu")
    assert relative_error(bh.grad, want[2]) > 0.05
    assert relative_error(bh.grad, want[2], terms[2]) < 0.02
    for got, ref, t in zip((xh.grad, wh.grad, bh.grad), want, terms):
        assert relative_error(got, ref, t) < 0.02


@pytest.mark.parametrize("fails", ["linear_reference", "gradient_terms"])
def test_a_reference_that_does_not_fit_is_a_failed_trial_not_a_crash(monkeypatch, fails):
    from autokernel import evaluate

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")

    monkeypatch.setattr(evaluate, fails, out_of_memory)
    trial = evaluate_linear_training(Problem(8, 16, 32, "float16", "gelu"))
    assert trial.status == "out_of_resources" and "out of memory" in trial.error


def test_a_smooth_derivative_is_taken_at_z_as_stored():
    """silu' near its zero (z = -1.247, stored in bfloat16 as -1.25) moves by 10 % of itself
    with that rounding; torch's own bfloat16 step takes it at the stored z, and so does the
    reference (float32 operands keep their z)."""
    x, w, b = torch.tensor([[1.0, 0.5]]), torch.tensor([[-1.2421875, 0.0]]), torch.tensor([-0.0048828125])
    dy = torch.tensor([[1.0]])
    xh, wh, bh = (t.bfloat16().requires_grad_() for t in (x, w, b))
    torch.nn.functional.silu(torch.nn.functional.linear(xh, wh, bh)).backward(dy.bfloat16())
    _, dx, dw, db = linear_reference(*(t.bfloat16() for t in (x, w, b, dy)), "silu")
    assert relative_error(bh.grad, db) < 1e-3 and relative_error(xh.grad, dx) < 1e-2
    z = torch.nn.functional.linear(x, w, b).requires_grad_()
    at_float_z = torch.autograd.grad(torch.nn.functional.silu(z), z)[0]
    assert relative_error(bh.grad, at_float_z[0]) > 0.08  # what the reference took before
    _, _, _, db32 = linear_reference(x, w, b, dy, "silu")
    torch.testing.assert_close(db32, at_float_z[0])


def test_gradient_terms_change_nothing_on_terms_of_random_sign():
    """Over 64 rows of random data each gradient sums to about its terms' scale, so the check
    stays as sharp: a dW that lost a quarter of its rows' terms still reads far off."""
    gen = torch.Generator().manual_seed(5)
    x, w, b, dy = (torch.randn(*s, generator=gen) for s in ((64, 40), (24, 40), (24,), (64, 24)))
    for act in ("none", "gelu", "silu"):
        _, *want = linear_reference(x, w, b, dy, act)
        terms = gradient_terms(x, w, b, dy, act)
        for ref, t in zip(want, terms):
            assert 0.5 < float(t.norm()) / float(ref.norm()) < 2.0
        _, dx, dw, db = linear_reference(x[16:], w, b, dy[16:], act)
        assert relative_error(dw, want[1], terms[1]) > 0.3
        assert math.isnan(relative_error(torch.full_like(dw, float("nan")), want[1], terms[1]))


@pytest.mark.parametrize("reading, reader, field", [("wall_training_trials", "wall_race", "wall_ms"),
                                                     ("race_training_trials", "race", "gpu_ms")])
def test_training_steps_are_timed_side_by_side(monkeypatch, reading, reader, field):
    """bench --backward's wall and GPU readings: each trial's own step (ours with the config
    it was checked with, torch's), one call each in one interleaved reading; none on the CPU."""
    from autokernel import evaluate

    read = getattr(evaluate, reading)
    problem = Problem(8, 16, 32, "float16", "relu", bias=True)
    torch_trial = evaluate_linear_training(problem, "torch_autograd")
    ours = evaluate_linear_training(problem, "triton_autograd")
    assert torch_trial.ok and ours.ok, (torch_trial.error, ours.error)
    runs = [(torch_trial, None), (ours, None)]
    if runtime.INTERPRETER:
        assert not read(problem, runs)  # no reading
        assert getattr(torch_trial, field) is None and getattr(ours, field) is None
    else:
        assert read(problem, runs)
        assert getattr(torch_trial, field) > 0 and getattr(ours, field) > 0
        setattr(torch_trial, field, None)
        setattr(ours, field, None)

    raced = []

    def fake_reader(calls):
        for call in calls:
            y, *grads = call()  # a whole step: the output and every gradient
            raced.append(len(grads))
        return [2.0, 1.5]

    monkeypatch.setattr(evaluate, "timing_label", lambda: evaluate.GPU)
    monkeypatch.setattr(evaluate, reader, fake_reader)
    assert read(problem, runs)
    assert raced == [3, 3] and (getattr(torch_trial, field), getattr(ours, field)) == (2.0, 1.5)
    other = "gpu_ms" if field == "wall_ms" else "wall_ms"
    assert getattr(torch_trial, other) is None and getattr(ours, other) is None  # the other reading's untouched
    failed = evaluate_linear_training(Problem(8, 16, 32, "float16"), "triton_autograd")
    failed.status = "failed_correctness"
    assert not read(problem, [(torch_trial, None), (failed, None)])
