"""Evaluation that survives bad candidates: every config runs in a spawned worker process
with a wall-clock limit.

A candidate may raise, fail to compile, need more shared memory than there is, poison
the CUDA context with an illegal memory access, kill its process (a segfault,
``os._exit``) or hang. Each becomes a failed Trial with its status and one line of
error; a worker that died, hung or holds a broken CUDA context is replaced, and the
evaluation goes on.

On a GPU a batch runs in up to three phases. The timing worker first launches each
candidate once from Triton's on-disk cache alone (``probe_candidate``): a candidate
compiled by an earlier run needs no compile worker, so a rerun of a tuned shape starts
none. Compile workers, one per candidate needing a compile (at most one per CPU core),
then launch each of those once (``evaluate.launch_once``) in parallel: that records
compile errors and OutOfResources, and leaves each binary in the cache. Last, the timing
worker checks and times the survivors one at a time (``evaluate`` with ``gpu_ms``),
loading the binaries from the cache, so no compile runs beside a measurement. A batch
that comes while the timing worker is still starting, where the compile workers are
started already (the pool of ``tune(gpus=...)`` starts with the timing workers), skips the
probe: every candidate goes to the compile workers at once (one already in the cache is
only loaded there), and the timing worker is waited for when the first one is ready to be
timed, so its start-up overlaps the batch's compiles. Under the interpreter there is
nothing to compile: the timing worker alone runs each candidate.
The cuBLAS baseline (``baseline``) is measured in the timing worker too: the main process
never starts a CUDA context.

Several GPUs of one machine (``tune(gpus=...)``) each have a timing worker and share one
CompilePool: its size is set once for the machine, any free worker takes the next
candidate of whichever GPU waits, and it launches the candidate on that GPU.

This module imports neither torch nor Triton (the workers do, as they start): a caller
can start the timing worker (``start``) before it imports them itself, and the two
imports, seconds each, overlap.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import sys
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from autokernel import knobs
from autokernel.records import KernelConfig, Problem, Trial
from autokernel.tuning.protocols import EvaluatorBase

if TYPE_CHECKING:
    from autokernel.tuning.evaluator import OnTrial

CandidateFn = Callable[["Problem", "KernelConfig"], "Trial | str | None"]
"""What a worker runs for each candidate: the timing worker returns its Trial; a compile
worker (and the timing worker's probe) returns None when the candidate may go on to
timing, else its failed Trial; the probe returns NOT_COMPILED for a candidate that needs
a compile worker. Workers are spawned, so it must pickle: a module-level function or a
functools.partial of one."""

BATCH_LOST = "re-time lost with its batch"
"""The note of a config's failed Trial when its whole side-by-side re-time task failed."""

WORKER_LOST = "lost with its worker"
"""The note of a candidate's failed Trial when its worker died or was killed: the machine's
outcome as much as the config's (readings.py keeps none of them)."""

NOT_COMPILED = "not compiled"
"""The probe's answer for a candidate whose binary is not in Triton's cache yet."""

TIMEOUT_S = 120.0
"""Default wall-clock limit for one candidate (autokernel tune's --timeout default)."""
START_TIMEOUT_S = 300.0
"""How long a fresh worker may take to import torch and Triton before the run is given up."""
MAX_COMPILE_WORKERS = 16
_WORKER_IMPORTS = "autokernel.evaluate"  # torch, Triton and the kernels, imported while a worker starts

_READY = "ready"
_Task = tuple[int, "Problem", "KernelConfig | None"]  # (index in the batch, problem, config)
# What the timing worker serves: the index of its function in the tuple it was started with.
_EVALUATE, _PROBE, _BASELINE, _RACE = range(4)


def _event_timer():
    """The event timer of the timing worker's tasks: a shorter budget than bench's, so that
    a sweep of hundreds of configs fits a lease (imported here: this module leaves torch
    to the workers)."""
    from autokernel.timing import time_fn

    return functools.partial(time_fn, warmup_ms=10.0, rep_ms=30.0)


def evaluate_candidate(problem: Problem, config: KernelConfig) -> Trial:
    """The timing worker's task: ``evaluate`` with gpu_ms (CUDA-graph replay), which tuning
    ranks by; the event timer's median is kept beside it (_event_timer)."""
    from autokernel.evaluate import evaluate

    return evaluate(problem, config, graph_time=True, timer=_event_timer())


def race_candidates(problem: Problem, configs: Sequence[KernelConfig]) -> list[Trial]:
    """The timing worker's re-time of several configs: each checked and event-timed as
    evaluate_candidate does, then their gpu_ms taken side by side, interleaved
    (evaluate.evaluate_side_by_side, timing.race)."""
    from autokernel.evaluate import evaluate_side_by_side

    return evaluate_side_by_side(problem, configs, timer=_event_timer())


def each_candidate(evaluate_fn: CandidateFn, problem: Problem, configs: Sequence[KernelConfig]) -> list:
    """A re-time as ``evaluate_fn`` of each config in turn (a caller's own evaluate_fn); one
    that raises is its own failed Trial, as in a task of its own."""
    out = []
    for config in configs:
        try:
            out.append(evaluate_fn(problem, config))
        except Exception as exc:
            out.append(_raised_trial(problem, config, exc))
    return out


def _raised_trial(problem: Problem, config, exc: Exception) -> Trial:
    """The failed Trial of a task that raised ``exc``."""
    from autokernel.evaluate import error_line, failure_status
    from autokernel.timing import timing_label

    return Trial(problem, config, failure_status(exc), timing=timing_label(), error=error_line(exc))


def compile_candidate(problem: Problem, config: KernelConfig) -> Trial | None:
    """The compile phase's task: ``launch_once``, then hand the inputs' memory back so an
    idle compile worker holds only its CUDA context while the timing worker measures."""
    import torch

    from autokernel.evaluate import launch_once

    failed = launch_once(problem, config)
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return failed


def probe_candidate(problem: Problem, config: KernelConfig) -> Trial | str | None:
    """The timing worker's first look at a candidate: ``launch_once`` with binaries from
    Triton's cache alone. NOT_COMPILED when one is missing (or the cache cannot be probed),
    else what launch_once says: None, or the failed Trial of a cached binary that does not
    launch (OutOfResources is raised at load)."""
    from autokernel.evaluate import launch_once
    from autokernel.tuning import triton_cache

    if not triton_cache.can_probe():
        return NOT_COMPILED
    with triton_cache.cache_only() as missed:
        failed = launch_once(problem, config)
    return NOT_COMPILED if missed() else failed


def measure_baseline(problem: Problem, config: KernelConfig | None = None) -> Trial:
    """cuBLAS (torch) on ``problem``, checked and timed as evaluate_torch does, with gpu_ms
    to compare with the candidates' (``config`` is unused: the worker's task signature)."""
    from autokernel.evaluate import evaluate_torch

    return evaluate_torch(problem, "torch", graph_time=True)


class WorkerError(RuntimeError):
    """A worker could not be started: the environment is broken, not a candidate."""


class WorkerEvaluator(EvaluatorBase):
    """The Evaluator of tuning runs (tuning.evaluator.Evaluator): candidates run in
    spawned worker processes that no bad candidate can take down.

    Args:
        evaluate_fn: ``f(problem, config) -> Trial`` run by the timing worker; default
            evaluate_candidate (``gpu_ms`` beside ``ms`` on a GPU).
        compile_fn: ``f(problem, config) -> Trial | None`` run by the compile workers;
            default compile_candidate.
        probe_fn: ``f(problem, config) -> Trial | NOT_COMPILED | None`` run by the timing
            worker before the compile phase; default probe_candidate.
        race_fn: ``f(problem, configs) -> list[Trial]`` run by the timing worker to re-time
            several configs side by side; default race_candidates, or ``evaluate_fn`` of
            each config in turn where an evaluate_fn is given.
        compile_workers: at most this many compile workers, started as candidates need
            compiling; default one per CPU core but the timing worker's (at most 16) on a
            GPU, and none under the interpreter, where there is nothing to compile (nor to
            probe).
        compile_pool: the compile workers of the machine, shared with the other GPUs'
            evaluators (CompilePool), instead of a pool of this evaluator's own; its
            candidates run there on GPU ``compile_device`` (an ordinal among the pool's
            GPUs). The pool is its owner's to close.
        timeout_s: seconds one candidate may take in the timing worker (its result is a
            "timeout" Trial after that); compile_timeout_s the same in a compile worker
            (default: timeout_s).
        spare: keep one more timing worker started, so that replacing a lost one costs
            no start-up (importing torch and Triton takes seconds).
        env: environment variables set in every worker before it imports torch (e.g.
            CUDA_VISIBLE_DEVICES, to give its workers one GPU of several).
        on_phase: told ``(kind, start, end)`` (time.perf_counter seconds) of each phase
            of every call, one after the other, none overlapping: "start" (waiting for the
            timing worker to come up: before the batch, or, for a batch compiled while it
            starts, once its first candidate is compiled), "probe", "compile" (waiting for
            compiles) and "timing" (the timing worker measuring, re-timing or measuring
            cuBLAS); a Timeline's recorder.

    ``on_trial`` gets each trial as soon as it is final: on a GPU the probe's failures come
    first, then each candidate sent to the compile workers as its compile fails or as it is
    timed once compiled, then the candidates found in the cache, timed in the order given.
    The returned list is in the order given. Ctrl-C (or any exception, from ``on_trial``
    too) kills the workers and propagates; the trials already passed to ``on_trial`` stand.
    """

    def __init__(
        self,
        *,
        evaluate_fn: CandidateFn | None = None,
        compile_fn: CandidateFn | None = None,
        probe_fn: CandidateFn | None = None,
        race_fn: Callable | None = None,
        compile_workers: int | None = None,
        compile_pool: "CompilePool | None" = None,
        compile_device: int | None = None,
        timeout_s: float = TIMEOUT_S,
        compile_timeout_s: float | None = None,
        spare: bool = True,
        env: dict[str, str] | None = None,
        on_phase: Callable[[str, float, float], None] | None = None,
    ) -> None:
        compile_timeout_s = timeout_s if compile_timeout_s is None else compile_timeout_s
        if timeout_s <= 0 or compile_timeout_s <= 0:
            raise ValueError(f"timeouts must be > 0 s, got {timeout_s} and {compile_timeout_s}")
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        if race_fn is None:
            race_fn = functools.partial(each_candidate, evaluate_fn) if evaluate_fn else race_candidates
        timing_fns = (evaluate_fn or evaluate_candidate, probe_fn or probe_candidate,
                      measure_baseline, race_fn)  # indexed by _EVALUATE, _PROBE, _BASELINE, _RACE
        self._env = dict(env or {})
        self._timing = _Pool(timing_fns, 1, lost_status="runtime_error", name="timing", spare=spare, env=self._env)
        if compile_pool is not None and (compile_fn is not None or compile_workers is not None):
            raise ValueError("a shared compile pool has its own compile_fn and size")
        self._compile_fn = compile_fn or compile_candidate
        self._compile_workers = compile_workers  # None: decided at the first evaluate (see _compile_pool)
        self._shared = compile_pool
        self._compile_device = compile_device
        self._compile: CompilePool | None = None  # this evaluator's own
        self._aborted = threading.Event()
        self.on_phase = on_phase
        self.on_compiled: Callable[[int, float], None] | None = None
        """Told ``(kernels, seconds)`` at the end of a phase in which the timing worker
        compiled kernels itself (compiled_while_timing); a Timeline's compiler."""
        self._compiled_seen: tuple[int, float] = (0, 0.0)
        self.phase_s: dict[str, float] = {}
        """Wall seconds of the last call's phases: "start" (waiting for the timing worker to
        come up), "probe" and "compile" (GPU only; "compile" when some candidate needed it)
        and "timing"."""

    def start(self) -> None:
        """Start the timing worker now, so that its start-up (importing torch and Triton:
        seconds) overlaps the caller's own (reading the history, the first proposals)."""
        with self._killed_on_error():
            self._timing.grow(1)

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        trials: list[Trial | None] = [None] * len(configs)
        final = _finisher(trials, on_trial)

        def compiled(index: int, failed: Trial | None) -> None:
            if failed is not None:
                final(index, failed)

        uncompiled: set[int] = set()

        def probed(index: int, result: Trial | str | None) -> None:
            if isinstance(result, str):  # NOT_COMPILED
                uncompiled.add(index)
            else:
                compiled(index, result)

        tasks = every = [(i, problem, config) for i, config in enumerate(configs)]
        waited_since = [0.0]  # when the wait for the next compile began

        def compiled_then_timed(index: int, failed: Trial | None) -> None:
            # Each candidate is timed as soon as it compiles, while the others still
            # compile: the GPU waits for the first compile of a batch, not for the slowest.
            self._record_phase("compile", waited_since[0], time.perf_counter())
            if failed is not None:
                final(index, failed)
            else:
                self._wait_for_timing_worker()  # still starting: the batch was compiled meanwhile
                with self._phase("timing"):
                    self._timing.run([every[index]], self.timeout_s, final, kind=_EVALUATE)
            waited_since[0] = time.perf_counter()

        self.phase_s = {}
        with self._killed_on_error():
            pool = self._compiling_while_starting() if tasks else None
            if pool is not None:  # no probe: the timing worker is waited for once a candidate is compiled
                self._timing.grow(1)
                uncompiled.update(range(len(tasks)))
            else:
                self._wait_for_timing_worker()
                pool = self._compile_pool()
                if pool is not None and tasks:
                    with self._phase("probe"):
                        self._timing.run(tasks, self.timeout_s, probed, kind=_PROBE)
            if uncompiled:
                waited_since[0] = time.perf_counter()
                pool.run([t for t in tasks if t[0] in uncompiled], self.compile_timeout_s, compiled_then_timed,
                         device=self._compile_device, stop=self._aborted)
                self._record_phase("compile", waited_since[0], time.perf_counter())
            tasks = [task for task in tasks if trials[task[0]] is None]
            with self._phase("timing"):
                self._timing.run(tasks, self.timeout_s, final, kind=_EVALUATE)
        return trials  # type: ignore[return-value]  # every index was filled

    def retime(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        """Check and time ``configs`` again, side by side in one task of the timing worker
        (race_candidates: their GPU times interleaved), each new Trial noted "re-timed": for
        a winner that beats the runner-up by a suspicious margin (see
        evaluator.suspicious_pair) and for the leaders when tuning ends. The new trials are
        the ones to keep and rank by (record them through ``on_trial``). A task that fails
        as a whole (its worker lost, past ``timeout_s`` per config) fails every config,
        noted BATCH_LOST and not "re-timed": no one config's reading, it supersedes none."""
        configs = list(configs)
        trials: list[Trial | None] = [None] * len(configs)
        final = _finisher(trials, on_trial, retimed=True)
        lost = _finisher(trials, on_trial)

        def split(_: int, result) -> None:
            if isinstance(result, list) and len(result) == len(configs):
                for i, trial in enumerate(result):
                    final(i, trial)
                return
            if isinstance(result, list):
                status, timing, error = "runtime_error", None, f"the re-time gave {len(result)} results for {len(configs)} configs"
            else:
                status, timing, error = result.status, result.timing, result.error
            for i, config in enumerate(configs):  # one failure for the whole batch
                lost(i, Trial(problem, config, status, timing=timing, error=error, note=BATCH_LOST))

        if configs:
            with self._killed_on_error():
                self._wait_for_timing_worker()
                with self._phase("timing"):
                    self._timing.run([(0, problem, tuple(configs))], self.timeout_s * len(configs), split, kind=_RACE)
        return trials  # type: ignore[return-value]

    def baseline(self, problem: Problem, on_trial: OnTrial | None = None) -> Trial:
        """cuBLAS (torch) on ``problem``, checked and timed in the timing worker (measure_baseline),
        passed to ``on_trial`` to be recorded; a lost worker makes it a failed Trial."""
        trials: list[Trial | None] = [None]

        def final(index: int, trial: Trial) -> None:
            trial.kernel = "torch"  # already so, but for a lost worker's Trial, made without knowing the kernel
            _finisher(trials, on_trial)(index, trial)

        with self._killed_on_error():
            self._wait_for_timing_worker()
            with self._phase("timing"):
                self._timing.run([(0, problem, None)], self.timeout_s, final, kind=_BASELINE)
        return trials[0]  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the workers (a later evaluate starts new ones, an aborted evaluator too)."""
        for pool in self._pools():
            pool.close()
        self._compile = None
        self._aborted.clear()

    def abort(self) -> None:
        """Kill the workers now, a candidate under way included (the run was cancelled); a
        batch waiting on a shared compile pool is dropped, and until ``close`` this
        evaluator asks it for no more."""
        self._aborted.set()
        for pool in self._pools():
            pool.close(kill=True)

    def __enter__(self) -> "WorkerEvaluator":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _compile_pool(self) -> "CompilePool | None":
        """Where candidates compile: the shared pool, else this evaluator's own (none started
        yet), by default node_compile_workers() on a GPU and none under the interpreter.
        Decided on first use, when torch is imported anyway (where kernels run is torch's
        to say)."""
        if self._shared is not None:
            return self._shared
        if self._compile_workers is None:
            from autokernel import runtime

            self._compile_workers = 0 if runtime.INTERPRETER else node_compile_workers()
        if self._compile is None and self._compile_workers > 0:
            self._compile = CompilePool(self._compile_workers, compile_fn=self._compile_fn, env=self._env)
        return self._compile

    def _compiling_while_starting(self) -> "CompilePool | None":
        """The compile pool to send a whole batch to, unprobed, while the timing worker is
        still starting: where the pool's workers are started already (a shared pool starts
        with the timing workers), its compiles overlap the timing worker's start-up. None
        when the timing worker is up, or where the batch would start compile workers: the
        probe is what spares a rerun of a tuned shape their start."""
        pool = self._shared if self._shared is not None else self._compile
        if pool is None or not pool.started or self._timing.ready():
            return None
        return pool

    def _pools(self) -> list:
        """The pools this evaluator owns (a shared compile pool is its owner's to close)."""
        return [self._timing] + ([self._compile] if self._compile is not None else [])

    def _wait_for_timing_worker(self) -> None:
        """Wait for the timing worker to come up, as a phase of its own ("start")."""
        if not self._timing.ready():
            with self._phase("start"):
                self._timing.wait_ready()

    @contextlib.contextmanager
    def _phase(self, kind: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self._record_phase(kind, start, time.perf_counter())

    def _record_phase(self, kind: str, start: float, end: float) -> None:
        self.phase_s[kind] = self.phase_s.get(kind, 0.0) + end - start
        if self.on_phase is not None:
            self.on_phase(kind, start, end)
        compiled = self._timing.compiled
        kernels, seconds = compiled[0] - self._compiled_seen[0], compiled[1] - self._compiled_seen[1]
        self._compiled_seen = compiled
        if kernels and self.on_compiled is not None:
            self.on_compiled(kernels, seconds)

    @property
    def compiled_while_timing(self) -> tuple[int, float]:
        """Kernels the timing worker compiled itself, and the seconds that took: candidates
        whose binary the compile workers should have left in Triton's cache (a compile here
        is GPU time lost to the measurements), or kernels beside the candidates (split-K's
        second pass, cuBLAS's none). Counted where Triton reports compiles (3.4 and later)."""
        return self._timing.compiled

    @contextlib.contextmanager
    def _killed_on_error(self) -> Iterator[None]:
        try:
            yield
        except BaseException:  # Ctrl-C included: no worker outlives the run
            for pool in self._pools():  # (a shared compile pool dropped this call's batch)
                pool.close(kill=True)
            self._compile = None
            raise


def _finisher(trials: list, on_trial: OnTrial | None, retimed: bool = False) -> Callable[[int, Trial], None]:
    """``final(index, trial)``: mark the trial re-timed if asked, put it in its place in
    ``trials`` and pass it to ``on_trial``."""

    def final(index: int, trial: Trial) -> None:
        if retimed:
            from autokernel.tuning.evaluator import mark_retimed

            mark_retimed(trial)
        trials[index] = trial
        if on_trial is not None:
            on_trial(trial)

    return final


# --- worker processes ---------------------------------------------------------------------


def _serve(conn: multiprocessing.connection.Connection, fns: tuple[CandidateFn, ...],
           env: dict[str, str] | None = None) -> None:
    """A worker's loop: for each (kind, problem, config, device) received, send back
    (result, healthy, compiled), the result of ``fns[kind](problem, config)`` run on CUDA
    ordinal ``device`` (None: the worker's only GPU, or none).

    A Python exception from ``fn`` becomes a failed Trial here. ``healthy`` is False when
    the CUDA context is broken afterwards; the worker then stops and is replaced.
    ``compiled``: (kernels, seconds) this task compiled rather than loaded from Triton's
    cache (_compile_counter).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    os.environ.update(env or {})  # before torch is imported: CUDA_VISIBLE_DEVICES is read once
    importlib.import_module(_WORKER_IMPORTS)  # part of the start-up (START_TIMEOUT_S), not of a candidate's time
    compiled = _compile_counter()
    conn.send(_READY)
    while True:
        try:
            task = conn.recv()
        except EOFError:  # the parent is gone
            task = None
        if task is None:
            # Nothing is left to save, and tearing torch down takes about a second.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        kind, problem, config, device = task
        before = compiled()
        try:
            _use_device(device)
            result = fns[kind](problem, config)
        except Exception as exc:
            result = _raised_trial(problem, config, exc)
        healthy = _cuda_healthy()
        after = compiled()
        conn.send((result, healthy, (after[0] - before[0], after[1] - before[1])))
        if not healthy:
            return


def _compile_counter() -> Callable[[], tuple[int, float]]:
    """``counted() -> (kernels, seconds)``: the kernels this process has compiled so far
    (not loaded from Triton's on-disk cache) and the seconds that took, as Triton's
    compilation listener reports them; (0, 0.0) where Triton has none (before 3.4, or the
    interpreter, which compiles nothing). A listener set already is still called."""
    totals = [0, 0.0]
    try:
        from triton import knobs

        compilation = knobs.compilation
        previous = compilation.listener
    except (ImportError, AttributeError):
        return lambda: (0, 0.0)

    def listener(*, src, metadata, metadata_group, times, cache_hit, **more) -> None:
        if not cache_hit:
            totals[0] += 1
            totals[1] += (getattr(times, "total", 0) or 0) / 1e6  # microseconds
        if previous is not None:
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit,
                     **more)

    compilation.listener = listener
    return lambda: (totals[0], totals[1])


_task_device: int | None = None


def task_device() -> int | None:
    """In a worker: the CUDA ordinal (among the worker's visible GPUs) its task under way
    runs on, where its pool serves several GPUs (CompilePool); else None."""
    return _task_device


def _use_device(device: int | None) -> None:
    """Make ``device`` the current CUDA device of this worker for the next task (a shared
    compile worker launches each candidate on the GPU that asked for it)."""
    global _task_device
    _task_device = device
    if device is not None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.set_device(device)


def _cuda_healthy() -> bool:
    """False when this process's CUDA context is broken: an illegal memory access is
    sticky, every later CUDA call fails."""
    import torch

    if not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
    except Exception:
        return False
    return True


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while a worker starts: the child inherits it, so Ctrl-C at the
    terminal (sent to the whole process group) reaches only the parent, which then kills
    the workers, instead of a KeyboardInterrupt traceback from every worker."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _Worker:
    """One spawned process serving candidates over a pipe."""

    def __init__(self, ctx, fns: tuple[CandidateFn, ...], name: str, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, fns, env), name=f"autokernel-{name}", daemon=True)
        with _sigint_ignored():
            self.process.start()
        child.close()  # so that the worker's death reads as end-of-file here
        self.ready = False
        self.task: _Task | None = None
        self.deadline = time.monotonic() + START_TIMEOUT_S

    def submit(self, task: _Task, timeout: float, kind: int, device: int | None = None) -> None:
        self.conn.send((kind, *task[1:], device))
        self.task = task
        self.deadline = time.monotonic() + timeout

    def death(self) -> str:
        """How the process ended, in words (it has closed its pipe)."""
        self.process.join(timeout=5)
        code = self.process.exitcode
        if code is None:
            return "it closed its pipe"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit code {code}"

    def ask_to_stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)

    def stop(self, kill: bool = False) -> None:
        """Wait a little for a worker asked to stop (none with ``kill``), then kill it."""
        self.process.join(timeout=0 if kill else 5)
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


class _Pool:
    """Up to ``size`` workers serving ``fns``; one that dies, overruns its task's deadline
    or reports a broken CUDA context is replaced (by the spare, when kept)."""

    def __init__(self, fns: tuple[CandidateFn, ...], size: int, *, lost_status: str, name: str,
                 spare: bool = False, env: dict[str, str] | None = None) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._env = env
        self._fns = fns
        self._size = size
        self._lost_status = lost_status  # the status of a candidate whose worker died
        self._name = name
        self._keep_spare = spare
        self._workers: list[_Worker] = []
        self._spare: _Worker | None = None
        self.compiled: tuple[int, float] = (0, 0.0)
        """Kernels its workers compiled in their tasks (not loaded from Triton's cache), and
        the seconds that took."""

    def grow(self, n: int) -> None:
        """Have min(n, size) workers started (and the spare, once they are ready)."""
        while len(self._workers) < min(n, self._size):
            self._workers.append(self._take_spare() or self._start())
        self._start_spare()

    def _start_spare(self) -> None:
        # Only once the workers are up: on few cores a spare importing torch beside them
        # would slow their start.
        if self._keep_spare and self._spare is None and all(w.ready for w in self._workers):
            self._spare = self._start()

    def run(self, tasks: Sequence[_Task], timeout: float, emit: Callable[[int, "Trial | str | None"], None],
            kind: int = 0) -> None:
        """Run every task with ``fns[kind]`` on the first free worker; ``emit(index, result)``
        as each ends, a lost worker's task as a failed Trial ("timeout" past ``timeout`` seconds)."""
        pending = deque(tasks)
        self.grow(len(pending))
        while pending or any(w.task is not None for w in self._workers):
            for w in self._workers:
                if w.ready and w.task is None and pending:
                    task = pending.popleft()
                    try:
                        w.submit(task, timeout, kind)
                    except OSError:  # it died while idle: no candidate's fault, so run the task again
                        pending.appendleft(task)
                        self._replace(w)
            waiting = [w for w in self._workers if w.task is not None or not w.ready]
            if waiting:
                self._await(waiting, emit, timeout)

    def ready(self) -> bool:
        """True when a worker is started and every started one is up (their news read now,
        without waiting: a worker's start that failed raises WorkerError here)."""
        if starting := [w for w in self._workers if not w.ready]:
            self._await(starting, _nothing_to_emit, START_TIMEOUT_S, poll=True)
        return bool(self._workers) and all(w.ready for w in self._workers)

    def wait_ready(self) -> None:
        """Have one worker at least started, and wait until every started one is ready."""
        self.grow(1)
        while starting := [w for w in self._workers if not w.ready]:
            self._await(starting, _nothing_to_emit, START_TIMEOUT_S)

    def _await(self, workers: list[_Worker], emit, timeout: float, poll: bool = False) -> None:
        """Wait for a message from ``workers`` or for their first deadline (with ``poll``, not
        at all), then take every message that came and expire every worker past its deadline
        (``timeout``: what the lost task is said to have overrun)."""
        wait_s = 0.0 if poll else max(0.0, min(w.deadline for w in workers) - time.monotonic())
        readable = multiprocessing.connection.wait([w.conn for w in workers], timeout=wait_s)
        for w in workers:
            if w.conn in readable:
                self._receive(w, emit)
            elif time.monotonic() >= w.deadline:
                self._expire(w, emit, timeout)

    def discard(self, w: _Worker) -> None:
        """Kill ``w`` and start none in its place (the pool grows again as tasks need)."""
        w.stop(kill=True)
        self._workers.remove(w)

    def close(self, kill: bool = False) -> None:
        """Stop every worker. With ``kill``, at once and waited for. Else each is asked to
        stop and left to exit in a thread of its own: its results are all in, and its exit
        (Python's teardown, the CUDA context's) takes a second or more that the caller
        need not wait for; a worker still alive after 5 s is killed there."""
        workers = self._workers + ([self._spare] if self._spare else [])
        self._workers, self._spare = [], None
        if kill:
            for w in workers:
                w.stop(kill=True)
            return
        for w in workers:
            if w.ready:
                w.ask_to_stop()
            else:  # one still starting has nothing to finish
                w.stop(kill=True)
        leaving = [w for w in workers if w.ready]
        if leaving:
            threading.Thread(target=lambda: [w.stop() for w in leaving], name=f"autokernel-{self._name}-exit",
                             daemon=True).start()

    def _start(self) -> _Worker:
        return _Worker(self._ctx, self._fns, self._name, self._env)

    def _take_spare(self) -> _Worker | None:
        spare, self._spare = self._spare, None
        return spare

    def _replace(self, w: _Worker) -> None:
        w.stop(kill=True)
        self._workers[self._workers.index(w)] = self._take_spare() or self._start()
        self._start_spare()

    def _receive(self, w: _Worker, emit) -> None:
        try:
            message = w.conn.recv()
        except (EOFError, OSError):
            message = None
        if message is None:  # end of file: the process is gone
            why = w.death()
            if not w.ready:
                raise WorkerError(f"a {self._name} worker died while starting ({why}); its error is above")
            task = w.task
            self._replace(w)
            if task is not None:
                index, problem, config = task
                emit(index, _lost_trial(problem, config, self._lost_status, f"the {self._name} worker died ({why})"))
            return
        if message == _READY:
            w.ready = True
            self._start_spare()
            return
        result, healthy, (kernels, seconds) = message
        self.compiled = (self.compiled[0] + kernels, self.compiled[1] + seconds)
        index = w.task[0]
        w.task = None
        if not healthy:
            self._replace(w)
        emit(index, result)

    def _expire(self, w: _Worker, emit, timeout: float) -> None:
        if not w.ready:
            raise WorkerError(f"a {self._name} worker did not start within {START_TIMEOUT_S:g} s")
        index, problem, config = w.task
        self._replace(w)
        emit(index, _lost_trial(problem, config, "timeout",
                                f"no result within {timeout:g} s; the {self._name} worker was killed"))


def _nothing_to_emit(index, result) -> None:
    raise AssertionError("a worker still starting has no task")


def _lost_trial(problem: Problem, config: KernelConfig | None, status: str, error: str) -> Trial:
    """The failed Trial of a candidate whose worker was lost."""
    from autokernel.timing import timing_label

    return Trial(problem, config, status, timing=timing_label(), error=error, note=WORKER_LOST)


# --- the compile pool of one machine ------------------------------------------------------


def node_compile_workers(timing_workers: int = 1, cores: int | None = None) -> int:
    """How many compile workers one machine runs beside ``timing_workers`` timing workers
    (one per GPU): one per core they leave, at least one, at most MAX_COMPILE_WORKERS."""
    cores = cores or os.cpu_count() or 1
    return max(1, min(cores - timing_workers, MAX_COMPILE_WORKERS))


_POLL_S = 0.1
"""How often a caller waiting on the compile pool looks up (Ctrl-C, an abort)."""
_STOPPED = object()


def compile_key(problem: Problem, config: KernelConfig | None) -> tuple | None:
    """What decides the binary a candidate compiles to, as far as the compile pool can
    tell without Triton: the config and the problem's dtype, layout and epilogue, and of
    M, N and K what Triton specializes on (the residue mod 16, being 1) or the kernels read
    as constants (K a multiple of the K step, indices past 32 bits). The kernels that take
    integers worked out from the shape specialize on those too: split-K on the K steps per
    slice, stream-K on how the partial wave's tiles and their K steps fall on the persistent
    grid (keyed here by the tile and K-step counts, since the grid is the GPU's), and the
    pointer kernels on the runs of their wrapped row and column indices (``index_run``). Two
    candidates with one key compile once; where the key is too coarse the timing worker
    compiles what is missing itself, so a wrong key costs time, never a result."""
    if config is None:
        return None
    from autokernel.kernels.matmul import index_run  # Triton's: imported where candidates compile

    m, n, k = problem.m, problem.n, problem.k
    big = max(m * k, k * n, m * n) >= 2 ** 31
    k_steps = -(-k // config.block_k)
    derived: tuple = ()
    if config.stream_k:
        rows, cols = knobs.tile_grid(config.swap_ab, config.block_m, config.block_n, m, n)
        derived = (rows * cols, k_steps)
    elif config.split_k > 1:
        per_slice = -(-k_steps // config.split_k)
        derived = (per_slice % 16, per_slice == 1)
    runs = (index_run(m, config.block_m), index_run(n, config.block_n))  # the pointer kernels' wrapped indices
    return (config, problem.dtype, problem.layout, problem.activation, problem.bias,
            tuple((x % 16, x == 1) for x in (m, n, k)), k % config.block_k == 0, big, derived, runs)


class _Batch:
    """One caller's candidates in the compile pool: the tasks still waiting for a worker,
    how many are on one, and where their results go."""

    def __init__(self, seq: int, tasks: Sequence[_Task], timeout: float, device: int | None) -> None:
        self.seq, self.timeout, self.device = seq, timeout, device
        self.pending = deque(tasks)
        self.running = 0
        self.results: queue.SimpleQueue = queue.SimpleQueue()


class CompilePool:
    """The compile workers of one machine, shared by the timing workers of its GPUs.

    Its size is set once for the machine (node_compile_workers: one worker per core the
    timing workers leave); each GPU's WorkerEvaluator hands its candidates to ``run``
    from its own thread, and every free worker takes the next candidate, whichever GPU
    asked. A GPU waiting here is idle, so a free worker serves the batch with the fewest
    candidates still waiting first (its GPU goes back to timing soonest); the order of
    arrival breaks ties. The workers see every GPU of the run (``env``) and launch each
    candidate on the GPU that asked (``device``, an ordinal among those), never beside
    another GPU's measurement; the binaries land in Triton's on-disk cache, which every
    worker shares with the timing workers (TRITON_CACHE_DIR, inherited from this
    process), so the timing worker of that GPU loads them from there.

    One thread of the pool drives the worker processes; ``run`` waits for its batch and
    hands each result to ``emit`` in the caller's thread. A ``run`` left by an exception
    (Ctrl-C, the caller's own error) or by ``stop`` being set cancels its batch: its
    candidates still waiting are dropped and the workers on its candidates killed. After
    ``close`` (or a worker that cannot start) a waiting ``run`` raises WorkerError.
    """

    def __init__(self, size: int, *, compile_fn: CandidateFn | None = None, env: dict[str, str] | None = None,
                 name: str = "compile") -> None:
        if size < 1:
            raise ValueError(f"a compile pool needs one worker at least, got {size}")
        self.size = size
        self._pool = _Pool((compile_fn or compile_candidate,), size, lost_status="compile_error", name=name,
                           env=dict(env or {}))
        self._lock = threading.Lock()
        self._batches: dict[int, _Batch] = {}  # the batches someone waits for
        self._seq = 0
        self._want = 0  # workers asked for by ``start``
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = multiprocessing.Pipe(duplex=False)
        self._closed: str | None = None  # why no batch is taken any more
        # The pool's thread alone: the compile key of each candidate on a worker, and the
        # candidates of other batches with that key waiting for its result (compile_key).
        self._compiling: dict[tuple[int, int], tuple] = {}
        self._followers: dict[tuple, list[tuple[int, int, Problem, KernelConfig | None]]] = {}

    def start(self, n: int) -> None:
        """Start ``n`` workers (at most ``size``) before any candidate needs them, so that their
        start-up (importing torch and Triton) overlaps the timing workers'."""
        with self._lock:
            self._open()
            self._want = max(self._want, n)
        self._wake()

    @property
    def started(self) -> bool:
        """Whether workers were asked for already (``start``, or a batch): a batch sent now
        starts none that would not be started anyway."""
        with self._lock:
            return self._want > 0 or self._seq > 0

    def run(self, tasks: Sequence[_Task], timeout: float, emit: Callable[[int, "Trial | None"], None], *,
            device: int | None = None, stop: threading.Event | None = None) -> None:
        """Compile ``tasks`` (as _Pool.run) on the workers' GPU ``device``; ``emit(index, result)``
        in this thread as each ends."""
        if not tasks:
            return
        left = len(tasks)
        batch: _Batch | None = None
        try:  # registered inside: an interrupt from here on cancels the batch
            with self._lock:
                self._open()
                batch = _Batch(self._seq, tasks, timeout, device)
                self._seq += 1
                self._batches[batch.seq] = batch
            self._wake()
            while left:
                if stop is not None and stop.is_set():
                    raise WorkerError("the compile workers were stopped")
                try:
                    item = batch.results.get(timeout=_POLL_S)
                except queue.Empty:
                    continue
                if item is _STOPPED:
                    raise WorkerError(self._closed or "the compile workers were stopped")
                left -= 1
                emit(*item)
        finally:
            if batch is not None:
                with self._lock:
                    self._batches.pop(batch.seq, None)
                if left:
                    self._wake()  # the pool's thread kills the workers on its candidates

    def close(self, kill: bool = False) -> None:
        """Stop the workers (at once with ``kill``); a ``run`` still waiting raises WorkerError."""
        with self._lock:
            if self._closed is None:
                self._closed = "the compile workers were stopped"
            thread = self._thread
        self._wake()
        if thread is not None:
            thread.join()
        self._pool.close(kill=kill)
        self._stop_batches()
        with self._lock:
            self._wake_w.close()
            self._wake_r.close()

    def _open(self) -> None:
        """Refuse work once closed; start the pool's thread at its first work."""
        if self._closed is not None:
            raise WorkerError(self._closed)
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="autokernel-compile-pool", daemon=True)
            self._thread.start()

    def _wake(self) -> None:
        with self._lock:
            if not self._wake_w.closed:
                self._wake_w.send_bytes(b".")

    def _stop_batches(self) -> None:
        with self._lock:
            batches = list(self._batches.values())
        for batch in batches:
            batch.results.put(_STOPPED)

    def _follow(self, batches: dict[int, _Batch]) -> None:
        """Take out of the batches' queues the candidates whose kernel a worker compiles now
        for another: they wait for that compile instead of compiling it again."""
        if not self._followers:
            return
        for batch in batches.values():
            keep = deque()
            for index, problem, config in batch.pending:
                key = compile_key(problem, config)
                if key is not None and key in self._followers:
                    self._followers[key].append((batch.seq, index, problem, config))
                    batch.running += 1
                else:
                    keep.append((index, problem, config))
            batch.pending = keep

    def _release(self, task_key: tuple[int, int], result, batches: dict[int, _Batch]) -> None:
        """The candidates that waited for the compile of ``task_key``: compiled too where it
        compiled (``result`` None), else back in their batches to compile on their own (a
        failure, a lost worker, a cancelled batch: none of theirs to share)."""
        key = self._compiling.pop(task_key, None)
        if key is None:
            return
        requeued = False
        for seq, index, problem, config in self._followers.pop(key, []):
            batch = batches.get(seq)
            if batch is None:
                continue
            batch.running -= 1
            if result is None:
                batch.results.put((index, None))
            else:
                batch.pending.appendleft((index, problem, config))
                requeued = True
        if requeued:
            self._wake()

    def _serve(self) -> None:
        try:
            while self._step():
                pass
        except BaseException as exc:  # noqa: BLE001  (a worker that cannot start: every caller hears it)
            with self._lock:
                self._closed = str(exc) or type(exc).__name__
            self._pool.close(kill=True)
            self._stop_batches()

    def _step(self) -> bool:
        """Hand free workers the next candidates, then wait for a result, a deadline or news;
        False once closed."""
        pool = self._pool
        with self._lock:
            if self._closed is not None:
                return False
            batches = dict(self._batches)
            want = max(self._want, sum(len(b.pending) + b.running for b in batches.values()))
        for w in list(pool._workers):  # on a candidate of a cancelled batch: no one waits for it
            if w.task is not None and w.task[0][0] not in batches:
                self._release(w.task[0], "cancelled", batches)
                pool.discard(w)
        pool.grow(want)
        self._follow(batches)
        for w in list(pool._workers):
            if not (w.ready and w.task is None):
                continue
            waiting = [b for b in batches.values() if b.pending]
            if not waiting:
                break
            batch = min(waiting, key=lambda b: (len(b.pending), b.seq))
            index, problem, config = batch.pending.popleft()
            try:
                w.submit(((batch.seq, index), problem, config), batch.timeout, 0, batch.device)
            except OSError:  # it died while idle: no candidate's fault, so run the task again
                batch.pending.appendleft((index, problem, config))
                pool._replace(w)
                continue
            batch.running += 1
            key = compile_key(problem, config)
            if key is not None:
                self._compiling[(batch.seq, index)] = key
                self._followers[key] = []
                self._follow(batches)
        busy = [w for w in pool._workers if w.task is not None or not w.ready]
        wait_s = max(0.0, min(w.deadline for w in busy) - time.monotonic()) if busy else None
        readable = multiprocessing.connection.wait([self._wake_r] + [w.conn for w in busy], timeout=wait_s)
        if self._wake_r in readable:
            while self._wake_r.poll():
                self._wake_r.recv_bytes()

        def deliver(key: tuple[int, int], result) -> None:
            seq, index = key
            batch = batches[seq]
            batch.running -= 1
            batch.results.put((index, result))
            self._release(key, result, batches)

        for w in busy:
            if w.conn in readable:
                pool._receive(w, deliver)
            elif time.monotonic() >= w.deadline:
                timeout = batches[w.task[0][0]].timeout if w.task is not None else START_TIMEOUT_S
                pool._expire(w, deliver, timeout)
        return True
