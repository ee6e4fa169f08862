"""Evaluation that survives bad candidates: every config runs in a spawned worker process
with a wall-clock limit.

A candidate may raise, fail to compile, need more shared memory than there is, poison
the CUDA context with an illegal memory access, kill its process (a segfault,
``os._exit``) or hang. Each becomes a failed Trial with its status and one line of
error; a worker that died, hung or holds a broken CUDA context is replaced, and the
evaluation goes on.

On a GPU a batch runs in two phases. Compile workers, one per CPU core, launch each
candidate once (``evaluate.launch_once``) in parallel: that records compile errors and
OutOfResources, and leaves each binary in Triton's on-disk cache. Then one timing worker
checks and times the survivors one at a time (``evaluate`` with ``gpu_ms``), loading the
binaries from the cache, so no compile runs beside a measurement. Under the interpreter
there is nothing to compile: the timing worker alone runs each candidate.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections import deque
from typing import Callable, Iterator, Sequence

from autokernel import runtime
from autokernel.config import KernelConfig
from autokernel.evaluate import Trial, error_line, evaluate, failure_status, launch_once
from autokernel.problem import Problem
from autokernel.timing import time_fn, timing_label
from autokernel.tuning.evaluator import OnTrial, mark_retimed

CandidateFn = Callable[[Problem, KernelConfig], "Trial | None"]
"""What a worker runs for each candidate: the timing worker returns its Trial; a compile
worker returns None when the candidate may go on to timing, else its failed Trial.
Workers are spawned, so it must pickle: a module-level function or a functools.partial
of one."""

TIMEOUT_S = 120.0
"""Default wall-clock limit for one candidate (autokernel tune's --timeout default)."""
START_TIMEOUT_S = 300.0
"""How long a fresh worker may take to import torch and Triton before the run is given up."""
_MAX_COMPILE_WORKERS = 16
# Tuning ranks by gpu_ms (CUDA-graph replay); the event timer's median is kept beside it,
# on a shorter budget than bench's so that a sweep of hundreds of configs fits a lease.
_TUNING_TIMER = functools.partial(time_fn, warmup_ms=10.0, rep_ms=30.0)

_READY = "ready"
_Task = tuple[int, Problem, KernelConfig]  # (index in the batch, problem, config)


def compile_candidate(problem: Problem, config: KernelConfig) -> Trial | None:
    """The compile phase's task: ``launch_once``, then hand the inputs' memory back so an
    idle compile worker holds only its CUDA context while the timing worker measures."""
    failed = launch_once(problem, config)
    import torch

    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return failed


class WorkerError(RuntimeError):
    """A worker could not be started: the environment is broken, not a candidate."""


class WorkerEvaluator:
    """The Evaluator of tuning runs (tuning.evaluator.Evaluator): candidates run in
    spawned worker processes that no bad candidate can take down.

    Args:
        evaluate_fn: ``f(problem, config) -> Trial`` run by the timing worker; default
            ``evaluate`` with ``graph_time=True`` (``gpu_ms`` beside ``ms`` on a GPU).
        compile_fn: ``f(problem, config) -> Trial | None`` run by the compile workers;
            default compile_candidate.
        compile_workers: how many compile workers; default one per CPU core (at most 16)
            on a GPU, and none under the interpreter, where there is nothing to compile.
        timeout_s: seconds one candidate may take in the timing worker (its result is a
            "timeout" Trial after that); compile_timeout_s the same in a compile worker
            (default: timeout_s).
        spare: keep one more timing worker started, so that replacing a lost one costs
            no start-up (importing torch and Triton takes seconds).

    ``on_trial`` gets each trial as soon as it is final: on a GPU the compile phase's
    failures come first, then the timed trials in the order given. The returned list
    is in the order given. Ctrl-C (or any exception, from ``on_trial`` too) kills the
    workers and propagates; the trials already passed to ``on_trial`` stand.
    """

    def __init__(
        self,
        *,
        evaluate_fn: CandidateFn | None = None,
        compile_fn: CandidateFn | None = None,
        compile_workers: int | None = None,
        timeout_s: float = TIMEOUT_S,
        compile_timeout_s: float | None = None,
        spare: bool = True,
    ) -> None:
        if compile_workers is None:
            compile_workers = 0 if runtime.INTERPRETER else min(os.cpu_count() or 1, _MAX_COMPILE_WORKERS)
        compile_timeout_s = timeout_s if compile_timeout_s is None else compile_timeout_s
        if timeout_s <= 0 or compile_timeout_s <= 0:
            raise ValueError(f"timeouts must be > 0 s, got {timeout_s} and {compile_timeout_s}")
        self.timeout_s = timeout_s
        self.compile_timeout_s = compile_timeout_s
        self._timing = _Pool(evaluate_fn or functools.partial(evaluate, graph_time=True, timer=_TUNING_TIMER), 1,
                             lost_status="runtime_error", name="timing", spare=spare)
        self._compile = (_Pool(compile_fn or compile_candidate, compile_workers, lost_status="compile_error",
                               name="compile") if compile_workers > 0 else None)
        self.phase_s: dict[str, float] = {}
        """Wall seconds of the last call's phases: "compile" (GPU only) and "timing"."""

    def evaluate(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        trials: list[Trial | None] = [None] * len(configs)
        final = _finisher(trials, on_trial)

        def compiled(index: int, failed: Trial | None) -> None:
            if failed is not None:
                final(index, failed)

        tasks = [(i, problem, config) for i, config in enumerate(configs)]
        self.phase_s = {}
        with self._killed_on_error():
            if tasks:
                self._timing.grow(1)  # the timing worker starts while the candidates compile
            if self._compile is not None and tasks:
                start = time.perf_counter()
                self._compile.run(tasks, self.compile_timeout_s, compiled)
                self.phase_s["compile"] = time.perf_counter() - start
                tasks = [task for task in tasks if trials[task[0]] is None]
            start = time.perf_counter()
            self._timing.run(tasks, self.timeout_s, final)
            self.phase_s["timing"] = time.perf_counter() - start
        return trials  # type: ignore[return-value]  # every index was filled

    def retime(self, problem: Problem, configs: Sequence[KernelConfig], on_trial: OnTrial | None = None) -> list[Trial]:
        """Check and time ``configs`` again, one after the other in the timing worker, each
        new Trial noted "re-timed": for a winner that beats the runner-up by a suspicious
        margin (see evaluator.suspicious_pair), measured again side by side. The new trials are
        the ones to keep and rank by (record them through ``on_trial``)."""
        trials: list[Trial | None] = [None] * len(configs)
        with self._killed_on_error():
            self._timing.run([(i, problem, config) for i, config in enumerate(configs)], self.timeout_s,
                             _finisher(trials, on_trial, retimed=True))
        return trials  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the workers (a later evaluate starts new ones)."""
        for pool in self._pools():
            pool.close()

    def __enter__(self) -> "WorkerEvaluator":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _pools(self) -> list["_Pool"]:
        return [self._timing] + ([self._compile] if self._compile is not None else [])

    @contextlib.contextmanager
    def _killed_on_error(self) -> Iterator[None]:
        try:
            yield
        except BaseException:  # Ctrl-C included: no worker outlives the run
            for pool in self._pools():
                pool.close(kill=True)
            raise


def _finisher(trials: list, on_trial: OnTrial | None, retimed: bool = False) -> Callable[[int, Trial], None]:
    """``final(index, trial)``: mark the trial re-timed if asked, put it in its place in
    ``trials`` and pass it to ``on_trial``."""

    def final(index: int, trial: Trial) -> None:
        if retimed:
            mark_retimed(trial)
        trials[index] = trial
        if on_trial is not None:
            on_trial(trial)

    return final


# --- worker processes ---------------------------------------------------------------------


def _serve(conn: multiprocessing.connection.Connection, fn: CandidateFn) -> None:
    """A worker's loop: for each (problem, config) received, send back (result, healthy).

    A Python exception from ``fn`` becomes a failed Trial here. ``healthy`` is False when
    the CUDA context is broken afterwards; the worker then stops and is replaced.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
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
        problem, config = task
        try:
            result = fn(problem, config)
        except Exception as exc:
            result = Trial(problem, config, failure_status(exc), timing=timing_label(), error=error_line(exc))
        healthy = _cuda_healthy()
        conn.send((result, healthy))
        if not healthy:
            return


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

    def __init__(self, ctx, fn: CandidateFn, name: str) -> None:
        self.name = name
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, fn), name=f"autokernel-{name}", daemon=True)
        with _sigint_ignored():
            self.process.start()
        child.close()  # so that the worker's death reads as end-of-file here
        self.ready = False
        self.task: _Task | None = None
        self.deadline = time.monotonic() + START_TIMEOUT_S

    def submit(self, task: _Task, timeout: float) -> None:
        self.conn.send(task[1:])
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
    """Up to ``size`` workers running ``fn``; one that dies, overruns its task's deadline
    or reports a broken CUDA context is replaced (by the spare, when kept)."""

    def __init__(self, fn: CandidateFn, size: int, *, lost_status: str, name: str, spare: bool = False) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._fn = fn
        self._size = size
        self._lost_status = lost_status  # the status of a candidate whose worker died
        self._name = name
        self._keep_spare = spare
        self._workers: list[_Worker] = []
        self._spare: _Worker | None = None

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

    def run(self, tasks: Sequence[_Task], timeout: float, emit: Callable[[int, "Trial | None"], None]) -> None:
        """Run every task on the first free worker; ``emit(index, result)`` as each ends,
        a lost worker's task as a failed Trial ("timeout" past ``timeout`` seconds)."""
        pending = deque(tasks)
        self.grow(len(pending))
        while pending or any(w.task is not None for w in self._workers):
            for w in self._workers:
                if w.ready and w.task is None and pending:
                    task = pending.popleft()
                    try:
                        w.submit(task, timeout)
                    except OSError:  # it died while idle: no candidate's fault, so run the task again
                        pending.appendleft(task)
                        self._replace(w)
            waiting = [w for w in self._workers if w.task is not None or not w.ready]
            if not waiting:
                continue
            wait_s = max(0.0, min(w.deadline for w in waiting) - time.monotonic())
            readable = multiprocessing.connection.wait([w.conn for w in waiting], timeout=wait_s)
            for w in waiting:
                if w.conn in readable:
                    self._receive(w, emit)
                elif time.monotonic() >= w.deadline:
                    self._expire(w, emit, timeout)

    def close(self, kill: bool = False) -> None:
        workers = self._workers + ([self._spare] if self._spare else [])
        if not kill:
            for w in workers:
                w.ask_to_stop()
        for w in workers:
            w.stop(kill or not w.ready)  # one still starting has nothing to finish
        self._workers, self._spare = [], None

    def _start(self) -> _Worker:
        return _Worker(self._ctx, self._fn, self._name)

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
                emit(index, Trial(problem, config, self._lost_status, timing=timing_label(),
                                  error=f"the {self._name} worker died ({why})"))
            return
        if message == _READY:
            w.ready = True
            self._start_spare()
            return
        result, healthy = message
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
        emit(index, Trial(problem, config, "timeout", timing=timing_label(),
                          error=f"no result within {timeout:g} s; the {self._name} worker was killed"))
