"""`autokernel tune` and `autokernel loop`: propose, evaluate and record configs, generation after generation."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterator

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from autokernel.cli._common import (
    EXIT_FAILED,
    ActivationOpt,
    DtypeOpt,
    ForceOpt,
    HistoryOpt,
    InterpretOpt,
    JsonOpt,
    KOpt,
    MOpt,
    NOpt,
    SizeOpt,
    check_interpreter_budget,
    console,
    err_console,
    fail,
    fmt,
    history_store,
    matmul_config,
    note,
    path_option,
    print_json,
    print_table,
    problem_sizes,
    require_kernel_device,
    require_timing_mode,
    start_run,
    user_errors,
    warn,
)
from autokernel.history import resolve_history_path
from autokernel.records import Problem, Recorded, Trial, normalize_activation, parse_dtype
from autokernel.tuning.cluster import check_address
from autokernel.tuning.fleet import parse_gpus
from autokernel.tuning.shapes import model_shapes, read_shapes, write_shapes
from autokernel.tuning.strategies import STRATEGIES
from autokernel.tuning.worker import WorkerEvaluator
from autokernel.userfiles import make_parent, same_file

# torch and Triton load only once a run starts (the timing worker first, see _start_workers):
# the modules that import them (runtime, timing, tuning.space, tuning.loop, tuning.run) are
# imported inside the functions that use them.

if TYPE_CHECKING:
    from autokernel.tuning.loop import StopRules, TuneResult
    from autokernel.tuning.run import TuneOutcome

GPU_SIZE = 4096
INTERPRETER_SIZE = 64

GenerationsOpt = Annotated[int, typer.Option("--generations", "-g", help="Generations to run (each proposes --per-generation configs).")]
PerGenOpt = Annotated[int, typer.Option("--per-generation", "-n", help="Configs proposed and evaluated per generation.")]
StrategyOpt = Annotated[
    str, typer.Option("--strategy", help=f"One of {', '.join(STRATEGIES)}; auto: LLM-seeded optuna where a key or "
                                         "base URL is set, else optuna.")
]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", help="all, or GPU indices such as 0,1: one timing worker per GPU, each problem "
                                            "to the next free GPU, longest first (default: one GPU).")
]
ClusterOpt = Annotated[
    str | None, typer.Option("--cluster", help="auto (the Ray cluster this machine belongs to) or ray://HOST:PORT: "
                                               "one Ray actor per GPU of the cluster (needs autokernel[ray]).")
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed the strategy, for reproducible runs.")]
PlotOpt = Annotated[Path | None, typer.Option("--plot", parser=path_option, help="Write the learning curve (best TFLOP/s so far per trial) to this PNG.")]
ReplayOpt = Annotated[
    Path | None, typer.Option("--replay", parser=path_option,
                                help="Answer from a recorded sweep (a history CSV) instead of running kernels.")
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds one candidate may take (compile, check, time) before it is killed.")]
LayoutOpt = Annotated[
    str, typer.Option("--layout", help="nn (row-major B), nt (B is an [N, K] weight's .t(), as in nn.Linear), tn or tt.")
]
BiasOpt = Annotated[bool, typer.Option("--bias/--no-bias", help="Tune with a bias vector in the epilogue.")]
ModelOpt = Annotated[str | None, typer.Option("--model", help="The LLM for --strategy llm/auto (else $AUTOKERNEL_LLM_MODEL).")]
CacheOpt = Annotated[
    bool, typer.Option("--cache/--no-cache", help="Reuse earlier readings of the same configs on this GPU, torch, Triton "
                                                  "and autokernel code ($AUTOKERNEL_CACHE_DIR, else $XDG_CACHE_HOME/"
                                                  "autokernel or ~/.cache/autokernel); --no-cache measures every config "
                                                  "again and keeps the new readings in place of the old.")
]


@dataclasses.dataclass
class TuneOptions:
    generations: int
    per_generation: int
    strategy: str
    seed: int | None
    timeout: float
    model: str | None
    replay: Path | None
    cache: bool = True


def tune(
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    bias: BiasOpt = False,
    layout: LayoutOpt = "nn",
    generations: GenerationsOpt = 5,
    per_generation: PerGenOpt = 8,
    strategy: StrategyOpt = "auto",
    seed: SeedOpt = None,
    history: HistoryOpt = None,
    interpret: InterpretOpt = False,
    force: ForceOpt = False,
    replay: ReplayOpt = None,
    timeout: TimeoutOpt = 120.0,
    model: ModelOpt = None,
    cache: CacheOpt = True,
    gpus: GpusOpt = None,
    cluster: ClusterOpt = None,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """Tune kernel configs for each problem: a strategy proposes, each candidate is checked
    and timed in an isolated worker, every trial goes to the history.

    A second run on the same history continues where the first stopped. Ctrl-C keeps
    every finished trial. Ends with the learning curve per generation and the winner
    against cuBLAS (torch.matmul / addmm + activation).
    """
    workers = _start_workers(timeout, replay, gpus, cluster)
    with _closed_on_error(workers), user_errors():
        where = _where(gpus, cluster, replay)
        # The options first: a mistyped one is named before this machine is judged.
        options = _options(generations, per_generation, strategy, seed, timeout, model, replay, cache)
        problems = _problems(size, m, n, k, dtype, activation, bias, layout, interpret, replay)
        if replay is None:
            check_interpreter_budget(problems, force)
    run(problems, options, history, json_out, plot, command="tune", workers=workers, **where)


def _positive(seconds: float) -> bool:
    """A usable duration: finite and > 0 (nan would disable every deadline, inf overflows one)."""
    return math.isfinite(seconds) and seconds > 0


def _start_workers(timeout: float, replay: Path | None, gpus: str | None = None, cluster: str | None = None):
    """The tuning run's WorkerEvaluator with its timing worker started, before this process
    imports torch and Triton (parsing the problem does): the worker's start-up, the same
    imports plus a CUDA context, then overlaps this process's own. None when replaying, on
    several GPUs (each gets its own) or when --timeout is invalid (_options says so)."""
    if replay is not None or gpus is not None or cluster is not None or not _positive(timeout):
        return None
    workers = WorkerEvaluator(timeout_s=timeout)
    workers.start()
    return workers


@contextlib.contextmanager
def _closed_on_error(workers) -> Iterator[None]:
    """Stop the started workers when the request is refused (or anything else ends the run)."""
    try:
        yield
    except BaseException:
        if workers is not None:
            workers.close()
        raise


def _where(gpus: str | None, cluster: str | None, replay: Path | None) -> dict:
    """Where the candidates run: ``gpus`` parsed, ``cluster`` checked; ValueError (one line) otherwise."""
    if gpus is not None and cluster is not None:
        raise ValueError("give --gpus (this machine's GPUs) or --cluster (a Ray cluster's), not both")
    if replay is not None and gpus is not None:
        raise ValueError("--gpus runs candidates on this machine's GPUs: --replay does not apply")
    if cluster is not None:
        check_address(cluster)
    return {"gpus": None if gpus is None else parse_gpus(gpus), "cluster": cluster}


def _problems(size, m, n, k, dtype, activation, bias, layout, interpret, replay) -> list["Problem"]:
    sizes = problem_sizes(size, m, n, k)
    dtypes = [parse_dtype(d) for d in dtype] if dtype else ["float16"]
    acts = [normalize_activation(a) for a in activation] if activation else ["none"]
    if replay is None:
        require_timing_mode(interpret)
    elif interpret:
        fail("--replay answers from a recorded sweep: --interpret does not apply")
    if sizes is None:
        from autokernel import runtime

        s = INTERPRETER_SIZE if (runtime.INTERPRETER and replay is None) else GPU_SIZE
        sizes = [(s, s, s)]
    return _tunable([Problem(mm, nn, kk, d, a, bias, layout)
                     for (mm, nn, kk), d, a in itertools.product(sizes, dtypes, acts)])


def _tunable(problems: list["Problem"]) -> list["Problem"]:
    """The problems, or one line and exit 2 for one with nothing to time (a zero size)."""
    for p in problems:
        if 0 in (p.m, p.n, p.k):
            fail(f"{p.label()}: M, N and K must be > 0 to tune (a zero size leaves nothing to time)")
    return problems


def _options(generations, per_generation, strategy, seed, timeout, model, replay, cache=True) -> TuneOptions:
    if generations < 1:
        fail(f"--generations must be >= 1, got {generations}")
    if per_generation < 1:
        fail(f"--per-generation must be >= 1, got {per_generation}")
    if not _positive(timeout):
        fail(f"--timeout must be a finite number of seconds > 0, got {timeout:g}")
    if strategy not in STRATEGIES:
        fail(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if replay is not None and not replay.is_file():
        if replay.is_dir():
            fail(f"--replay {replay} is a directory, not a history CSV")
        fail(f"--replay {replay} is not a regular file" if replay.exists() else f"--replay file {replay} does not exist")
    return TuneOptions(generations, per_generation, strategy, seed, timeout, model, replay, cache)


def run(problems: list["Problem"], options: TuneOptions, history: str | None, json_out: bool, plot: Path | None,
        *, command: str, stop: "StopRules | None" = None, workers=None, gpus=None, cluster: str | None = None) -> None:
    """Tune the problems (autokernel.tuning.tune); render, write JSON and the plot. Ctrl-C:
    cli.main counts this run's rows on disk; the evaluator's workers (``workers``: started
    already, see _start_workers) are closed on the way out."""
    from autokernel.tuning.run import RequestError, tune as tune_problems

    with _closed_on_error(workers):
        require_kernel_device()  # a replay too: its rows name this machine's GPU
        store = history_store(history)
        if plot is not None:
            _check_plot_path(plot)
        # what autokernel.matmul runs here now, for the summary; a broken tuned-config file stops the run first
        here = options.replay is None and cluster is None  # this machine's GPU model tunes (one model for --gpus)
        picked = {p: matmul_config(p) for p in problems} if here else {}
    run_id = start_run(store)
    view = _LiveView(quiet=json_out)
    try:
        with view:
            done = tune_problems(
                problems, strategy=options.strategy, history=store, generations=options.generations,
                per_generation=options.per_generation, seed=options.seed, stop=stop, replay=options.replay,
                cache=options.cache, model=options.model, timeout_s=options.timeout, gpus=gpus, cluster=cluster,
                workers=workers, command=command, run_id=run_id, hooks=view.hooks())
    except RequestError as exc:
        fail(str(exc))
    several = len({o.device for o in done.outcomes}) > 1
    results = [{"outcome": o, "matmul": picked.get(o.problem), "several": several} for o in done.outcomes]
    for line in done.lost:
        warn(line)
    if plot is not None:
        _write_plot(plot, results)
    if json_out:
        print_json([_to_json(o) for o in results])
    else:
        for outcome in results:
            _render(outcome)
        if plot is not None:
            console.print(f"learning curve written to {plot}", highlight=False)
    if not any(o.result.best is not None for o in done.outcomes):
        raise typer.Exit(EXIT_FAILED)


class _LiveView:
    """The run as it goes, on stderr: one row per device (its problem, strategy and best so
    far, trials done of planned), gone when the run ends. Off with --json or no terminal."""

    def __init__(self, quiet: bool) -> None:
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=err_console, transient=True,
                                 disable=quiet or not err_console.is_terminal)
        self._lock = threading.Lock()
        self._tasks: dict[int, Any] = {}
        self._best: dict[int, float | None] = {}
        self._what: dict[int, str] = {}

    def __enter__(self) -> "_LiveView":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        self.progress.__exit__(*exc_info)

    def hooks(self):
        from autokernel.tuning.run import Hooks

        return Hooks(note=note, warn=warn, start=self._start, trial=self._trial)

    def _start(self, slot, problem, strategy: str, total: int) -> None:
        with self._lock:
            key = id(slot)
            where = f"{slot.device} · " if slot.device.index is not None or slot.device.label else ""
            self._what[key] = f"{where}{problem.label()} · {strategy}"
            self._best[key] = None
            if key not in self._tasks:
                self._tasks[key] = self.progress.add_task(self._what[key], total=total)
            else:
                self.progress.reset(self._tasks[key], total=total, description=self._what[key])

    def _trial(self, slot, problem, trial: "Trial") -> None:
        with self._lock:
            key = id(slot)
            task = self._tasks.get(key)
            if task is None:
                return
            if trial.ok and trial.rank_ms is not None:
                best = self._best.get(key)
                self._best[key] = trial.rank_ms if best is None else min(best, trial.rank_ms)
            best = self._best.get(key)
            said = f"best {fmt(best)} ms" if best is not None else "no success yet"
            state = self.progress.tasks[[t.id for t in self.progress.tasks].index(task)]
            done = state.completed + 1  # the tuner's re-timings count too: the total grows to them
            self.progress.update(task, completed=done, total=max(done, state.total or 0),
                                 description=f"{self._what[key]} · {said}")


def _speedup(result: "TuneResult", baseline: "Trial | None") -> float | None:
    """cuBLAS time / our time, on the timer's median (the same clock for both)."""
    best = _best_trial(result)
    if baseline is None or not baseline.ok or best is None:
        return None
    ours = best.get("ms")
    return baseline.ms / ours if ours else None


def _best_trial(result: "TuneResult") -> dict | None:
    """The winner's numbers, from the history row behind ``result.best``: its re-timed row
    where the tuner measured it again, this run's or an earlier run's."""
    best = result.best
    if best is None:
        return None
    from autokernel.tuning.space import config_key

    # this_run: first tried in this run (an earlier run's winner re-timed now was not)
    found = any(config_key(t.config) == config_key(best.config) for t in result.trials if t.config is not None)
    run_id = best.run_id if isinstance(best, Recorded) else None
    return {"config": best.config, "ms": best.ms, "gpu_ms": best.gpu_ms, "tflops": best.tflops,
            "rank_ms": best.rank_ms, "this_run": found, "found_by": None if found else run_id}


def _render(entry: dict) -> None:
    from autokernel.timing import tflops

    outcome: "TuneOutcome" = entry["outcome"]
    result, baseline = outcome.result, outcome.baseline
    p = result.problem
    where = f" · {outcome.device}" if entry["several"] else ""
    table = Table(title=f"autokernel tune · {p.label()}{where} · {result.strategy} · {outcome.space_size} configs "
                        "in the space")
    for name in ("generation", "trials", "ok", "gen best ms", "best so far ms", "TFLOP/s", "best config"):
        table.add_column(name, justify="left" if name == "best config" else "right")
    for g in result.generations:
        table.add_row(str(g.generation), str(g.trials), str(g.ok), fmt(g.gen_best_ms), fmt(g.best_ms),
                      fmt(tflops(p.flops, g.best_ms), 1), g.best_config.short() if g.best_config else "-")
    print_table(table)
    best = _best_trial(result)
    prior = f" (plus {result.prior_trials} from earlier runs)" if result.prior_trials else ""
    console.print(f"{len(result.trials)} trial(s) this run{prior}, {result.failed} failed; stopped: {result.stopped}",
                  highlight=False)
    if best is None:
        console.print("[red]no successful config[/]")
        return
    line = f"winner {best['config'].short()}: {fmt(best['rank_ms'])} ms ranked"
    if not best["this_run"]:  # the history's best, tried first by another run (earlier, or beside this one)
        line += f" (found by run {best['found_by']}, not this one)" if best["found_by"] else " (found by another run)"
    if best["ms"] is not None:
        gpu = f", GPU {fmt(best['gpu_ms'])} ms" if best["gpu_ms"] is not None else ""
        line += f" (median {fmt(best['ms'])} ms{gpu})"
    # the interpreter's baseline is torch on the CPU, not cuBLAS
    rival = "torch (CPU)" if baseline is not None and baseline.timing == "interpreter" else "cuBLAS"
    if baseline is not None and baseline.ok:
        speedup = _speedup(result, baseline)
        line += f" · {rival} {fmt(baseline.ms)} ms" + (f" · speedup {speedup:.2f}x" if speedup else "")
    elif baseline is not None:
        line += f" · {rival} {baseline.status}: {baseline.error}"
    console.print(line, highlight=False)
    if entry.get("matmul") is not None:
        config, source = entry["matmul"]
        if _same_launch(config, best["config"], p):
            console.print(f"autokernel.matmul runs the winner here already ({source})", highlight=False)
        else:
            console.print(f"autokernel.matmul runs {config.short()} ({source}) here; for the winner: "
                          "autokernel export-best -o best.json, then AUTOKERNEL_CONFIG=best.json", highlight=False)


def _same_launch(a: Any, b: Any, problem: Any) -> bool:
    """Whether configs ``a`` and ``b`` launch the same kernel for ``problem``: alike as the
    tuning space writes them (``SearchSpace.canonical``: group_m values that order the
    problem's tiles alike are one)."""
    from autokernel.tuning.space import SearchSpace

    canonical = SearchSpace(problem).canonical
    return canonical(a) == canonical(b)


def _to_json(entry: dict) -> dict:
    outcome: "TuneOutcome" = entry["outcome"]
    result, baseline = outcome.result, outcome.baseline
    best = _best_trial(result)
    if best is not None:
        best = {**best, "config": best["config"].model_dump()}
    return {
        "problem": result.problem.to_dict(), "device": outcome.device, "strategy": result.strategy,
        "run_id": result.run_id, "space_size": outcome.space_size, "prior_trials": result.prior_trials, "trials": len(result.trials),
        "failed": result.failed, "stopped": result.stopped, "events": result.events,
        "confirmation": result.confirmation, "reused_readings": outcome.reused,
        "generations": [g.to_dict() for g in result.generations], "best": best,
        "baseline": None if baseline is None else baseline.to_dict(), "speedup": _speedup(result, baseline),
        "matmul_config": None if entry.get("matmul") is None else {
            "config": entry["matmul"][0].model_dump(), "source": entry["matmul"][1]},
    }


def _check_plot_path(path: Path) -> None:
    if path.suffix.lower() != ".png":
        fail(f"--plot writes a PNG: give a path ending in .png, got {path}")
    if path.is_dir():
        fail(f"--plot {path} is a directory: give the PNG file's path")
    existed = path.exists()
    try:  # before the run: a tune must not end in a plot it cannot write
        make_parent(path)
        with open(path, "ab"):
            pass
    except OSError as exc:
        fail(f"cannot write --plot {path}: {exc.strerror}")
    if not existed:
        path.unlink(missing_ok=True)


def _write_plot(path: Path, results: list[dict]) -> None:
    """Best TFLOP/s so far against trial number, one line per problem (this run's trials):
    TFLOP/s rather than ms, so problems of different sizes share one axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for entry in results:
        result: "TuneResult" = entry["outcome"].result
        curve, best = [], None
        for t in result.trials:
            if t.ok and t.rank_ms:
                best = t.rank_ms if best is None else min(best, t.rank_ms)
            curve.append(None if best is None else result.problem.flops / (best * 1e-3) / 1e12)
        xs = [i + 1 for i, v in enumerate(curve) if v is not None]
        where = f", {entry['outcome'].device}" if entry["several"] else ""
        ax.plot(xs, [v for v in curve if v is not None], marker=".",
                label=f"{result.problem.label()} ({result.strategy}{where})")
    ax.set_xlabel("trial")
    ax.set_ylabel("best so far (TFLOP/s)")
    ax.set_title("autokernel tune: learning curve")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        fail(f"cannot write --plot {path}: {exc.strerror}")
    finally:
        plt.close(fig)


def loop(
    shapes: Annotated[
        Path | None, typer.Option("--shapes", parser=path_option,
                                help="A JSON or CSV file of M, N, K (+ dtype, activation, bias, layout) to tune in turn.")
    ] = None,
    size: SizeOpt = None,
    m: MOpt = None,
    n: NOpt = None,
    k: KOpt = None,
    dtype: DtypeOpt = None,
    activation: ActivationOpt = None,
    bias: BiasOpt = False,
    layout: LayoutOpt = "nn",
    strategy: StrategyOpt = "auto",
    per_generation: PerGenOpt = 8,
    patience: Annotated[int, typer.Option("--patience", help="Stop a problem after this many generations without --min-gain.")] = 3,
    min_gain: Annotated[float, typer.Option("--min-gain", help="The improvement of the best time that counts, as a fraction (0.01 = 1 %).")] = 0.01,
    max_trials: Annotated[int | None, typer.Option("--max-trials", help="At most this many trials per problem.")] = None,
    time_budget: Annotated[float | None, typer.Option("--time-budget", help="Stop after this many seconds in all.")] = None,
    max_generations: Annotated[int, typer.Option("--max-generations", help="A cap on generations per problem.")] = 50,
    seed: SeedOpt = None,
    history: HistoryOpt = None,
    interpret: InterpretOpt = False,
    force: ForceOpt = False,
    replay: ReplayOpt = None,
    timeout: TimeoutOpt = 120.0,
    model: ModelOpt = None,
    cache: CacheOpt = True,
    gpus: GpusOpt = None,
    cluster: ClusterOpt = None,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """The feedback loop: propose, evaluate, feed back, until each problem converges (--patience
    generations without --min-gain) or a budget runs out. Problems from --shapes or the size options."""
    workers = _start_workers(timeout, replay, gpus, cluster)
    with _closed_on_error(workers), user_errors():
        where = _where(gpus, cluster, replay)
        # The options first: a mistyped one is named before this machine is judged.
        if patience < 1:
            fail(f"--patience must be >= 1, got {patience}")
        if not 0 <= min_gain < math.inf:
            fail(f"--min-gain must be a finite fraction >= 0, got {min_gain:g}")
        if max_generations < 1:
            fail(f"--max-generations must be >= 1, got {max_generations}")
        if max_trials is not None and max_trials < 1:
            fail(f"--max-trials must be >= 1, got {max_trials}")
        if time_budget is not None and not _positive(time_budget):
            fail(f"--time-budget must be a finite number of seconds > 0, got {time_budget:g}")
        options = _options(max_generations, per_generation, strategy, seed, timeout, model, replay, cache)
        if shapes is not None:
            if any(v is not None for v in (size, m, n, k)) or dtype or activation or bias or layout != "nn":
                fail("give either --shapes or the problem options (--size/--m/--n/--k, --dtype, ...), not both")
            problems = _tunable(read_shapes(shapes))
            if replay is None:
                require_timing_mode(interpret)
        else:
            problems = _problems(size, m, n, k, dtype, activation, bias, layout, interpret, replay)
        if replay is None:
            check_interpreter_budget(problems, force)
    from autokernel.tuning.loop import StopRules

    stop = StopRules(patience=patience, min_gain=min_gain, max_trials=max_trials, time_budget_s=time_budget)
    run(problems, options, history, json_out, plot, command="loop", stop=stop, workers=workers, **where)


def shapes(
    model: Annotated[str, typer.Option("--model", help="package.module:factory — a callable that returns a torch.nn.Module.")],
    tokens: Annotated[int, typer.Option("--tokens", help="Rows of the activations (batch x sequence): M of every GEMM.")] = 4096,
    dtype: Annotated[str | None, typer.Option("--dtype", "-d", help="Override the parameters' dtype.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", parser=path_option,
                                                help="Write a .json or .csv file instead of JSON on stdout.")] = None,
) -> None:
    """List the GEMMs that autokernel.nn.swap_linear runs in a torch model (each with the
    activation it fuses) as a shapes file for `autokernel loop --shapes`. The factory's
    module is imported from the current directory first, as `python -m` does."""
    if tokens < 1:
        fail(f"--tokens must be >= 1, got {tokens}")
    if output is not None and same_file(output, resolve_history_path(None)):
        fail(f"-o {output} is the history of every run's trials: the shapes would replace it; "
             "write them to another file")
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    with user_errors():
        rows, notes = model_shapes(model, tokens, dtype)
    for line in notes:
        note(line)
    try:
        text = write_shapes(rows, output)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}")
    if output is None:
        sys.stdout.write(text)
    else:
        err_console.print(f"{len(rows)} GEMM shape(s) written to {output}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command(name="tune")(tune)
    app.command(name="loop")(loop)
    app.command(name="shapes")(shapes)
