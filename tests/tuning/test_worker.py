"""Worker evaluation: bad candidates (raise, os._exit, segfault, hang) become failed trials
and the run goes on; compile and timing phases; re-timing; Ctrl-C; the GPU-time reader."""

from __future__ import annotations

import ctypes
import functools
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from autokernel import runtime, timing
from autokernel.config import KernelConfig
from autokernel.evaluate import Trial, evaluate
from autokernel.history import is_retimed
from autokernel.records import Problem
from autokernel.tuning.evaluator import RETIMED, suspicious_pair
from autokernel.tuning.replay import ReplayEvaluator
from autokernel.tuning.timeline import PHASES, Timeline
from autokernel.tuning.worker import BATCH_LOST, NOT_COMPILED, CompilePool, WorkerError, WorkerEvaluator, task_device
from tests.helpers import BIG_SHAPE

pytestmark = pytest.mark.skipif(not runtime.INTERPRETER, reason="CPU tests: kernels run under the interpreter")

# Odd sizes, a transposed A, bias and activation: small enough for the interpreter.
PROBLEM = Problem(37, 29, 45, "float32", "relu", bias=True, layout="tn")
GOOD = KernelConfig(block_m=16, block_n=16, block_k=16, group_m=1, num_warps=1, num_stages=1)
TIMEOUT_S = 5.0  # a good candidate takes < 1 s: room for a loaded machine


class OutOfResources(Exception):
    """Named like Triton's: the status comes from the class name."""


class CompilationError(Exception):
    """Named like Triton's."""


# group_m picks how a test candidate misbehaves (GOOD has group_m=1).
BEHAVIOUR = {2: "raise", 3: "out_of_resources", 4: "exit", 5: "segfault", 6: "hang", 7: "compile_error"}


def candidate(behaviour: str) -> KernelConfig:
    code = next(c for c, b in BEHAVIOUR.items() if b == behaviour)
    return GOOD.model_copy(update={"group_m": code})


HANGING_MARKER = "AUTOKERNEL_TEST_HANGING"
"""Where a hanging candidate marks that it has begun (a path in the environment, if set)."""


def misbehave(config: KernelConfig) -> None:
    """Do what the config's group_m asks; return for a good one."""
    what = BEHAVIOUR.get(config.group_m)
    if what == "raise":
        raise ValueError("a bad candidate")
    if what == "out_of_resources":
        raise OutOfResources("out of resource: shared memory, Required: 999999")
    if what == "compile_error":
        raise CompilationError("at 1:2: a bad candidate")
    if what == "exit":
        os._exit(1)
    if what == "segfault":
        ctypes.string_at(0)
    if what == "hang":
        if marker := os.environ.get(HANGING_MARKER):
            mark_begun(Path(marker))  # the test sees that this candidate is under way, and where
        time.sleep(600)


def mark_begun(marker: Path) -> None:
    """Write this process's pid to ``marker`` whole (written aside, then renamed)."""
    aside = marker.with_name(f"{marker.name}.{os.getpid()}")
    aside.write_text(str(os.getpid()))
    os.replace(aside, marker)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a child of this process that is not yet reaped (killed and joined: gone)."""
    return any(p.pid == pid for p in multiprocessing.active_children())


def flaky_evaluate(problem: Problem, config: KernelConfig) -> Trial:
    """The timing worker's task: misbehave, or really evaluate."""
    misbehave(config)
    return evaluate(problem, config)


def flaky_compile(problem: Problem, config: KernelConfig) -> Trial | None:
    """The compile worker's task: misbehave, or pass the candidate on."""
    misbehave(config)
    return None


def uncompiled(problem: Problem, config: KernelConfig) -> str:
    """The probe's task when nothing is in Triton's cache: every candidate needs a compile worker."""
    return NOT_COMPILED


def cached_unless_staged(problem: Problem, config: KernelConfig) -> str | None:
    """The probe's task where the candidates with num_stages 1 are cached: misbehave, or
    launch; the others need compiling."""
    if config.num_stages != 1:
        return NOT_COMPILED
    misbehave(config)
    return None


def refusing_compile(problem: Problem, config: KernelConfig) -> Trial:
    """A compile worker's task that marks every candidate it sees, by failing it."""
    return Trial(problem, config, "compile_error", error="seen by a compile worker")


def batch_race(problem: Problem, configs) -> list[Trial]:
    """A race task: misbehave for any config that asks, else one trial per config, each
    noting the size of the batch it was timed in."""
    for config in configs:
        misbehave(config)
    return [Trial(problem, c, "success", ms=1.0 + i, timing="interpreter", note=f"batch of {len(configs)}")
            for i, c in enumerate(configs)]


def test_retime_times_its_configs_together_in_one_task():
    configs = [GOOD, GOOD.model_copy(update={"num_stages": 2}), GOOD.model_copy(update={"num_warps": 2})]
    seen: list[Trial] = []
    with WorkerEvaluator(evaluate_fn=flaky_evaluate, race_fn=batch_race, timeout_s=TIMEOUT_S, spare=False) as ev:
        trials = ev.retime(PROBLEM, configs, on_trial=seen.append)
    assert seen == trials and [t.config for t in trials] == configs
    assert [t.note for t in trials] == [f"batch of 3; {RETIMED}"] * 3
    assert [t.ms for t in trials] == [1.0, 2.0, 3.0]


def test_a_race_that_kills_its_worker_fails_every_config_and_the_run_goes_on():
    configs = [GOOD, candidate("exit")]
    with WorkerEvaluator(evaluate_fn=flaky_evaluate, race_fn=batch_race, timeout_s=TIMEOUT_S, spare=False) as ev:
        lost = ev.retime(PROBLEM, configs)
        hung = ev.retime(PROBLEM, [GOOD, candidate("hang")])
        after = ev.evaluate(PROBLEM, [GOOD])
    assert [t.config for t in lost] == configs
    assert [t.status for t in lost] == ["runtime_error", "runtime_error"]
    assert all("timing worker died (exit code 1)" in t.error and t.note == BATCH_LOST for t in lost)
    assert [t.status for t in hung] == ["timeout", "timeout"]
    assert not any(is_retimed(t.note) for t in lost + hung)  # no config's reading: it supersedes none
    assert f"no result within {2 * TIMEOUT_S:g} s" in hung[0].error  # the batch's limit: per config
    assert after[0].status == "success" and after[0].rel_error <= 1e-4


def test_bad_candidates_become_failed_trials_and_the_run_goes_on():
    configs = [GOOD, candidate("raise"), candidate("out_of_resources"), candidate("exit"), GOOD,
               candidate("segfault"), candidate("hang"), GOOD]
    seen: list[Trial] = []
    with WorkerEvaluator(evaluate_fn=flaky_evaluate, timeout_s=TIMEOUT_S) as evaluator:
        trials = evaluator.evaluate(PROBLEM, configs, on_trial=seen.append)
    assert seen == trials  # every trial, in order, as it became final
    assert [t.config for t in trials] == configs
    assert [t.status for t in trials] == ["success", "runtime_error", "out_of_resources", "runtime_error",
                                          "success", "runtime_error", "timeout", "success"]
    errors = [t.error for t in trials]
    assert errors[1] == "ValueError: a bad candidate"
    assert errors[2].startswith("OutOfResources: out of resource")
    assert "timing worker died (exit code 1)" in errors[3]
    assert "timing worker died (killed by SIGSEGV)" in errors[5]
    assert f"no result within {TIMEOUT_S:g} s" in errors[6]
    for t in (trials[0], trials[4], trials[7]):  # the good ones, before and after each restart
        assert t.error is None and t.rel_error <= 1e-4
        assert t.ms > 0 and t.timing == "interpreter" and t.gpu_ms is None


def test_compile_phase_records_failures_and_only_survivors_are_timed():
    """The GPU's two phases, driven on the CPU. A compile failure that went on to the
    timing worker would be reported twice."""
    configs = [GOOD, candidate("compile_error"), candidate("exit"), GOOD]
    seen: list[Trial] = []
    with WorkerEvaluator(evaluate_fn=flaky_evaluate, compile_fn=flaky_compile, probe_fn=uncompiled,
                         compile_workers=2, spare=False) as evaluator:
        trials = evaluator.evaluate(PROBLEM, configs, on_trial=seen.append)
        assert set(evaluator.phase_s) - {"start"} == {"probe", "compile", "timing"}
    assert [t.status for t in trials] == ["success", "compile_error", "compile_error", "success"]
    assert trials[1].error == "CompilationError: at 1:2: a bad candidate"
    assert "compile worker died (exit code 1)" in trials[2].error
    # Each candidate is reported once, as its compile fails or as it is timed once compiled.
    assert len(seen) == len(configs)
    assert sorted(map(id, seen)) == sorted(map(id, trials))
    assert all(t.rel_error <= 1e-4 for t in (trials[0], trials[3]))


class StartGate:
    """A slow start for a worker: unpickled there with its task functions, before the
    worker says it is up, it waits until the file ``path`` exists (as a slow import of
    torch would), then goes on, or with ``die`` exits."""

    def __init__(self, path: Path, die: bool = False) -> None:
        self.path, self.die = str(path), die

    def __reduce__(self):
        return _pass_gate, (self.path, self.die)


def _pass_gate(path: str, die: bool) -> StartGate:
    while not os.path.exists(path):
        time.sleep(0.02)
    if die:
        os._exit(3)
    return StartGate(Path(path), die)


def gated_evaluate(gate: StartGate, problem: Problem, config: KernelConfig) -> Trial:
    """flaky_evaluate in a timing worker whose start waits for ``gate``."""
    return flaky_evaluate(problem, config)


def noted_compile(problem: Problem, config: KernelConfig) -> Trial | None:
    """A compile worker's task: note the config's block_k in COMPILE_LOG, then fail a
    candidate that asks for a compile error or to exit; the others pass on to timing."""
    with open(os.environ[COMPILE_LOG], "a") as f:
        f.write(f"{config.block_k}\n")
    if BEHAVIOUR.get(config.group_m) in ("compile_error", "exit"):
        misbehave(config)
    return None


def wait_for(condition, within_s: float = 120.0) -> bool:
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_a_batch_compiles_while_the_timing_worker_starts(tmp_path, monkeypatch):
    """A started compile pool, a timing worker still starting: the batch goes to the compile
    workers at once, unprobed, and the timing worker is waited for ("start") once the first
    candidate is compiled. The trials, and the order on_trial hears them in, are those of a
    batch that comes once the timing worker is up (probed, then compiled); the phases follow
    one another, so the timeline cuts none of them short."""
    gate = tmp_path / "gate"
    log = tmp_path / "compiles"
    monkeypatch.setenv(COMPILE_LOG, str(log))
    configs = [GOOD, candidate("compile_error"), GOOD.model_copy(update={"block_k": 32}), candidate("raise"),
               candidate("exit").model_copy(update={"block_k": 64})]
    timeline = Timeline()
    pool = CompilePool(1, compile_fn=noted_compile)  # one worker: the candidates compile in the order given
    evaluator = WorkerEvaluator(evaluate_fn=functools.partial(gated_evaluate, StartGate(gate)), probe_fn=uncompiled,
                                compile_pool=pool, spare=False, timeout_s=60, on_phase=timeline.recorder("GPU 0"))
    seen: list[Trial] = []
    first: list = []
    try:
        pool.start(1)
        evaluator.start()

        def tune() -> None:
            with timeline.job("GPU 0", "first"):
                first.append(evaluator.evaluate(PROBLEM, configs, on_trial=seen.append))

        thread = threading.Thread(target=tune)
        thread.start()
        assert wait_for(lambda: log.exists() and len(log.read_text().split()) == len(configs))
        assert thread.is_alive() and seen == []  # the first compiled waits for the timing worker, the rest behind it
        gate.touch()
        thread.join(120)
        assert first, "the batch did not finish"
        phases = dict(evaluator.phase_s)
        again: list[Trial] = []
        with timeline.job("GPU 0", "second"):
            second = evaluator.evaluate(PROBLEM, configs, on_trial=again.append)
        phases_again = dict(evaluator.phase_s)
    finally:
        evaluator.close()
        pool.close()
    trials = first[0]
    assert [t.status for t in trials] == ["success", "compile_error", "success", "runtime_error", "compile_error"]
    assert trials[3].error == "ValueError: a bad candidate" and "compile worker died (exit code 1)" in trials[4].error
    assert log.read_text().split() == ["16", "16", "32", "16", "64"] * 2  # each batch compiled whole, once
    assert set(phases) == {"compile", "start", "timing"} and phases["start"] > 0
    assert set(phases_again) == {"probe", "compile", "timing"}
    outcome = lambda ts: [(t.config, t.status, t.error) for t in ts]  # noqa: E731
    assert outcome(second) == outcome(trials) and outcome(again) == outcome(seen)
    assert seen == trials and again == second  # on_trial: the order given, as each compiled
    spans = [s for s in timeline.spans() if s.device == "GPU 0"]
    kinds = {job: [s.kind for s in spans if s.problem == job and s.kind in PHASES] for job in ("first", "second")}
    assert kinds["first"][:3] == ["compile", "start", "timing"] and kinds["first"].count("start") == 1
    assert "probe" not in kinds["first"] and kinds["second"][0] == "probe" and "start" not in kinds["second"]
    for kind in ("compile", "start", "timing", "probe"):  # no phase overlapped another: none was cut
        whole = (phases.get(kind, 0.0) + phases_again.get(kind, 0.0))
        assert sum(s.seconds for s in spans if s.kind == kind) == pytest.approx(whole, abs=1e-6)


def test_a_timing_worker_that_dies_starting_while_its_batch_compiles_fails_the_call(tmp_path, monkeypatch):
    """As when the batch waited for it: WorkerError, and the shared pool stays open."""
    gate = tmp_path / "gate"
    gate.touch()
    monkeypatch.setenv(COMPILE_LOG, str(tmp_path / "compiles"))
    pool = CompilePool(1, compile_fn=noted_compile)
    evaluator = WorkerEvaluator(evaluate_fn=functools.partial(gated_evaluate, StartGate(gate, die=True)),
                                probe_fn=uncompiled, compile_pool=pool, spare=False)
    try:
        pool.start(1)
        with pytest.raises(WorkerError, match="timing worker died while starting"):
            evaluator.evaluate(PROBLEM, [GOOD])
        results: dict = {}
        pool.run([(0, PROBLEM, candidate("compile_error"))], TIMEOUT_S, results.__setitem__)
        assert results[0].status == "compile_error"
    finally:
        evaluator.close()
        pool.close()


def compile_workers_alive(within_s: float = 0.0) -> list:
    """The compile workers alive now; with ``within_s``, as soon as none is or that many
    seconds from now (a closed pool leaves its workers to exit in the background)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in multiprocessing.active_children() if p.name == "autokernel-compile"]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_only_candidates_missing_from_the_cache_go_to_compile_workers():
    """The probe (in the timing worker) launches the cached candidates itself; a failure
    there is final; the rest go to compile workers, as many as they need."""
    staged = GOOD.model_copy(update={"num_stages": 2})
    configs = [GOOD, staged, candidate("out_of_resources"), GOOD.model_copy(update={"block_k": 32})]
    seen: list[Trial] = []
    with WorkerEvaluator(evaluate_fn=flaky_evaluate, compile_fn=refusing_compile, probe_fn=cached_unless_staged,
                         compile_workers=4, spare=False) as evaluator:
        trials = evaluator.evaluate(PROBLEM, configs, on_trial=seen.append)
        assert len(compile_workers_alive()) == 1  # one candidate to compile: one worker, not four
    assert [t.status for t in trials] == ["success", "compile_error", "out_of_resources", "success"]
    assert trials[1].error == "seen by a compile worker"
    assert trials[2].error.startswith("OutOfResources")
    assert len(seen) == 4 and seen[:2] == [trials[2], trials[1]]  # the probe's and compile phase's failures first


def test_a_rerun_whose_candidates_are_all_cached_starts_no_compile_worker():
    configs = [GOOD, GOOD.model_copy(update={"block_k": 32})]
    with WorkerEvaluator(compile_fn=refusing_compile, probe_fn=cached_unless_staged, compile_workers=4,
                         spare=False) as evaluator:
        evaluator.start()  # the timing worker only
        trials = evaluator.evaluate(PROBLEM, configs)
        assert set(evaluator.phase_s) - {"start"} == {"probe", "timing"}
        assert compile_workers_alive(within_s=10) == []
    assert [t.status for t in trials] == ["success", "success"]
    assert all(t.rel_error <= 1e-4 for t in trials)


def device_noting_compile(problem: Problem, config: KernelConfig) -> Trial | None:
    """A shared compile worker's task: misbehave, else fail the candidate with a note of
    the GPU it was launched on and of the worker (its pid); one with num_stages 2 takes two
    seconds (and marks that it has begun, as a hanging one does)."""
    misbehave(config)
    if config.num_stages == 2:
        if marker := os.environ.get(HANGING_MARKER):
            mark_begun(Path(marker))
        time.sleep(2.0)
    return Trial(problem, config, "compile_error", error=f"device {task_device()} pid {os.getpid()}")


COMPILE_LOG = "AUTOKERNEL_TEST_COMPILE_LOG"


def logged_compile(problem: Problem, config: KernelConfig) -> Trial | None:
    """A compile worker's task that takes a second and logs the problem it compiled for;
    one with num_stages 2 fails."""
    with open(os.environ[COMPILE_LOG], "a") as f:
        f.write(f"{problem.m} {config.block_k} {config.num_stages}\n")
    time.sleep(1.0)
    return Trial(problem, config, "compile_error", error="bad") if config.num_stages == 2 else None


def test_one_compile_serves_every_candidate_that_compiles_to_the_same_kernel(tmp_path, monkeypatch):
    """Two GPUs asking at once for the same configs on problems that compile alike (M 1024
    and 2048): each config compiles once and both batches hear it compiled. A config whose
    compile fails is compiled again for the other batch, which gets its own failure."""
    log = tmp_path / "compiles"
    monkeypatch.setenv(COMPILE_LOG, str(log))
    failing = GOOD.model_copy(update={"num_stages": 2})
    configs = [GOOD.model_copy(update={"block_k": bk}) for bk in (16, 32)] + [failing]
    problems = [Problem(1024, 256, 256), Problem(2048, 256, 256)]
    pool = CompilePool(3, compile_fn=logged_compile)
    results: dict[int, dict[int, Trial | None]] = {0: {}, 1: {}}
    go = threading.Barrier(2)
    try:
        pool.start(3)

        def ask(d: int) -> None:
            go.wait()
            tasks = [(i, problems[d], c) for i, c in enumerate(configs)]
            pool.run(tasks, 60, lambda i, r: results[d].__setitem__(i, r), device=d)

        threads = [threading.Thread(target=ask, args=(d,)) for d in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        pool.close()
    for d in (0, 1):
        assert results[d][0] is None and results[d][1] is None
        assert results[d][2].status == "compile_error" and results[d][2].problem == problems[d]
    compiled = sorted(" ".join(line.split()[1:]) for line in log.read_text().splitlines())
    assert compiled == ["16 1", "16 2", "16 2", "32 1"], log.read_text()  # the failing one twice


def test_two_evaluators_share_one_compile_pool():
    """Two GPUs' evaluators, each in its thread, hand their candidates to one pool of two
    workers: each gets its own results, launched on its own GPU, and no third worker starts."""
    configs = [GOOD.model_copy(update={"block_k": bk}) for bk in (16, 32, 64)]
    pool = CompilePool(2, compile_fn=device_noting_compile)
    results: dict[int, list[Trial]] = {}
    alive: list[int] = []
    evaluators = [WorkerEvaluator(evaluate_fn=flaky_evaluate, probe_fn=uncompiled, compile_pool=pool,
                                  compile_device=d, spare=False) for d in (0, 1)]
    try:

        def tune_on(d: int) -> None:
            results[d] = evaluators[d].evaluate(PROBLEM, configs)
            alive.append(len(compile_workers_alive()))

        threads = [threading.Thread(target=tune_on, args=(d,)) for d in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for ev in evaluators:
            ev.close()
        assert compile_workers_alive() and max(alive) <= 2  # the evaluators leave the pool to its owner
    finally:
        for ev in evaluators:
            ev.close()
        pool.close()
    assert compile_workers_alive(within_s=10) == []
    pids = set()
    for d in (0, 1):
        assert [t.config for t in results[d]] == configs
        assert all(t.status == "compile_error" and t.error.startswith(f"device {d} ") for t in results[d])
        pids |= {t.error.split()[-1] for t in results[d]}
    assert len(pids) <= 2
    with pytest.raises(WorkerError, match="stopped"):  # closed: it takes no more
        pool.run([(0, PROBLEM, GOOD)], TIMEOUT_S, lambda i, r: None)


def test_the_compile_pool_serves_the_batch_nearest_its_end_first(tmp_path, monkeypatch):
    """One worker, a batch of three under way when a batch of one comes: the one goes next
    (its GPU is back to timing soonest), then the rest of the three."""
    started = tmp_path / "started"
    monkeypatch.setenv(HANGING_MARKER, str(started))
    slow = [GOOD.model_copy(update={"num_stages": 2, "block_k": bk}) for bk in (16, 32, 64)]
    done: list[tuple[str, int]] = []
    lock = threading.Lock()

    def emit(name):
        def record(index, result):
            with lock:
                done.append((name, index))
        return record

    pool = CompilePool(1, compile_fn=device_noting_compile)
    try:
        three = threading.Thread(target=pool.run, args=([(i, PROBLEM, c) for i, c in enumerate(slow)], 60,
                                                        emit("three")))
        three.start()
        deadline = time.monotonic() + 120
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        pool.run([(0, PROBLEM, slow[0])], 60, emit("one"))
        three.join(60)
    finally:
        pool.close()
    assert done == [("three", 0), ("one", 0), ("three", 1), ("three", 2)]


def test_an_aborted_evaluator_leaves_the_shared_pool_to_the_others(tmp_path, monkeypatch):
    """An evaluator aborted while its candidate hangs in the shared pool: its evaluate
    raises at once, the hanging worker is killed, and the other GPU's evaluator compiles on."""
    hanging = tmp_path / "hanging"
    monkeypatch.setenv(HANGING_MARKER, str(hanging))
    pool = CompilePool(2, compile_fn=device_noting_compile)
    stuck = WorkerEvaluator(evaluate_fn=flaky_evaluate, probe_fn=uncompiled, compile_pool=pool,
                            compile_device=0, spare=False, timeout_s=300)
    other = WorkerEvaluator(evaluate_fn=flaky_evaluate, probe_fn=uncompiled, compile_pool=pool,
                            compile_device=1, spare=False)
    try:
        raised: list[BaseException] = []

        def run_stuck() -> None:
            try:
                stuck.evaluate(PROBLEM, [candidate("hang")])
            except BaseException as exc:  # noqa: BLE001
                raised.append(exc)

        thread = threading.Thread(target=run_stuck)
        thread.start()
        deadline = time.monotonic() + 120
        while not hanging.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        hung = set(compile_workers_alive())
        start = time.monotonic()
        stuck.abort()
        thread.join(30)
        assert not thread.is_alive() and time.monotonic() - start < 10
        assert len(raised) == 1 and isinstance(raised[0], WorkerError)
        deadline = time.monotonic() + 10
        while any(p.is_alive() for p in hung) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(p.is_alive() for p in hung)  # the hanging candidate's worker with it
        trials = other.evaluate(PROBLEM, [GOOD])
        assert trials[0].error.startswith("device 1 ")
    finally:
        stuck.close()
        other.close()
        pool.close()
    assert compile_workers_alive(within_s=10) == []


def test_ctrl_c_as_a_batch_is_sent_cancels_it(tmp_path, monkeypatch):
    """Ctrl-C the moment a batch joins the shared pool (before its caller waits for it):
    the batch is cancelled all the same, so its hanging candidate does not hold the pool's
    one worker from the next caller's batch."""
    hanging = tmp_path / "hanging"
    monkeypatch.setenv(HANGING_MARKER, str(hanging))
    pool = CompilePool(1, compile_fn=device_noting_compile)
    wake = CompilePool._wake
    calls = []

    def interrupted_once(self) -> None:
        wake(self)
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(CompilePool, "_wake", interrupted_once)
    done: list[tuple[int, Trial | None]] = []
    try:
        with pytest.raises(KeyboardInterrupt):
            pool.run([(0, PROBLEM, candidate("hang"))], 300, lambda *result: None)
        runner = threading.Thread(target=lambda: pool.run([(0, PROBLEM, GOOD)], 300, lambda *r: done.append(r)),
                                  daemon=True)
        runner.start()
        runner.join(120)
        assert not runner.is_alive(), "the next batch waited behind the cancelled one"
        assert len(done) == 1 and done[0][1].error.startswith("device None ")
    finally:
        pool.close(kill=True)


def test_ctrl_c_while_waiting_on_the_shared_pool_kills_the_candidate_s_worker(tmp_path, monkeypatch):
    """Ctrl-C in the main thread while its candidate hangs in the shared pool: the
    KeyboardInterrupt propagates at once, the hanging worker is killed, the pool stays open."""
    hanging = tmp_path / "hanging"
    monkeypatch.setenv(HANGING_MARKER, str(hanging))

    def ctrl_c_once_it_hangs() -> None:
        # Once the candidate hangs, and only while the test still waits for the interrupt:
        # no stray SIGINT reaches a later test.
        deadline = time.monotonic() + 120
        while not hanging.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not interrupted.is_set():  # (past the deadline, the test fails on the missing marker)
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    interrupted = threading.Event()
    pool = CompilePool(1, compile_fn=device_noting_compile)
    evaluator = WorkerEvaluator(evaluate_fn=flaky_evaluate, probe_fn=uncompiled, compile_pool=pool, spare=False,
                                timeout_s=300)
    try:
        threading.Thread(target=ctrl_c_once_it_hangs, daemon=True).start()
        try:
            with pytest.raises(KeyboardInterrupt):
                evaluator.evaluate(PROBLEM, [candidate("hang")])
        finally:
            interrupted.set()
        assert hanging.exists(), "the candidate never began to compile"
        hung = int(hanging.read_text())
        deadline = time.monotonic() + 20
        while process_alive(hung) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not process_alive(hung)  # the pool's thread killed the hanging candidate's worker
        hanging.unlink()
        with WorkerEvaluator(evaluate_fn=flaky_evaluate, probe_fn=uncompiled, compile_pool=pool,
                             spare=False) as other:
            trials = other.evaluate(PROBLEM, [GOOD])
        assert trials[0].error.startswith("device None ")
    finally:
        evaluator.close()
        pool.close()


def test_baseline_is_measured_in_the_timing_worker():
    seen: list[Trial] = []
    with WorkerEvaluator(spare=False) as evaluator:
        trial = evaluator.baseline(PROBLEM, on_trial=seen.append)
    assert seen == [trial]
    assert trial.kernel == "torch" and trial.config is None and trial.status == "success", trial.error
    assert trial.rel_error <= 1e-4 and trial.ms > 0 and trial.timing == "interpreter"


def test_the_worker_module_leaves_torch_to_the_workers():
    """So that the CLI starts the timing worker before it imports torch itself, and the two
    imports overlap."""
    import subprocess
    import sys

    code = "import sys, autokernel.tuning.worker; print(sorted({'torch', 'triton'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_real_problem_end_to_end_through_the_production_workers():
    """The default tasks (compile_candidate, then evaluate with graph_time) in their workers."""
    configs = [GOOD, KernelConfig(block_m=32, block_n=16, block_k=32, group_m=8, num_warps=2, num_stages=2)]
    with WorkerEvaluator(compile_workers=1, spare=False) as evaluator:
        trials = evaluator.evaluate(PROBLEM, configs)
        retimed = evaluator.retime(PROBLEM, configs)
    for t in trials + retimed:
        assert t.status == "success", t.error
        assert t.rel_error <= 1e-4 and t.ms > 0 and t.timing == "interpreter"
        assert t.gpu_ms is None  # no GPU: no CUDA-graph time, and rank_ms falls back to ms
        assert t.rank_ms == t.ms
    assert [t.note for t in trials] == [None, None]
    assert [t.note for t in retimed] == [RETIMED, RETIMED]
    assert [t.config for t in retimed] == configs


def test_ctrl_c_kills_the_workers_and_keeps_finished_trials(tmp_path, monkeypatch):
    assert threading.current_thread() is threading.main_thread()  # where SIGINT lands
    hanging = tmp_path / "hanging"
    monkeypatch.setenv(HANGING_MARKER, str(hanging))  # the workers inherit it
    before = set(multiprocessing.active_children())
    seen: list[Trial] = []
    workers = []
    done = threading.Event()

    def ctrl_c_once_the_candidate_hangs() -> None:
        # Ctrl-C while the next candidate hangs in its worker; sent to the main thread, as
        # a process-wide signal may land in any thread and leave the main one waiting.
        deadline = time.monotonic() + 30
        while not hanging.exists() and not done.is_set() and time.monotonic() < deadline:
            time.sleep(0.01)
        if hanging.exists() and not done.is_set():
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    def on_trial(trial: Trial) -> None:
        seen.append(trial)
        workers.extend(set(multiprocessing.active_children()) - before)
        if len(seen) == 1:
            threading.Thread(target=ctrl_c_once_the_candidate_hangs, daemon=True).start()

    evaluator = WorkerEvaluator(evaluate_fn=flaky_evaluate, timeout_s=45, spare=False)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            evaluator.evaluate(PROBLEM, [GOOD, candidate("hang"), GOOD], on_trial=on_trial)
    finally:
        done.set()
    assert hanging.exists()
    assert [t.status for t in seen] == ["success"]
    assert workers and not any(p.is_alive() for p in workers)
    assert time.monotonic() - start < 40  # the interrupt, not the hang's timeout, ended it


def _trial(config: KernelConfig, ms: float | None, gpu_ms: float | None = None, note: str | None = None,
           status: str = "success") -> Trial:
    return Trial(PROBLEM, config, status, ms=ms, gpu_ms=gpu_ms, note=note, timing="gpu")


def test_suspicious_pair_finds_a_winner_far_ahead_until_it_is_retimed():
    a, b, c = GOOD, candidate("raise"), candidate("exit")
    close = [_trial(a, 1.0, 0.95), _trial(b, 1.0, 1.0), _trial(c, None, status="compile_error")]
    assert suspicious_pair(close) is None  # 5 % ahead
    far = [_trial(a, 1.0, 0.8), _trial(b, 0.9, 1.0), _trial(c, 2.0, 2.0)]
    winner, runner_up = suspicious_pair(far)  # ranks by gpu_ms, not ms
    assert (winner.config, runner_up.config) == (a, b)
    # Re-timed trials stand for their configs: the winner confirmed is not re-timed again...
    assert suspicious_pair(far + [_trial(a, 1.0, 0.7, RETIMED), _trial(b, 0.9, 1.0, RETIMED)]) is None
    # ...and a re-timed number replaces a faster first reading.
    winner, runner_up = suspicious_pair(far + [_trial(a, 1.0, 1.5, RETIMED)])
    assert (winner.config, runner_up.config) == (b, a)
    assert suspicious_pair([_trial(a, 1.0, 0.8)]) is None


def test_replay_retime_gives_the_recorded_trials_marked(sweep):
    replay = ReplayEvaluator(sweep)
    problem = Problem(*BIG_SHAPE)
    configs = replay.space(problem).configs()[:3]
    seen: list[Trial] = []
    again = replay.retime(problem, configs, on_trial=seen.append)
    assert seen == again and [t.config for t in again] == configs
    assert [t.note for t in again] == [f"replayed; {RETIMED}"] * 3
    first = replay.evaluate(problem, configs)
    assert [t.note for t in first] == ["replayed"] * 3  # the recorded table is left alone
    assert [t.gpu_ms for t in again] == [t.gpu_ms for t in first]


def test_gpu_time_cycles_the_input_sets_through_one_graph(monkeypatch):
    """The host side of timing.gpu_time: the CUDA-graph bench is Triton's."""
    import triton.testing

    calls = []

    def fake_bench(fn, rep, return_mode):
        assert return_mode == "median"
        for _ in range(5):
            fn()
        return 0.25

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", fake_bench)
    monkeypatch.setattr(runtime, "INTERPRETER", False)
    assert timing.gpu_time(lambda x: calls.append(x), rotate=[(0,), (1,)]) == 0.25
    assert calls == [0, 1, 0, 1, 0]
    monkeypatch.setattr(runtime, "INTERPRETER", True)
    with pytest.raises(RuntimeError, match="CUDA GPU"):
        timing.gpu_time(lambda: None)


def test_probing_triton_cache_raises_for_a_missing_kernel_instead_of_compiling(tmp_path, monkeypatch):
    from triton.runtime.cache import get_cache_manager

    from autokernel.tuning import triton_cache
    from autokernel.tuning.worker import probe_candidate

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(triton_cache.MANAGER_ENV, raising=False)
    assert triton_cache.can_probe()
    manager = get_cache_manager("ab" * 32)  # Triton's own lookup takes the class from the environment
    assert isinstance(manager, triton_cache.CacheOnlyManager)
    assert manager.get_group("kernel.json") is None  # not probing: a miss is Triton's to compile
    with triton_cache.cache_only() as missed:
        with pytest.raises(triton_cache.NotCompiled):
            manager.get_group("kernel.json")
        assert missed()
    manager.put_group("kernel.json", {"kernel.json": manager.put("{}", "kernel.json")})
    with triton_cache.cache_only() as missed:
        assert set(manager.get_group("kernel.json")) == {"kernel.json"}
        assert not missed()
    # A cache manager of the user's own stays: no probing, every candidate goes to the compile workers.
    monkeypatch.setenv(triton_cache.MANAGER_ENV, "somewhere:Else")
    assert not triton_cache.can_probe()
    assert probe_candidate(PROBLEM, GOOD) == NOT_COMPILED


def test_retime_with_an_evaluate_fn_fails_only_the_config_that_raises():
    """With an injected evaluate_fn the re-time is each_candidate in one task: a config that
    raises fails alone, as it did in a task of its own (review finding)."""
    with WorkerEvaluator(evaluate_fn=flaky_evaluate, timeout_s=TIMEOUT_S, spare=False) as ev:
        trials = ev.retime(PROBLEM, [GOOD, candidate("raise")])
    assert [t.status for t in trials] == ["success", "runtime_error"]
    assert trials[1].error == "ValueError: a bad candidate"




def compiling_evaluate(problem: Problem, config: KernelConfig) -> Trial:
    """The timing worker's task, as where a candidate's binary was missing: Triton tells its
    compilation listener of one kernel compiled (0.25 s) and one loaded from its cache."""
    import types

    from triton import knobs

    listener = knobs.compilation.listener
    listener(src=None, metadata={}, metadata_group={}, times=types.SimpleNamespace(total=250_000), cache_hit=False)
    listener(src=None, metadata={}, metadata_group={}, times=None, cache_hit=True)
    return evaluate(problem, config)


def test_kernels_the_timing_worker_compiles_itself_are_counted_and_reach_the_timeline():
    """A compile in the timing worker is GPU time lost to the measurements: each is counted
    from Triton's compilation listener, per evaluator and in the timeline's summary and table."""
    pytest.importorskip("triton.knobs")
    from autokernel.tuning.timeline import table

    timeline = Timeline()
    configs = [GOOD, GOOD.model_copy(update={"block_k": 32})]
    with WorkerEvaluator(evaluate_fn=compiling_evaluate, timeout_s=60) as workers:
        workers.on_phase = timeline.recorder("GPU 0")
        workers.on_compiled = timeline.compiler("GPU 0")
        with timeline.job("GPU 0", PROBLEM.label()):
            trials = workers.evaluate(PROBLEM, configs)
        assert all(t.ok for t in trials), [t.error for t in trials]
        kernels, seconds = workers.compiled_while_timing
    assert kernels == 2 and seconds == pytest.approx(0.5)
    summary = timeline.summary()["GPU 0"]
    assert summary["compiled"][0] == 2 and summary["compiled"][1] == pytest.approx(0.5)
    assert "timing worker compiled 2 kernels itself, 0.5 s" in table(timeline.summary())[1]


def test_a_worker_without_compiles_counts_none():
    with WorkerEvaluator(timeout_s=60) as workers:
        assert all(t.ok for t in workers.evaluate(PROBLEM, [GOOD]))
        assert workers.compiled_while_timing == (0, 0.0)
