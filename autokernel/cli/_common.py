"""What every command shares: consoles, one-line errors, JSON output, shared options."""

from __future__ import annotations

import functools
import itertools
import json
import math
import os
import sys
import time
import warnings
from contextlib import contextmanager
from typing import Annotated, Any, Iterator, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from autokernel.history import History, new_run_id, resolve_history_path
from autokernel.records import ConfigError, KernelConfig, Problem, normalize_activation, parse_dtype

# torch and Triton load only in commands that run kernels: the modules that import them
# (runtime, config, api, best, timing) are imported inside the functions that use them.

console = Console()
err_console = Console(stderr=True)
# Piped or redirected, a line is a line: not cut into 80-column pieces (a terminal wraps its own).
console.soft_wrap = not console.is_terminal

# Exit codes: 1 = the work ran and something failed (a check, a trial);
# 2 = the request itself was bad or cannot run here; 130 = interrupted (Ctrl-C).
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

_PIPED_WIDTH = 100_000  # piped output: as wide as the cells need, never cut to 80 columns


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line to stderr and exit with ``code``: never a traceback."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def path_option(value: str):
    """A path option's text as a Path (Typer's ``parser``): an empty one is an error, where
    Typer's own Path type reads "" as "." and the option then names the working directory."""
    from pathlib import Path

    if not str(value).strip():
        raise typer.BadParameter("needs a path, got an empty string")
    return Path(value)


def print_table(table: Table) -> None:
    """A table on stdout: boxed on a terminal; piped or redirected, plain columns at the
    width the cells need (a cell cut to "succe…" at 80 columns helps no one). Columns
    with nothing to say (every cell "-" or empty) are left out; on a narrow terminal
    cells fold onto more lines instead of being cut to "0.0…"."""
    kept = [c for c in table.columns if any(str(cell).strip() not in ("", "-") for cell in c.cells)]
    if kept and table.rows:
        table.columns = kept
    if console.is_terminal:
        for column in table.columns:
            column.overflow = "fold"
        console.print(table)
    else:
        table.box = None
        width = console.width
        console.width = _PIPED_WIDTH  # print's own width= can only narrow the console's
        try:
            console.print(table, crop=False)
        finally:
            console.width = width


class _ThisRun:
    """The history this process appends to and the run id of its rows: after Ctrl-C,
    cli.main counts this run's rows on disk (exact, whenever the interrupt landed)."""

    store: Any = None
    run_id: str | None = None

    def saved(self) -> str:
        """How many of this run's rows are on disk, and where ("0 rows saved" before any history was opened)."""
        if self.store is None:
            return "0 rows saved"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a torn last line is no news here
            saved = sum(t.run_id == self.run_id for t in self.store.trials())
        return f"{saved} rows saved to {self.store.path}"


this_run = _ThisRun()


def start_run(store: Any) -> str:
    """A new run id for rows appended to ``store``, remembered for the line Ctrl-C leaves."""
    this_run.store, this_run.run_id = store, new_run_id()
    return this_run.run_id


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the core's input errors (ValueError, TypeError) into one-line exits."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        fail(str(exc))


def _finite(obj: Any) -> Any:
    """``obj`` with every float that is not finite (NaN, inf) as None: JSON has no such numbers."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    """Machine-readable output, alone on stdout: strict JSON (a NaN or infinite number is null)."""
    sys.stdout.write(json.dumps(_finite(obj), indent=2, default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    return f"{x:.{digits}g}" if abs(x) < 1e-2 and x != 0 else f"{x:.{digits}f}"


# Shared option types, so every command spells them the same way.
SizeOpt = Annotated[
    list[int] | None, typer.Option("--size", "-s", help="M=N=K; repeat for several problems.")
]
MOpt = Annotated[int | None, typer.Option("--m", help="M (rows of A and C).")]
NOpt = Annotated[int | None, typer.Option("--n", help="N (columns of B and C).")]
KOpt = Annotated[int | None, typer.Option("--k", help="K (the reduction dimension).")]
DtypeOpt = Annotated[
    list[str] | None, typer.Option("--dtype", "-d", help="float16/fp16, bfloat16/bf16 or float32; repeatable.")
]
ActivationOpt = Annotated[
    list[str] | None,
    typer.Option("--activation", "-a", help="none, relu, leaky_relu, gelu, gelu_tanh or silu; repeatable."),
]
ConfigOpt = Annotated[
    str | None, typer.Option("--config", "-c", help="A KernelConfig as a JSON string or a JSON file.")
]


def parse_config(text: str | None) -> Any:
    """The KernelConfig of --config (None when not given); an empty value is an error, not "no config"."""
    if text is None:
        return None
    if not text.strip():
        raise ValueError("--config is empty: give a KernelConfig as a JSON object or a JSON file")
    return KernelConfig.from_json(text)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print the results as JSON alone on stdout.")]


def problem_sizes(size: list[int] | None, m: int | None, n: int | None, k: int | None) -> list[tuple[int, int, int]] | None:
    """(M, N, K) triples from --size or --m/--n/--k, a size given twice once; None when
    neither was given."""
    if size and any(v is not None for v in (m, n, k)):
        fail("give either --size or --m/--n/--k, not both")
    if size:
        for s in size:
            if s < 0:
                fail(f"--size must be >= 0, got {s}")
        return [(s, s, s) for s in dict.fromkeys(size)]
    if any(v is not None for v in (m, n, k)):
        if any(v is None for v in (m, n, k)):
            fail("--m, --n and --k go together: give all three")
        for name, v in (("--m", m), ("--n", n), ("--k", k)):
            if v < 0:
                fail(f"{name} must be >= 0, got {v}")
        return [(m, n, k)]
    return None


# Measuring commands (bench, fuse-bench): where they may run, the history, tuned configs.
InterpretOpt = Annotated[
    bool,
    typer.Option("--interpret", help="Run small problems on the CPU under Triton's interpreter (timings labelled so)."),
]
HistoryOpt = Annotated[
    str | None,
    typer.Option("--history", help="The history CSV (default: $AUTOKERNEL_HISTORY or results/history.csv)."),
]
BestOpt = Annotated[
    str | None,
    typer.Option("--best", help="A file of `autokernel export-best`: the config of each problem it holds is used."),
]
RepeatOpt = Annotated[
    int | None, typer.Option("--repeat", help="Timed calls per measurement (default: ~100 ms of calls on a GPU, 3 interpreted).")
]


def require_timing_mode(interpret: bool) -> None:
    """Refuse to time when the kernels would not run where the user asked (exit 2); then
    ``triton_only``: what the command times is the Triton kernels."""
    from autokernel import runtime

    if runtime.INTERPRETER and not interpret:
        fail("no GPU here: kernels would run under Triton's interpreter; pass --interpret to time small problems on the CPU")
    require_interpreter_if_asked(interpret)
    triton_only()


def triton_only() -> None:
    """Every GEMM this process plans runs on the Triton kernels, whatever ``$AUTOKERNEL_BACKEND``
    says: the commands that check and time the kernels report the kernels' own figures."""
    from autokernel import route

    route.use("triton")


def require_kernel_device() -> None:
    """Kernels compiled for a GPU (TRITON_INTERPRET off) where torch sees none: refused (exit 2)."""
    import torch

    from autokernel import runtime

    if not runtime.INTERPRETER and not torch.cuda.is_available():
        fail(f"TRITON_INTERPRET={os.environ.get('TRITON_INTERPRET', '')} turns Triton's interpreter off, and torch "
             "sees no CUDA GPU here: unset it (or set it to 1) to run the kernels under the interpreter on the CPU")


def require_interpreter_if_asked(interpret: bool) -> None:
    """--interpret where the kernels are compiled for a GPU: refused (exit 2), as are kernels
    compiled for a GPU where there is none (require_kernel_device)."""
    from autokernel import runtime

    require_kernel_device()
    if interpret and not runtime.INTERPRETER:
        fail("--interpret on a machine with a GPU needs TRITON_INTERPRET=1 in the environment "
             "(read when the kernels are defined)")


def check_repeat(repeat: int | None) -> None:
    if repeat is not None and repeat < 1:
        fail(f"--repeat must be >= 1, got {repeat}")


def matmul_config(problem: Any) -> tuple[Any, str]:
    """(config, source): what ``autokernel.matmul`` launches ``problem`` with when given no
    config (``autokernel.best.resolve``): a tuned one from $AUTOKERNEL_CONFIG ("env") or
    the file shipped for this GPU ("shipped"), else default_config ("default"). Every
    command measures and checks this one unless told otherwise; a tuned-config file that
    can't be read is one line and exit 2, before any work."""
    from autokernel import api, best, runtime

    tma = api.tma_runs_for(problem.m, problem.n, problem.k, problem.torch_dtype, problem.layout)
    try:
        return best.resolve(problem.m, problem.n, problem.k, problem.torch_dtype, problem.activation, problem.bias,
                            runtime.kernel_device(), False, tma, problem.layout)
    except ConfigError as exc:
        fail(str(exc))


def load_best(path: str | None) -> Any:
    """The BestFile named by --best (None without one); a file that isn't one is a one-line exit 2.
    A file tuned on another GPU is used with a warning: --best asks for its configs."""
    if path is None:
        return None
    if not path.strip():
        fail("--best is empty: give a file of `autokernel export-best`")
    from autokernel import best, runtime

    try:
        found = best.load(path)
    except ConfigError as exc:
        fail(f"--best: {exc}")
    if not found.for_device(runtime.device_name()):
        warn(f"--best {path} was tuned on {found.device}, not on this {runtime.device_name()}")
    return found


def warn(message: str) -> None:
    """One warning line on stderr."""
    err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False, soft_wrap=True)


def note(message: str) -> None:
    """One informational line on stderr (stdout stays for results, e.g. --json)."""
    err_console.print(f"[dim]note:[/] {escape(message)}", highlight=False, soft_wrap=True)


HOST_BOUND = 1.10
"""Wall time over GPU time per call past which a call counts as host-bound."""


def host_bound(trial: Any) -> bool | None:
    """Whether ``trial``'s calls back to back take longer than its GPU time per call by more
    than HOST_BOUND (the host's launch path is then what the loop waits on); None where
    either was not measured."""
    if trial.wall_ms is None or trial.gpu_ms is None:
        return None
    return trial.wall_ms > HOST_BOUND * trial.gpu_ms


def wall_cell(trials: Any) -> str:
    """The trials' wall µs per call, " / "-joined, each marked * where host-bound; "-" unless
    every one was measured."""
    if any(t.wall_ms is None for t in trials):
        return "-"
    return " / ".join(f"{t.wall_ms * 1e3:.1f}" + ("[yellow]*[/]" if host_bound(t) else "") for t in trials)


def read_side_by_side(problem: Any, trials: list[Any]) -> None:
    """Give a forward problem's successful trials (ours and torch's baselines) their GPU time
    per call and their wall time per call, each from one reading of them all side by side
    (evaluate.race_trials, evaluate.wall_trials; on a GPU only). A reading that fails
    leaves its time unmeasured, with one warning: the event times stand."""
    from autokernel import evaluate

    for what, reader in (("GPU time", evaluate.race_trials), ("wall time per call", evaluate.wall_trials)):
        try:
            reader(problem, trials)
        except Exception as exc:
            warn(f"{problem.label()}: {what} not measured ({evaluate.error_line(exc)})")


def history_store(path: str | None, *, append: bool = True) -> History:
    """The History (--history, else $AUTOKERNEL_HISTORY, else results/history.csv); with
    ``append``, checked now that rows can be appended to it, before any work is done."""
    resolved = resolve_history_path(path)
    if resolved.is_dir():
        fail(f"--history {resolved} is a directory, not a CSV file")
    if resolved.exists() and not resolved.is_file():  # a pipe or a device: reading it could block
        fail(f"--history {resolved} is not a regular file")
    store = History(resolved)
    if not append:
        return store
    try:  # before any work: a run must not end in a history it cannot write
        store.check_writable()
    except (ValueError, OSError) as exc:
        fail(f"cannot append to the history: {exc}")
    return store


def append_history(store: Any, rows: list[dict]) -> None:
    """Append rows; a history that cannot be written is one error line, not a traceback."""
    try:
        store.append_many(rows)
    except (ValueError, OSError) as exc:
        fail(f"cannot append to the history {store.path}: {exc}")


def measured_problems(
    sizes: list[tuple[int, int, int]] | None,
    dtype: list[str] | None,
    activation: list[str] | None,
    bias: bool,
    interpret: bool,
    *,
    gpu_sizes: list[int],
    interpreter_sizes: list[int],
    activations: list[str],
) -> list[Any]:
    """The problems a measuring command times: sizes × dtypes × activations, checked first.

    Bad names raise ValueError (run inside user_errors); then require_timing_mode; square
    default sizes depend on where the kernels run. dtype defaults to float16.
    """
    from autokernel import runtime

    dtypes = [parse_dtype(d) for d in dtype] if dtype else ["float16"]
    acts = [normalize_activation(a) for a in activation] if activation else activations
    require_timing_mode(interpret)
    if sizes is None:
        sizes = [(s, s, s) for s in (interpreter_sizes if runtime.INTERPRETER else gpu_sizes)]
    return [Problem(m, n, k, d, a, bias) for (m, n, k), d, a in itertools.product(sizes, dtypes, acts)]


ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Under Triton's interpreter, run problems estimated to need over half the available "
                                 "memory or over 2 min per kernel call (refused otherwise)."),
]

_SLOW_CALL_S = 10.0  # warn before an interpreted kernel call estimated to take longer than this
_MAX_CALL_S = 120.0  # refuse (without --force) an interpreted kernel call estimated to take longer
_MEMORY_SHARE = 0.5  # refuse (without --force) a problem needing more than this share of the available memory
_CALIBRATION_EDGES = (64, 128)  # two problems timed here: the interpreter's fixed cost per call, and per tile-step
_CALIBRATE_ABOVE = 64  # tile-steps (programs x K-steps) a call may have before its time is estimated


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (MemAvailable), else the physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def problem_bytes(problem: Any) -> int:
    """The memory one check of ``problem`` holds: A, B, C and the bias in its dtype, and
    the float32 reference (A and B upcast, and its output)."""
    operands = problem.m * problem.k + problem.k * problem.n
    output = problem.m * problem.n
    return (operands + output + problem.n) * problem.torch_dtype.itemsize + (operands + output) * 4


def _tile_steps(problem: Any, config: Any = None) -> int:
    """Programs x K-steps of one kernel call (the interpreter runs each as Python)."""
    from autokernel.config import default_config
    from autokernel.knobs import tile_grid

    c = config or default_config(problem.m, problem.n, problem.k, problem.torch_dtype)
    rows, cols = tile_grid(c.swap_ab, c.block_m, c.block_n, problem.m, problem.n)
    return rows * cols * (-(-problem.k // c.block_k))


def _seconds_per_tile_step(dtype: Any) -> float:
    """The interpreter's seconds per tile-step here, from two default-config calls timed now
    (the difference between them, so the fixed cost of a call is not counted per step)."""
    import torch

    from autokernel.api import matmul

    matmul(torch.ones(16, 16, dtype=dtype), torch.ones(16, 16, dtype=dtype))  # the kernel's first-call set-up
    times, steps = [], []
    for edge in _CALIBRATION_EDGES:
        a = torch.randn(edge, edge, dtype=dtype)
        start = time.perf_counter()
        matmul(a, a)
        times.append(time.perf_counter() - start)
        steps.append(_tile_steps(Problem(edge, edge, edge, str(dtype).removeprefix("torch."))))
    marginal = (times[1] - times[0]) / (steps[1] - steps[0])
    return max(marginal, times[1] / steps[1] / 4)  # timing noise must not make it ~0


def call_seconds(problems: list[Any], passes: int = 1, config: Any = None) -> list[tuple[Any, float]]:
    """(problem, estimated seconds per kernel call under the interpreter) for each problem
    with over _CALIBRATE_ABOVE tile-steps; ``passes``: GEMMs per call (3: forward + backward)."""
    per_step: dict[Any, float] = {}
    out = []
    for p in problems:
        steps = _tile_steps(p, config)
        if steps <= _CALIBRATE_ABOVE:
            continue
        if p.torch_dtype not in per_step:
            per_step[p.torch_dtype] = _seconds_per_tile_step(p.torch_dtype)
        out.append((p, per_step[p.torch_dtype] * steps * passes))
    return out


def check_interpreter_budget(problems: list[Any], force: bool, passes: int = 1, config: Any = None) -> None:
    """Under the interpreter, refuse (exit 2) a problem estimated to need over half the
    available memory, or over _MAX_CALL_S per kernel call by calls timed here, unless
    ``force``; warn before calls estimated over _SLOW_CALL_S. Nothing on a GPU."""
    from autokernel import runtime

    if not runtime.INTERPRETER:
        return
    available = available_memory()
    if not force and available is not None:
        for p in problems:
            if (need := problem_bytes(p)) > _MEMORY_SHARE * available:
                fail(f"{p.label()} needs about {_size(need)} (operands, output and the float32 reference), over half "
                     f"of the {_size(available)} available; pass --force to run it anyway")
    for p, seconds in call_seconds(problems, passes, config):
        if seconds > _MAX_CALL_S and not force:
            fail(f"{p.label()} under Triton's interpreter: about {_duration(seconds)} per kernel call (estimated "
                 f"from calls timed here), over the {_duration(_MAX_CALL_S)} limit; pass --force to run it anyway")
        if seconds > _SLOW_CALL_S:
            warn(f"{p.label()} under Triton's interpreter: about {_duration(seconds)} per kernel call "
                 "(estimated from calls timed here), and a run makes several; "
                 "Ctrl-C stops it and keeps the rows already saved")


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.0f} h"


def trial_timer(repeat: int | None) -> tuple[Any, str]:
    """The timer for --repeat (None: time-budgeted) and how it times, for a table title."""
    from autokernel import runtime
    from autokernel.timing import time_fn

    how = f"median of {repeat} calls" if repeat else "median"
    how += ", wall clock" if runtime.INTERPRETER else ", L2 flushed"
    return (functools.partial(time_fn, reps=repeat) if repeat else time_fn), how
