"""Tuning on first use (autokernel.autotune): a shape is raced once, its winner kept for
every later call and process, never timed where timing would be recorded or traced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

import autokernel
import torch
from typer.testing import CliRunner

from autokernel import autotune, plans, timing
from autokernel.autotune import Key
from autokernel.config import ConfigError, KernelConfig
from tests.helpers import fp32_tol

ROOT = Path(__file__).resolve().parents[2]
A = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1, variant="grouped")
B = A.model_copy(update={"num_stages": 2})
C = A.model_copy(update={"group_m": 2})
KEY = Key.of(16, 16, 16, torch.float32)
REAL_MEASURE = autotune._measure


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """Each test starts with the switch unset, nothing in memory, and its own cache dir (conftest)."""
    monkeypatch.delenv(autotune.ENV, raising=False)
    autotune.enable(None)
    autotune._caches.clear()
    yield
    autotune.enable(None)
    autotune._caches.clear()


class Calls:
    """A make_call that counts what it is asked for and returns calls that take ``ms[config]``
    by the fake timer (``fake_timer``); ``broken``: configs whose make_call raises,
    ``failing``: configs whose call raises."""

    def __init__(self, ms: dict | None = None, broken=(), failing=()) -> None:
        self.asked: list[KernelConfig] = []
        self.ms = ms or {}
        self.broken, self.failing = set(broken), set(failing)

    def __call__(self, config: KernelConfig):
        self.asked.append(config)
        if config in self.broken:
            raise ConfigError(f"config {config.short()} needs more shared memory than the device allows")

        def call():
            if config in self.failing:
                raise RuntimeError("out of resources: shared memory")

        call.ms = self.ms.get(config, 1.0)
        return call


@pytest.fixture
def fake_timer(monkeypatch):
    """The race reads each call's ``ms`` without timing it (on the interpreter and the GPU
    alike); returns the list of calls timed."""
    timed = []

    def measure(fns):
        out = []
        for fn in fns:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 (as the real measure: the one line of what it raised)
                out.append(autotune._one_line(exc))
                continue
            timed.append(fn)
            out.append(float(fn.ms))
        return out

    monkeypatch.setattr(autotune, "_measure", measure)
    return timed


def _subprocess_env() -> dict:
    """This environment (conftest's cache dir, TRITON_INTERPRET) with this checkout's package first."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def test_enabled_by_the_environment_or_the_python_switch(monkeypatch):
    assert not autotune.enabled()
    monkeypatch.setenv(autotune.ENV, "1")
    assert autotune.enabled()  # read at each call
    monkeypatch.setenv(autotune.ENV, "0")
    assert not autotune.enabled()
    autotune.enable()
    assert autotune.enabled()  # the Python switch wins over the environment
    monkeypatch.setenv(autotune.ENV, "1")
    autotune.enable(False)
    assert not autotune.enabled()
    autotune.enable(None)
    assert autotune.enabled()  # back to the environment



def test_a_value_neither_on_nor_off_warns_once_and_stays_off(monkeypatch, device):
    """A typo (``AUTOKERNEL_AUTOTUNE=ture``, ``=2``) must not switch tuning off unsaid: one
    warning naming the value, off, and matmul runs."""
    import warnings

    monkeypatch.setattr(autotune, "_warned_values", set(), raising=False)
    monkeypatch.setenv(autotune.ENV, "Ture")
    with pytest.warns(RuntimeWarning, match=r"\$AUTOKERNEL_AUTOTUNE='Ture' is neither on .* nor off .*stays off"):
        assert not autotune.enabled()
    a = torch.ones(4, 4, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not autotune.enabled()  # once per value
        torch.testing.assert_close(autokernel.matmul(a, a), a @ a)
        for off in ("", "0", " False ", "no", "OFF"):
            monkeypatch.setenv(autotune.ENV, off)
            assert not autotune.enabled()


def test_first_use_races_keeps_and_a_second_call_and_process_read_the_winner(monkeypatch, device):
    import autokernel

    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(16, 16, generator=g).to(device) for _ in range(2))
    asked, timed = [], []

    def make_call(config):
        asked.append(config)
        out = torch.empty(16, 16, device=device)  # its own output, as first_use asks
        return lambda: autokernel.matmul(a, b, config=config, out=out)

    def spy(fns):
        timed.extend(fns)
        return REAL_MEASURE(fns)

    monkeypatch.setattr(autotune, "_measure", spy)
    winner = autotune.first_use(KEY, [A, B], make_call)
    assert winner in (A, B) and asked == [A, B] and len(timed) == 2
    entry = json.loads(autotune.cache().path.read_text())["entries"][KEY.text()]
    assert KernelConfig.from_dict(entry["config"]) == winner
    assert [KernelConfig.from_dict(r["config"]) for r in entry["raced"]] == [A, B]
    assert all(r["ms"] > 0 for r in entry["raced"])

    assert autotune.first_use(KEY, [A, B], make_call) == winner  # from memory
    autotune._caches.clear()
    assert autotune.first_use(tuple(vars(KEY).values()), [A, B], make_call) == winner  # from the file
    assert len(asked) == 2 and len(timed) == 2

    script = textwrap.dedent(f"""
        import json, torch
        from autokernel import autotune, timing
        from autokernel.config import KernelConfig
        asked = []
        autotune._measure = lambda fns: asked.append("timed")
        def make_call(config):
            asked.append(config)
            return lambda: None
        a = KernelConfig.model_validate_json({A.to_json()!r})
        b = KernelConfig.model_validate_json({B.to_json()!r})
        winner = autotune.first_use(autotune.Key.of(16, 16, 16, torch.float32), [a, b], make_call)
        print(json.dumps({{"winner": winner.model_dump() if winner else None, "asked": len(asked)}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=_subprocess_env(),
                          timeout=60)
    assert done.returncode == 0, done.stderr
    other = json.loads(done.stdout.strip().splitlines()[-1])
    assert other == {"winner": winner.model_dump(), "asked": 0}


def test_the_fastest_wins_ties_go_to_the_earlier_and_at_most_max_candidates_run(fake_timer):
    pool = [A.model_copy(update={"block_m": bm, "num_stages": s}) for bm in (16, 32, 64) for s in (1, 2, 3)]
    ms = {c: 2.0 for c in pool}
    ms[pool[4]] = ms[pool[6]] = 1.0
    ms[pool[8]] = 0.5  # the fastest, but ninth: not raced
    calls = Calls(ms)
    assert autotune.first_use(KEY, pool, calls) == pool[4]
    assert calls.asked == pool[:8] and len(fake_timer) == 8
    calls = Calls(ms)
    assert autotune.first_use(Key.of(16, 16, 16, "float16"), [A, A, B], calls, max_candidates=2) == A
    assert calls.asked == [A, B]  # duplicates count once


def test_a_candidate_that_fails_is_dropped_and_all_failing_keeps_nothing(fake_timer, monkeypatch):
    calls = Calls({A: 3.0, B: 1.0, C: 0.5}, broken=[B], failing=[C])
    assert autotune.first_use(KEY, [A, B, C], calls) == A
    raced = json.loads(autotune.cache().path.read_text())["entries"][KEY.text()]["raced"]
    assert [("ms" in r, r.get("error", "").split(":")[0]) for r in raced] == [
        (True, ""), (False, "ConfigError"), (False, "RuntimeError")]

    other = Key.of(32, 16, 16, torch.float32)
    calls = Calls(broken=[A], failing=[B])
    assert autotune.first_use(other, [A, B], calls) is None
    assert other.text() not in autotune.cache().entries()

    def failing_timer(*args, **kwargs):  # a candidate that runs once but not under the timer
        raise RuntimeError("timer failed")

    monkeypatch.setattr(autotune, "_measure", REAL_MEASURE)
    monkeypatch.setattr(timing, "time_fn", failing_timer)  # the interpreter's timer
    monkeypatch.setattr(timing, "race", failing_timer)  # the GPU's
    assert autotune.first_use(other, [A], Calls()) is None


def test_a_reading_of_zero_or_nan_is_no_reading(fake_timer):
    assert autotune.first_use(KEY, [A, B, C], Calls({A: 0.0, B: float("nan"), C: 2.0})) == C
    raced = json.loads(autotune.cache().path.read_text())["entries"][KEY.text()]["raced"]
    assert [r.get("error", "")[:10] for r in raced] == ["no reading", "no reading", ""]


def test_the_time_budget_stops_new_candidates(fake_timer):
    calls = Calls({A: 2.0, B: 1.0})
    assert autotune.first_use(KEY, [A, B, C], calls, budget_s=0.0) == A  # the first one always runs
    assert calls.asked == [A]


@pytest.mark.parametrize("where", ["compile", "capture", "a race"])
def test_no_timing_while_compiling_capturing_or_racing(where, fake_timer, monkeypatch):
    calls = Calls()
    if where == "compile":
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    elif where == "capture":
        monkeypatch.setattr(autotune, "_capturing", lambda: True)
    else:
        inner = []
        outer = Calls()

        def make_call(config):  # a call that resolves a config of its own, as matmul without one would
            inner.append(autotune.first_use(Key.of(64, 64, 64, "float16"), [A], calls))
            return outer(config)

        assert autotune.first_use(KEY, [A], make_call) == A
        assert inner == [None] and calls.asked == [] and outer.asked == [A]
        return
    assert autotune.first_use(KEY, [A, B], calls) is None
    assert calls.asked == [] and fake_timer == [] and not autotune.cache().path.exists()
    autotune.cache().put(KEY, B, [])
    assert autotune.first_use(KEY, [A, B], calls) == B  # a kept winner needs no timing
    assert calls.asked == []


def test_two_processes_writing_at_once_keep_both_sets_of_keys(tmp_path):
    go, ready = tmp_path / "go", tmp_path / "ready"
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from autokernel import autotune
        from autokernel.config import KernelConfig
        config = KernelConfig.model_validate_json({A.to_json()!r})
        store = autotune.cache()
        Path({str(ready)!r}).touch()
        while not Path({str(go)!r}).exists():  # both start writing at once
            time.sleep(0.002)
        for i in range(50):
            store.put(autotune.Key.of(16 + i, 16, 16, "float16", mode="child"), config, [])
    """)
    child = subprocess.Popen([sys.executable, "-c", script], env=_subprocess_env(), stderr=subprocess.PIPE, text=True)
    store = autotune.cache()
    while not ready.exists() and child.poll() is None:
        time.sleep(0.002)
    go.touch()
    for i in range(50):
        store.put(Key.of(16 + i, 16, 16, "float16", mode="parent"), B, [])
    assert child.wait(timeout=60) == 0, child.stderr.read()
    data = json.loads(store.path.read_text())  # valid JSON
    assert sorted(data["entries"]) == sorted(Key.of(16 + i, 16, 16, "float16", mode=who).text()
                                             for who in ("child", "parent") for i in range(50))
    assert not list(store.path.parent.glob("*.tmp"))


def _bad_files(head: dict, good: str) -> dict[str, bytes]:
    return {
        "torn": good[: len(good) // 2].encode(),
        "not JSON": b"\xff\xfe\x00 not json",
        "a list": b"[]",
        "another schema": json.dumps({**head, "schema": 99, "entries": {}}).encode(),
        "another GPU": good.replace(json.dumps(head["device"]), '"Another GPU 9000"').encode(),
        "another torch": good.replace(json.dumps(head["torch"]), '"1.0"').encode(),
        "a bad entry": good.replace('"block_m": 16', '"block_m": 17').encode(),
    }


@pytest.mark.parametrize("kind", ["torn", "not JSON", "a list", "another schema", "another GPU", "another torch",
                                  "a bad entry"])
def test_a_file_not_of_this_gpu_and_software_is_ignored_with_one_warning_and_rebuilt(kind):
    store = autotune.cache()
    store.put(KEY, A, [{"config": A.model_dump(), "ms": 1.0}])
    good = store.path.read_text()
    store.path.write_bytes(_bad_files(store.head, good)[kind])
    autotune._caches.clear()
    other = Key.of(32, 16, 16, torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = autotune.cache()
        assert store.get(KEY) is None and store.get(KEY) is None
        store.put(other, B, [])
        store.put(Key.of(64, 16, 16, torch.float32), B, [])
    assert len(caught) == 1 and store.path.name in str(caught[0].message), [str(w.message) for w in caught]
    assert "ignored, rebuilt at the next write" in str(caught[0].message)
    autotune._caches.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert autotune.cache().get(other) == B and autotune.cache().get(KEY) is None


def test_an_unwritable_cache_dir_warns_once_and_keeps_winners_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("AUTOKERNEL_CACHE_DIR", str(blocker / "cache"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        autotune.cache().put(KEY, A, [])
        autotune.cache().put(Key.of(32, 16, 16, torch.float32), B, [])
    assert len(caught) == 1 and "kept in memory only" in str(caught[0].message)
    assert autotune.cache().get(KEY) == A


def test_cache_info_lists_and_clear_deletes_the_first_use_files(monkeypatch):
    from tests.helpers import one_error_line

    from autokernel.cli import app
    from autokernel.records import Problem
    from autokernel.tuning.readings import ReadingCache, environment

    runner = CliRunner()
    store = autotune.cache()
    store.put(KEY, A, [{"config": A.model_dump(), "ms": 1.5}, {"config": B.model_dump(), "error": "E: x"}])
    old = store.path.with_name(store.path.name.replace(store.head["code"], "older"))
    old.write_text(store.path.read_text().replace(store.head["code"], "older"))  # another autokernel's
    readings = ReadingCache(store.path.parent, environment("d", "interpreter"))  # this install's: not stale
    readings.put("evaluate", Problem(16, 16, 16), [A], [{"ms": 1.0}])

    listed = json.loads(runner.invoke(app, ["cache", "info", "--json", "--entries"]).stdout)["files"]
    ours = {f["path"]: f for f in listed if f["kind"] == "autotune"}
    assert sorted((Path(p).name, f["stale"], f["entries"]) for p, f in ours.items()) == sorted(
        [(store.path.name, False, 1), (old.name, True, 1)])
    assert ours[str(store.path)]["env"]["device"] == store.head["device"]
    assert ours[str(store.path)]["winners"] == [{**vars(KEY), "config": A.model_dump(), "ms": 1.5, "raced": 1,
                                                 "failed": 1, "written": ours[str(store.path)]["last"]}]
    shown = runner.invoke(app, ["cache", "info", "--entries"]).stdout
    assert store.path.name in shown and "16x16x16 g1 w1 s1 grouped" in shown

    result = runner.invoke(app, ["cache", "clear", "--stale"])
    assert result.exit_code == 0 and not old.exists() and store.path.exists()
    result = runner.invoke(app, ["cache", "clear", "--kind", "autotune"])
    assert result.exit_code == 0 and "deleted 1 file(s), 1 kept entry (autotune)" in result.stderr
    assert not store.path.exists() and readings.path.exists()
    assert "autotune or all" in one_error_line(runner.invoke(app, ["cache", "clear", "--kind", "nope"]), 2)


def test_clear_deletes_the_files_and_forgets_the_winners(fake_timer):
    autotune.first_use(KEY, [A], Calls())
    path = autotune.cache().path
    assert autotune.clear() == [path] and not path.exists()
    calls = Calls()
    assert autotune.first_use(KEY, [B], calls) == B and calls.asked == [B]  # raced again
    assert [e["config"] for e in autotune.entries()] == [B]


def test_matmul_tunes_a_new_shape_on_first_use_and_reuses_the_winner(monkeypatch, device):
    """Switched on, matmul's first call of a shape races the candidates on its operands and
    keeps the winner; a later plan of the same shape (after clear_launch_cache) reads it."""
    from autokernel import api, best

    races = []
    real = autotune.first_use
    monkeypatch.setattr(autotune, "first_use", lambda *a, **kw: races.append(a[0]) or real(*a, **kw))
    autotune.enable(True)
    a, b = torch.randn(24, 20, device=device), torch.randn(20, 28, device=device)
    out = autokernel.matmul(a, b, None, "relu")
    tol = fp32_tol(1e-4)  # tf32 on the GPU
    torch.testing.assert_close(out, torch.relu(a.double() @ b.double()).float(), rtol=tol, atol=tol)
    (key,) = races
    assert (key.m, key.n, key.k, key.activation) == (24, 28, 20, "relu")
    winner = autotune.cache().get(key)
    expected = best.race_candidates(24, 28, 20, a.dtype, "relu", False, a.device, layout="nn")
    assert winner in expected
    api.clear_launch_cache()
    launched = []
    real_plan = plans._plan_kernel
    monkeypatch.setattr(plans, "_plan_kernel", lambda *args: launched.append(args[6]) or real_plan(*args))
    autokernel.matmul(a, b, None, "relu")
    assert launched == [winner]  # read back: no race launches a candidate again


def test_matmul_does_not_tune_when_switched_off(monkeypatch, device):
    called = []
    monkeypatch.setattr(autotune, "first_use", lambda *a, **kw: called.append(a))
    autokernel.matmul(torch.randn(8, 8, device=device), torch.randn(8, 8, device=device))
    assert called == []
