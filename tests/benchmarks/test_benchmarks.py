"""Smoke tests of the maintained entry points in benchmarks/: each runs, on the CPU, on a little data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autokernel.tuning.shapes import read_shapes
from tests.helpers import KINK_FLIP_SEED, tf32_rounded

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)


def test_broad_suite_writes_the_shipped_suite(tmp_path):
    proc = _run(str(BENCH / "broad_suite.py"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "configs" / "shapes" / "broad.csv").read_text()
    path = tmp_path / "broad.csv"
    path.write_text(proc.stdout)
    problems = read_shapes(path)
    assert len(problems) >= 150 and {p.dtype for p in problems} == {"float16", "bfloat16"}
    assert {1, 16, 64, 128, 512, 1024, 2048, 4096, 8192} <= {p.m for p in problems}


def test_fit_selector_cross_validates_and_writes_a_model(tmp_path):
    rows = [json.loads(line) for line in (BENCH / "results" / "select_sweep_h100.jsonl").read_text().splitlines()]
    few = [r for r in rows if r["index"] < 24]
    sweep = tmp_path / "sweep.jsonl"
    sweep.write_text("".join(json.dumps(r) + "\n" for r in few))
    out = tmp_path / "model.json"
    proc = _run(str(BENCH / "fit_selector.py"), str(sweep), "--folds", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "24 shapes, 2-fold cross-validation" in proc.stdout and "pick / best measured" in proc.stdout
    from autokernel import select

    model = select.Model.from_json(out.read_text())
    assert model.device == "NVIDIA H100 80GB HBM3" and len(model.constants) > 5
    # --add-to: a model keeps its own constants and errors and gains only the configs it lacks
    kept = dict(list(model.constants.items())[:3])
    base = tmp_path / "base.json"
    base.write_text(select.Model(model.device, model.programs, kept, {key: 0.5 for key in kept}).to_json())
    grown = tmp_path / "grown.json"
    proc = _run(str(BENCH / "fit_selector.py"), str(sweep), "--folds", "0", "--add-to", str(base), "--out", str(grown))
    assert proc.returncode == 0, proc.stderr
    merged = select.Model.from_json(grown.read_text())
    assert set(merged.constants) == set(model.constants)
    assert all(merged.constants[key] == c and merged.errors[key] == 0.5 for key, c in kept.items())
    assert all(merged.constants[key] == model.constants[key] for key in set(model.constants) - set(kept))
    # --fill-from: what the sweeps do not measure (configs they lack; the layout factor) comes
    # from another model, carried to the swept GPU
    key0 = next(iter(kept))
    fill = tmp_path / "fill.json"
    lacking = select.config_id(select.CANDIDATES[-1])
    assert lacking not in model.constants
    fill.write_text(select.Model(model.device, model.programs,
                                 {key0: replace(kept[key0], r=0.25), lacking: kept[key0]}, {lacking: 0.3}).to_json())
    filled_out = tmp_path / "filled.json"
    proc = _run(str(BENCH / "fit_selector.py"), str(sweep), "--folds", "0", "--fill-from", str(fill), "--out",
                str(filled_out))
    assert proc.returncode == 0, proc.stderr
    filled = select.Model.from_json(filled_out.read_text())
    assert filled.constants[key0] == replace(model.constants[key0], r=0.25)
    assert filled.constants[lacking] == kept[key0] and filled.errors[lacking] == 0.3
    assert set(filled.constants) == set(model.constants) | {lacking}
    # --l2-reread and --dram-tail: stored in the file; --add-to a file fitted with another value
    # is refused, in one line; a value out of range likewise
    for flag, attr, base_value, bad, says in (
            ("--l2-reread", "l2_reread", "1.0", "-0.5", "error: --l2-reread -0.5: a share between 0 and 1\n"),
            ("--dram-tail", "dram_tail", "0.0", "3", "error: --dram-tail 3.0: between 0 and 2\n")):
        out = tmp_path / f"{attr}.json"
        proc = _run(str(BENCH / "fit_selector.py"), str(sweep), "--folds", "0", flag, "0.5", "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        assert getattr(select.Model.from_json(out.read_text()), attr) == 0.5
        proc = _run(str(BENCH / "fit_selector.py"), str(sweep), "--folds", "0", flag, "0.5", "--add-to",
                    str(base), "--out", str(tmp_path / "mixed.json"))
        assert proc.returncode == 2 and f"fitted with {flag} {base_value}" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "mixed.json").exists()
        proc = _run(str(BENCH / "fit_selector.py"), str(sweep), "--folds", "0", flag, bad)
        assert proc.returncode == 2 and proc.stderr == says

def test_fuzz_runs_and_passes_on_the_interpreter():
    pytest.importorskip("triton")
    proc = _run(str(BENCH / "fuzz.py"), "--cases", "6", "--seed", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 failed" in proc.stdout and "edge cases" in proc.stdout, proc.stdout
    assert "PAD_MIN_FLOP 0" in proc.stdout  # the interpreter's tiny problems take the operand copies too


def test_fuzz_stops_at_its_time_budget_and_says_how_far_it_got():
    pytest.importorskip("triton")
    proc = _run(str(BENCH / "fuzz.py"), "--cases", "400", "--seed", "3", "--time-budget", "0.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("stopped after "))
    done, total = (int(w) for w in line.split(": ")[0].split()[2::2])
    assert 1 <= done < total == 400 + len(_fuzz_module().EDGE_CASES), line
    assert line.endswith("time budget of 0.5 s spent") and ", 0 failed" in proc.stdout
    for bad in ("0", "-3", "nan"):
        proc = _run(str(BENCH / "fuzz.py"), "--time-budget", bad)
        assert proc.returncode == 2 and "--time-budget must be a positive number" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_fuzz_routes_at_random_through_both_libraries(monkeypatch, capsys):
    """--route-at-random sends layouts to cuBLAS by a coin on any machine: the routed paths
    (plans on torch's GEMMs, linear layers run whole by torch's linear) pass the checks."""
    pytest.importorskip("triton")
    import torch

    from autokernel import api, autograd, plans, route

    fuzz = _fuzz_module()
    # what main sets for the run, restored after the test
    monkeypatch.setattr(route, "decide", route.decide)
    monkeypatch.setattr(plans, "PAD_MIN_FLOP", plans.PAD_MIN_FLOP)
    for flag in ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        monkeypatch.setattr(torch.backends.cuda.matmul, flag, getattr(torch.backends.cuda.matmul, flag))
    built = []
    real = plans._make_plan
    monkeypatch.setattr(plans, "_make_plan", lambda *a, **k: built.append(real(*a, **k)) or built[-1])
    whole = []
    real_whole = api.whole_layer_on_torch
    monkeypatch.setattr(api, "whole_layer_on_torch", lambda *a: whole.append(real_whole(*a)) or whole[-1])
    tied = []  # a GEMM kept on Triton, where cuBLAS ties
    real_tie = autograd.cublas_not_slower
    monkeypatch.setattr(autograd, "cublas_not_slower",
                        lambda plan, *a: tied.append(not plan.on_torch and real_tie(plan, *a)) or real_tie(plan, *a))
    try:
        assert fuzz.main(["--cases", "40", "--seed", "5", "--route-at-random"]) == 0
    finally:
        route.use(None)
    out = capsys.readouterr().out
    assert ", 0 failed" in out and "backend auto" in out, out
    routed = sum(p.on_torch for p in built)
    assert 0 < routed < len(built), (routed, len(built))
    assert True in whole and False in whole, whole  # layers routed whole and layers that are not
    assert True in tied, tied  # and layers run whole where the GEMMs left on Triton tie


def test_fuzz_ended_by_sigterm_prints_its_summary():
    pytest.importorskip("triton")
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(BENCH / "fuzz.py"), "--cases", "400", "--seed", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = proc.stdout.readline()  # printed once the handler is in place
        assert first.startswith("seed 3, "), first
        proc.send_signal(signal.SIGTERM)  # 400 interpreted cases take minutes: it is mid-run
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, first + out + err
    assert "stopped after " in out and ": interrupted" in out and " failed" in out, out
    assert "Traceback" not in err, err


def test_fit_cublas_builds_a_table_and_replays_the_auto_backend(tmp_path):
    held = str(BENCH / "results" / "check_random_h100_27.jsonl")
    fits = [str(BENCH / "results" / f"check_random_h100_{i}.jsonl") for i in (24, 25, 26)]
    out = tmp_path / "cublas.json"
    proc = _run(str(BENCH / "fit_cublas.py"), *fits, held, "--holdout", held, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "57 problems; cuBLAS predicted with RMS log error" in proc.stdout
    assert "torch / Triton pick" in proc.stdout and "routed to cuBLAS" in proc.stdout
    from autokernel import route

    table = route.CublasModel.from_json(out.read_text())
    assert table.device == "NVIDIA H100 80GB HBM3" and 150 < len(table.points) <= 207  # the three fitted draws


def test_route_check_needs_a_gpu():
    proc = _run(str(BENCH / "route_check.py"), "--shapes", str(ROOT / "configs" / "shapes" / "broad.csv"),
                "--out", os.devnull)
    assert proc.returncode == 2 and "GPU" in proc.stderr


def test_route_check_reads_each_table_s_choice_from_the_run_s_own_times(capsys):
    """The summary's per-table lines take torch's time where a table chose cuBLAS and the
    Triton pick's where it chose Triton: the two were timed side by side in the run."""
    sys.path.insert(0, str(BENCH))
    import route_check

    def rec(torch_ms, triton_ms, library, alone):
        return {"m": 64, "n": 64, "k": 64, "dtype": "float16", "layout": "nt", "activation": "none", "bias": False,
                "class": "mid", "library": library, "torch_ms": torch_ms, "triton_ms": triton_ms,
                "auto_ms": torch_ms if library == "cublas" else triton_ms, "library_by_table": alone}

    route_check.summarize([rec(1.0, 2.0, "cublas", {"A": "cublas", "B": "triton"}),
                           rec(1.0, 0.5, "triton", {"A": "cublas", "B": "triton"})])
    out = capsys.readouterr().out
    assert "  all tables: torch / choice 1.414, 1 routed, 0 more than 2 % slower than the Triton pick" in out
    assert "  A alone: torch / choice 1.000, 2 routed, 1 more than 2 % slower than the Triton pick" in out
    assert "  B alone: torch / choice 1.000, 0 routed, 0 more than 2 % slower than the Triton pick" in out


def test_select_sweep_needs_a_gpu():
    proc = _run(str(BENCH / "select_sweep.py"), "--out", os.devnull)
    assert proc.returncode == 2 and "GPU" in proc.stderr


def test_select_sweep_reads_its_configs_file_before_the_gpu(tmp_path):
    good = tmp_path / "configs.json"
    good.write_text(json.dumps([{"block_m": 128, "block_n": 128, "block_k": 64, "group_m": 8, "num_warps": 4,
                                 "num_stages": 6, "variant": "tma", "flatten": True}]))
    proc = _run(str(BENCH / "select_sweep.py"), "--out", os.devnull, "--configs", str(good), "--min-m", "65")
    assert proc.returncode == 2 and "GPU" in proc.stderr, proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"block_m": 100, "block_n": 128, "block_k": 64}]))
    proc = _run(str(BENCH / "select_sweep.py"), "--out", os.devnull, "--extra-configs", str(good))
    assert proc.returncode == 2 and "GPU" in proc.stderr, proc.stderr
    for flag in ("--configs", "--extra-configs"):
        for path in (bad, tmp_path / "missing.json"):
            proc = _run(str(BENCH / "select_sweep.py"), "--out", os.devnull, flag, str(path))
            assert proc.returncode == 2 and proc.stderr.startswith(f"error: {flag} {path}: "), proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_code_stats_counts_the_tree_and_a_revision(tmp_path):
    proc = _run(str(BENCH / "code_stats.py"), "--top", "3")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines if line and line.split()[0] in
            {"records", "kernels", "cli", "autokernel/", "tests/", "benchmarks/"}}
    assert set(rows) == {"records", "kernels", "cli", "autokernel/", "tests/", "benchmarks/"}
    files, n_lines = int(rows["autokernel/"][0]), int(rows["autokernel/"][1])
    assert files > 40 and n_lines > 5000
    assert int(rows["records"][1]) < n_lines
    largest = lines[lines.index("largest functions (lines), top 3:") + 1:][:3]
    assert len(largest) == 3 and all(line.split()[1].startswith("autokernel/") for line in largest)
    assert int(largest[0].split()[0]) >= int(largest[2].split()[0])
    head = _run(str(BENCH / "code_stats.py"), "--rev", "HEAD", "--top", "1")
    assert head.returncode == 0, head.stderr
    assert head.stdout.splitlines()[0] == lines[0]


def test_kernel_variants_runs_every_family_under_the_interpreter(tmp_path):
    out = tmp_path / "variants.jsonl"
    proc = _run(str(BENCH / "kernel_variants.py"), "--shapes", "16 16 16 float16", "--out", str(out), "--timeout", "200")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["family"] for r in rows} == {"base", "subtile", "ws", "flatten", "cublas"}
    assert all(r["status"] == "success" and r["ms"] > 0 for r in rows), [r for r in rows if r["status"] != "success"]
    assert "| 16 16 16 float16 | cublas | cuBLAS |" in proc.stdout


def test_tuner_quality_replays_the_recorded_sweep():
    proc = _run(str(BENCH / "tuner_quality.py"), str(ROOT / "tests" / "data" / "sweep_h100.csv"),
                "--seeds", "1", "--budget", "8", "--strategies", "grid,random")
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "x" in line.split("|")[1]]
    assert len(table) == 4 and table[0].startswith("| 4096x4096x4096 float16 | 570 |")
    assert all(len(line.split("|")) == 6 for line in table)  # problem, configs, grid, random


def test_launch_overhead_needs_a_gpu():
    proc = _run(str(BENCH / "launch_overhead.py"), "--sections", "host")
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr


def test_multi_gpu_compares_one_device_with_two(tmp_path):
    """The two-GPU measurement's script, run with two interpreter workers standing for GPUs."""
    out = tmp_path / "multi.json"
    proc = _run(str(BENCH / "multi_gpu.py"), "--cpu-workers", "2", "--size", "16", "--problems", "2",
                "--max-trials", "1", "--per-generation", "1", "--patience", "1", "--rounds", "1",
                "--strategy", "random", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["devices"] == 2 and len(result["problems"]) == 2
    assert result["one"]["devices"] == ["worker 0"] and result["many"]["devices"] == ["worker 0", "worker 1"]
    assert result["one"]["untuned"] == result["many"]["untuned"] == []
    assert result["one"]["trials"] >= 2 and result["many"]["trials"] >= 2 and result["speedup"] > 0
    assert [r["problem"] for r in result["race"]] == result["problems"]
    assert all(r["ratio"] is not None and r["ratio"] > 0 for r in result["race"])
    assert "2 devices" in proc.stdout and "raced" in proc.stdout
    # where the time went: per device, spans end to end from the start of the run, the
    # timing worker's phases among them; their sums printed as a table
    for run in ("one", "many"):
        spans, summary = result[run]["timeline"], result[run]["summary"]
        assert sorted(summary) == sorted(result[run]["devices"])
        for device in result[run]["devices"]:
            mine = [s for s in spans if s["device"] == device]
            assert mine[0]["start"] == 0 and all(a["end"] == b["start"] for a, b in zip(mine, mine[1:]))
            assert {"timing", "driver"} <= {s["kind"] for s in mine}
            assert sum(summary[device]["seconds"].values()) == pytest.approx(summary[device]["wall_s"])
    assert "busy" in proc.stdout and "worker 1" in proc.stdout.split("many:")[1]


def test_multi_gpu_refuses_one_device():
    proc = _run(str(BENCH / "multi_gpu.py"), "--cpu-workers", "1")
    assert proc.returncode == 2 and "two devices or more" in proc.stderr




def _fuzz_module():
    import importlib.util

    if "fuzz_bench" in sys.modules:
        return sys.modules["fuzz_bench"]
    spec = importlib.util.spec_from_file_location("fuzz_bench", BENCH / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_bench"] = module  # as an import would: its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def test_fuzz_huge_cases_pass_int32_offsets_on_every_kernel_path():
    """Each --huge problem has an operand or output past 2^31 elements, and the configs
    cover every kernel a GEMM can run on, and the operand copies; on the interpreter --huge
    refuses in one line."""
    pytest.importorskip("triton")
    from autokernel import knobs

    fuzz = _fuzz_module()
    for m, n, k, *_ in fuzz.HUGE_CASES:
        assert max(m * k, k * n, m * n) > 2**31
    kernels = {knobs.kernel_of(vars(c)) for *_, c in fuzz.HUGE_CASES if c is not None}
    assert kernels == {"grouped", "splitk", "streamk", "tma"}
    assert any(c is not None and c.variant == "tma" and c.stream_k for *_, c in fuzz.HUGE_CASES)
    from autokernel import plans  # and an operand copied into aligned rows past 2^31 elements
    assert any(plans.padding_for(m, n, k, dtype, "".join(hows))[0] and m * k > 2**31 and c is None
               for m, n, k, dtype, hows, _, _, c in fuzz.HUGE_CASES)
    proc = _run(str(BENCH / "fuzz.py"), "--huge")
    assert proc.returncode == 2 and proc.stderr.startswith("error: --huge needs a CUDA GPU"), proc.stderr


@pytest.mark.parametrize("act", ["relu", "leaky_relu"])
def test_fuzz_backward_takes_the_kink_side_of_the_forward(monkeypatch, act):
    """The kinked activations' reference gradient follows the kernel's forward across 0: a
    linear whose products round as TF32 does (the GPU's float32 path) puts a pre-activation
    near 0 on the other side of 0 than float32 does in this case, which is no failure; a
    wrong gradient still is one, and our kernels pass."""
    pytest.importorskip("triton")
    import torch

    import autokernel
    from autokernel.evaluate import reference_activation

    fuzz = _fuzz_module()
    ours = autokernel.linear
    cpu = torch.device("cpu")
    m, n, k = 7, 145, 1567

    def run(linear, case=(m, n, k, torch.float32, ("n", "n"), False, act, None)):
        monkeypatch.setattr(fuzz.autokernel, "linear", linear)
        return fuzz.run_backward(case, cpu, torch.Generator().manual_seed(KINK_FLIP_SEED), vary=False)

    def tf32_linear(x, w, b, activation, slope=0.01, config=None):
        z = tf32_rounded(x) @ tf32_rounded(w).t()
        return reference_activation(z if b is None else z + b, activation, slope)

    gen = torch.Generator().manual_seed(KINK_FLIP_SEED)  # the operands run_backward draws first
    x = fuzz.operand(m, k, "n", torch.float32, cpu, gen)
    w = fuzz.operand(n, k, "n", torch.float32, cpu, gen) / k ** 0.5
    assert ((x @ w.t() > 0) != (tf32_rounded(x) @ tf32_rounded(w).t() > 0)).any()
    assert run(tf32_linear)[0] == "ok"
    assert run(lambda x, w, b, activation, slope, config: tf32_linear(x, 1.5 * w, b, activation, slope))[0] == "FAIL"
    assert run(ours, (5, 33, 150, torch.float32, ("n", "t"), True, act, None))[0] == "ok"


def test_race_entries_judges_each_entry_with_its_twin_left_out_and_drops_the_slower(tmp_path, monkeypatch):
    """The races faked (GPU-only): an entry 1.10x faster than the pick without it is kept as
    faster, one within the margin as tied, one 0.90x is slower, raced again against the pick
    with every slower entry left out, and left out of the kept file; the shipped file is
    read, never changed."""
    monkeypatch.syspath_prepend(str(BENCH))
    import race_entries

    from autokernel import best, runtime

    monkeypatch.setattr(runtime, "device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(runtime, "shared_memory_limit", lambda: 232448)
    monkeypatch.delenv(best.CONFIG_ENV, raising=False)
    monkeypatch.setattr(race_entries.api, "tma_runs_for", lambda *a: True)
    shipped = best.SHIPPED_DIR / "nvidia-h100-80gb-hbm3.json"
    before = shipped.read_bytes()
    entries = json.loads(before)["entries"]
    left_out_seen = []
    real_pick_without = race_entries.pick_without

    def pick_without(p, data, left_out, name):
        left_out_seen.append(set(left_out))
        return real_pick_without(p, data, left_out, name)

    def race_entry(p, entry, without, seed):  # entry i: 1.10x, 1.01x, 0.90x the pick without it by i % 3
        i = seed - 3000
        gain = 1.10 if i % 3 == 0 else 1.01 if i % 3 == 1 else 0.90
        return {**p.to_dict(), "entry": entry.short(), "without": without.short(), "entry_us": 10.0,
                "without_us": 10.0 * gain, "torch_us": 10.0, "gain": gain, "ok": True, "without_config": without}

    monkeypatch.setattr(race_entries, "pick_without", pick_without)
    monkeypatch.setattr(race_entries, "race_entry", race_entry)
    best.clear_cache()
    try:
        assert race_entries.main(["--out", str(tmp_path / "o.jsonl"), "--write-kept", str(tmp_path / "kept.json")]) == 0
    finally:
        best.clear_cache()
    assert shipped.read_bytes() == before and best.SHIPPED_DIR == shipped.parent
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    first = [r for r in rows if r["round"] == 1]
    assert len(first) == len(entries)
    # an entry and its other-dtype twin are left out together
    assert all(i in s for i, s in enumerate(left_out_seen[:len(entries)]))
    assert any(len(s) == 2 for s in left_out_seen[:len(entries)])
    for i, r in enumerate(first):
        expected = "faster" if i % 3 == 0 else "tied" if i % 3 == 1 else "slower"
        assert r["verdict"] == ("tied" if r["without"] == r["entry"] else expected), r
    slower_first = {(r["m"], r["n"], r["k"], r["dtype"], r["activation"], r["layout"]) for r in first
                    if r["verdict"] == "slower"}
    again = [r for r in rows if r["round"] == 2]
    assert {(r["m"], r["n"], r["k"], r["dtype"], r["activation"], r["layout"]) for r in again} <= slower_first
    final = {}
    for r in rows:
        final[(r["m"], r["n"], r["k"], r["dtype"], r["activation"], r["bias"], r["layout"])] = r["verdict"]
    kept = json.loads((tmp_path / "kept.json").read_text())["entries"]
    assert kept == [e for e in entries if final[(e["M"], e["N"], e["K"], e["dtype"], e["activation"], e["bias"],
                                                 e["layout"])] != "slower"]
    assert 0 < len(kept) < len(entries)


def test_model_step_checks_its_arguments_and_needs_a_gpu():
    proc = _run(str(BENCH / "model_step.py"), "--out", os.devnull, "--models", "gpt5")
    assert proc.returncode == 2 and "unknown model 'gpt5'; known: gpt2" in proc.stderr
    proc = _run(str(BENCH / "model_step.py"), "--out", os.devnull, "--tokens", "4k")
    assert proc.returncode == 2 and "--tokens takes integers" in proc.stderr
    proc = _run(str(BENCH / "model_step.py"), "--out", os.devnull)
    assert proc.returncode == 2 and "GPU" in proc.stderr


def test_model_step_check_passes_our_layers_and_catches_an_untransposed_weight(monkeypatch):
    import copy

    import torch

    from autokernel import nn as aknn

    monkeypatch.syspath_prepend(str(BENCH))
    import model_step

    torch.manual_seed(1)
    base = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(24, 24), torch.nn.GELU()),
                                torch.nn.Sequential(torch.nn.Linear(24, 40))]).half()
    xs = [torch.randn(33, 24, dtype=torch.float16, requires_grad=True) for _ in range(2)]
    dys = [torch.randn(33, 24, dtype=torch.float16), torch.randn(33, 40, dtype=torch.float16)]
    reference = copy.deepcopy(base).float()
    ours = aknn.swap_linear(copy.deepcopy(base))
    errors = {"torch_max_err": model_step._errors(base, reference, xs, dys)[0],
              "triton_max_err": model_step._errors(ours, reference, xs, dys)[0]}
    assert errors["triton_max_err"] < 0.01 and model_step.wrong(errors) == []

    class Untransposed(torch.nn.Module):  # computes x W + b, the square layer's wrong answer
        def __init__(self, linear):
            super().__init__()
            self.weight, self.bias = linear.weight, linear.bias

        def forward(self, x):
            return torch.nn.functional.gelu(x @ self.weight + self.bias)

    broken = copy.deepcopy(base)
    broken[0] = Untransposed(broken[0][0])
    errors["auto_max_err"], errors["auto_worst_at"] = model_step._errors(broken, reference, xs, dys)
    assert model_step.wrong(errors) == ["auto"] and errors["auto_worst_at"].startswith("layer 0 ")


def test_model_step_counts_the_gemms_run_on_cublas_and_the_layers_run_whole(monkeypatch):
    """One layer split (its forward alone routed, dX and dW slower on cuBLAS), one whole by a
    tie (its forward routed, dX and dW tied): 1 + 3 GEMMs on cuBLAS, one layer whole."""
    import torch

    import autokernel
    from autokernel import plans, route

    monkeypatch.syspath_prepend(str(BENCH))
    import model_step

    tie_n = 24  # the layer whose dX and dW tie: its out_features

    def decide(m, n, k, dtype, act, bias, gpu, found, layout, margin=route.MARGIN, **_):
        tied = margin == 0 and tie_n in (m, n, k)
        return route.Route("cublas" if layout == "nt" or tied else "triton", 2.0, 1.0, "test")

    monkeypatch.setattr(route, "decide", decide)
    route.use("auto")
    try:
        plans.clear_launch_cache()
        x = torch.randn(19, 40, dtype=torch.float16, requires_grad=True)
        for out_features in (tie_n, 32):
            w = torch.randn(out_features, 40, dtype=torch.float16, requires_grad=True)
            autokernel.linear(x, w, None, "silu").sum().backward()
        assert model_step.on_cublas() == (4, 1)
    finally:
        route.use(None)


def test_a_filled_model_keeps_the_layout_factor_of_configs_timed_with_b_row_major(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import fit_selector
    from autokernel import select

    own, few, lacking = (select.config_id(c) for c in select.CANDIDATES[:3])
    device = "NVIDIA H100 80GB HBM3"
    model = select.Model(device, 132, {own: select.Constants(1.0, 0.01, 0.9, 2.0, 0.8, 0.1, 0.5),
                                       few: select.Constants(1.0, 0.01, 0.9, 2.0, 0.8, 0.2, 0.5)}, {own: 0.1, few: 0.1})
    base = tmp_path / "base.json"
    base.write_text(select.Model(device, 132, {own: select.Constants(2.0, 0.02, 0.8, 3.0, 0.7, -0.3, 0.4),
                                               few: select.Constants(2.0, 0.02, 0.8, 3.0, 0.7, -0.4, 0.4),
                                               lacking: select.Constants(2.0, 0.02, 0.8, 3.0, 0.7, -0.5, 0.4)},
                                  {lacking: 0.2}).to_json())

    def row(key, layout):
        return {"config": json.loads(key), "layout": layout}

    rows = ([row(own, "nn")] * fit_selector.ROW_MAJOR_MIN + [row(few, "tn")] * (fit_selector.ROW_MAJOR_MIN - 1)
            + [row(few, "nt")] * 50)
    out = fit_selector.filled(model, str(base), rows)
    assert out.constants[own] == model.constants[own]  # timed on enough nn problems: its own r
    assert out.constants[few].r == -0.4 and out.constants[few].a == 1.0  # too few: r from the other model
    assert out.constants[lacking].r == -0.5 and out.errors == {own: 0.1, few: 0.1, lacking: 0.2}


def test_fuzz_draws_every_variation():
    """Each departure from the plain call comes up within a short run, at about its rate:
    leaky_relu's slopes of both signs, zeroed rows, C as a view, a float32 bias, a transposed
    dY, a frozen operand, a second call after an update in place; other activations keep the
    default slope."""
    import torch

    fuzz = _fuzz_module()
    gen = torch.Generator().manual_seed(1)
    draws = [fuzz.variation("leaky_relu", 40, gen, torch.device("cpu")) for _ in range(240)]
    assert {v.slope for v in draws} == set(fuzz.SLOPES)
    zeroed = [v.zeroed for v in draws if v.zeroed is not None]
    assert 20 <= len(zeroed) <= 60 and all(len(z) == 10 and len(set(z.tolist())) == 10 for z in zeroed)
    assert {v.out for v in draws} == set("nts") and {v.dy for v in draws} == set("nt")
    assert {v.frozen for v in draws} == {"", "x", "w"} and 30 <= sum(v.bias_fp32 for v in draws) <= 90
    assert 30 <= sum(v.again for v in draws) <= 90 and 20 <= sum(v.batched for v in draws) <= 60
    assert not any(fuzz.variation("gelu", 7, gen, torch.device("cpu")).batched for _ in range(60))  # odd M
    assert {fuzz.variation("gelu", 40, gen, torch.device("cpu")).slope for _ in range(20)} == {0.01}
    assert str(fuzz.Variation()) == "" and "float32 bias" in str(fuzz.Variation(bias_fp32=True))


def test_fuzz_second_call_catches_results_kept_by_address(monkeypatch):
    """A matmul that keeps its result by the operands' addresses passes one call and fails the
    second, after the values changed in place; the real one passes both."""
    import torch

    fuzz = _fuzz_module()
    real = fuzz.autokernel.matmul
    kept = {}

    def keeping(a, b, bias=None, act=None, *, out, **kwargs):
        key = (a.data_ptr(), b.data_ptr())
        if key not in kept:
            kept[key] = real(a, b, bias, act, out=out, **kwargs).clone()
        out.copy_(kept[key])
        return out

    case = (24, 20, 16, torch.float16, ("n", "t"), True, "gelu", None)
    monkeypatch.setattr(fuzz, "variation", lambda *args: fuzz.Variation(again=True))
    assert fuzz.run_case(case, torch.device("cpu"), torch.Generator().manual_seed(0))[0] == "ok"
    monkeypatch.setattr(fuzz.autokernel, "matmul", keeping)
    status, detail = fuzz.run_case(case, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert status == "FAIL" and "(call 2)" in detail


def test_fuzz_backward_runs_the_forward_with_the_cases_config(monkeypatch):
    """The training forward (Z stored) takes the drawn config, so every kernel the configs
    reach also stores Z; a config that cannot is refused, not failed."""
    import torch

    from autokernel.candidates import _c

    fuzz = _fuzz_module()
    real, seen = fuzz.autokernel.linear, []
    monkeypatch.setattr(fuzz.autokernel, "linear", lambda *a, config=None, **kw: seen.append(config) or real(
        *a, config=config, **kw))
    config = _c(16, 32, 16, 8, 1, 2, split_k=2)
    case = (20, 24, 40, torch.float16, ("n", "t"), True, "silu", config)
    assert fuzz.run_backward(case, torch.device("cpu"), torch.Generator().manual_seed(0), vary=False)[0] == "ok"
    assert seen == [config]
