"""Where a tuning run's time goes, per device and per problem.

``tune(..., timeline=Timeline())`` records, on each device, the span of every job (one
problem tuned there) and, inside it, the phases its timing worker reports
(WorkerEvaluator ``on_phase``). ``spans()`` then cuts each device's run, from the call
to its return, into spans that neither overlap nor leave a gap:

- ``setup``: before the device's first job (the driver reading the history, checking the
  request, starting workers);
- ``start``: waiting for the device's timing worker to come up;
- ``probe``: the timing worker looking for the candidates' binaries in Triton's cache;
- ``compile``: waiting for compiles (the compile pool, shared by every GPU);
- ``timing``: the timing worker checking and timing candidates, re-timing the leaders,
  measuring cuBLAS: the GPU busy;
- ``driver``: the rest of a job, this process's own work (the strategy's proposals,
  writing the history, the kept readings);
- ``lent``: running part of another device's batch for its problem (an idle device lends
  its evaluator: tuning.fleet); the phases it reports meanwhile count for ``busy`` but are
  not cut out of the span;
- ``idle``: waiting for the next job between two;
- ``tail``: done with its jobs, waiting to lend or for the other devices to finish (the
  load-imbalance tail);
- ``close``: stopping the workers once every device is done.

Recording costs a clock read and a list append per phase; ``tune`` records nothing
unless given a Timeline.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable, ContextManager, Iterator

KINDS = ("setup", "start", "probe", "compile", "timing", "driver", "lent", "idle", "tail", "close")
PHASES = ("start", "probe", "compile", "timing")
"""The kinds an evaluator reports; the others are worked out from the jobs."""


@dataclass(frozen=True)
class Span:
    device: str
    kind: str
    start: float
    """Seconds since the run began."""
    end: float
    problem: str | None = None

    @property
    def seconds(self) -> float:
        return self.end - self.start


class Timeline:
    """The spans of one run (see the module's docstring); thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._t0 = clock()
        self._end: float | None = None
        self._jobs: list[Span] = []  # kind "job", or "lent" for a part of another device's batch
        self._phases: list[Span] = []
        self._current: dict[str, str] = {}  # device -> the problem of its job under way
        self._devices: list[str] = []
        self._closing: dict[str, float] = {}
        self._compiled: dict[str, list] = {}  # device -> [kernels, seconds] its timing worker compiled

    def begin(self) -> None:
        """The run starts now (else: when the Timeline was made)."""
        with self._lock:
            self._t0 = self._clock()

    def end(self) -> None:
        """The run ends now."""
        with self._lock:
            self._end = self._clock() - self._t0

    def closed(self, what: str, seconds: float) -> None:
        """Closing ``what`` (a device's workers, the compile pool) took ``seconds``: they
        close at once, so the run's close is the longest of them (``closing``)."""
        with self._lock:
            self._closing[what] = seconds

    @property
    def closing(self) -> dict[str, float]:
        """The seconds each thing took to close (``closed``)."""
        with self._lock:
            return dict(self._closing)

    def device(self, device: str) -> None:
        """``device`` takes part in the run (a device that got no job has a span all the same)."""
        with self._lock:
            if device not in self._devices:
                self._devices.append(device)

    def job(self, device: str, problem: str) -> ContextManager[None]:
        """The block tunes ``problem`` on ``device``."""
        return self._span(device, problem, "job")

    def lent(self, device: str, problem: str) -> ContextManager[None]:
        """The block runs, on ``device``, part of a batch of ``problem`` tuned on another."""
        return self._span(device, problem, "lent")

    @contextlib.contextmanager
    def _span(self, device: str, problem: str, kind: str) -> Iterator[None]:
        self.device(device)
        start = self._clock()
        with self._lock:
            self._current[device] = problem
        try:
            yield
        finally:
            end = self._clock()
            with self._lock:
                self._current.pop(device, None)
                self._jobs.append(Span(device, kind, start - self._t0, end - self._t0, problem))

    def recorder(self, device: str) -> Callable[[str, float, float], None]:
        """``on_phase(kind, start, end)`` for the evaluator of ``device`` (times from this
        Timeline's clock, time.perf_counter by default)."""
        self.device(device)

        def on_phase(kind: str, start: float, end: float) -> None:
            with self._lock:
                self._phases.append(Span(device, kind, start - self._t0, end - self._t0, self._current.get(device)))

        return on_phase

    def compiler(self, device: str) -> Callable[[int, float], None]:
        """``on_compiled(kernels, seconds)`` for the evaluator of ``device``: kernels its
        timing worker compiled itself, while the GPU was to measure."""
        self.device(device)

        def on_compiled(kernels: int, seconds: float) -> None:
            with self._lock:
                total = self._compiled.setdefault(device, [0, 0.0])
                total[0] += kernels
                total[1] += seconds

        return on_compiled

    def spans(self) -> list[Span]:
        """Each device's run cut into spans, in time order per device (see KINDS)."""
        with self._lock:
            jobs, phases, devices = list(self._jobs), list(self._phases), list(self._devices)
            end = self._end if self._end is not None else self._clock() - self._t0
        work_end = max((j.end for j in jobs), default=0.0)
        out: list[Span] = []
        for device in devices:
            mine = sorted((j for j in jobs if j.device == device), key=lambda j: j.start)
            last_job = max((n for n, j in enumerate(mine) if j.kind == "job"), default=-1)
            cursor = 0.0

            def add(kind: str, until: float, problem: str | None = None) -> None:
                nonlocal cursor
                until = min(max(until, cursor), end)
                if until > cursor:
                    out.append(Span(device, kind, cursor, until, problem))
                    cursor = until

            for n, job in enumerate(mine):
                add("setup" if n == 0 else "idle" if n <= last_job else "tail", job.start)
                if job.kind == "lent":
                    add("lent", job.end, job.problem)
                    continue
                inside = sorted((p for p in phases if p.device == device and job.start <= p.start < job.end),
                                key=lambda p: p.start)
                for phase in inside:
                    add("driver", phase.start, job.problem)
                    add(phase.kind, min(phase.end, job.end), job.problem)
                add("driver", job.end, job.problem)
            add("setup" if not mine else "tail", work_end)  # done, or lending, while others tune
            add("close", end)
        return out

    def as_dicts(self) -> list[dict]:
        """The spans as plain data (JSON), times rounded to the millisecond."""
        return [{**asdict(s), "start": round(s.start, 3), "end": round(s.end, 3)} for s in self.spans()]

    def summary(self) -> dict[str, dict]:
        """Per device: the run's seconds, seconds per kind, the share of the run spent timing
        (``busy``: its own jobs' and the parts it ran for others'), each job's problem and
        seconds in the order run, the same of its loans (``lent``), and the kernels its timing
        worker compiled itself and their seconds (``compiled``, within ``timing``)."""
        spans = self.spans()
        with self._lock:
            jobs = sorted(self._jobs, key=lambda j: j.start)
            phases = list(self._phases)
            compiled = {device: tuple(c) for device, c in self._compiled.items()}
        out: dict[str, dict] = {}
        for device in dict.fromkeys(s.device for s in spans):
            mine = [s for s in spans if s.device == device]
            wall = mine[-1].end - mine[0].start
            seconds = {kind: sum(s.seconds for s in mine if s.kind == kind) for kind in KINDS}
            loans = [j for j in jobs if j.device == device and j.kind == "lent"]
            lent_timing = sum(min(p.end, j.end) - p.start for j in loans for p in phases
                              if p.device == device and p.kind == "timing" and j.start <= p.start < j.end)
            busy = seconds["timing"] + lent_timing
            out[device] = {"wall_s": wall, "seconds": seconds, "busy": busy / wall if wall > 0 else 0.0,
                           "jobs": [(j.problem, j.seconds) for j in jobs if j.device == device and j.kind == "job"],
                           "lent": [(j.problem, j.seconds) for j in loans],
                           "compiled": compiled.get(device, (0, 0.0))}
        return out


def table(summary: dict[str, dict]) -> list[str]:
    """Timeline.summary as lines of a table: per device the run's seconds, the share
    timing on the GPU (busy) and the seconds of each kind."""
    shown = ("timing", "compile", "probe", "start", "driver", "lent", "setup", "idle", "tail", "close")
    lines = [f"{'device':<10} {'wall s':>7} {'busy':>5} " + " ".join(f"{k:>7}" for k in shown) + "  jobs"]
    for device, row in summary.items():
        cells = " ".join(f"{row['seconds'][k]:>7.1f}" for k in shown)
        jobs = ", ".join(f"{seconds:.1f}" for _, seconds in row["jobs"])
        kernels, seconds = row.get("compiled", (0, 0.0))
        compiled = f"  (timing worker compiled {kernels} kernels itself, {seconds:.1f} s of its timing)" if kernels else ""
        lines.append(f"{device:<10} {row['wall_s']:>7.1f} {row['busy']:>5.0%} {cells}  {jobs}{compiled}")
    return lines
