"""What every command shares: consoles, one-line errors, JSON output, shared options."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Annotated, Any, Iterator, NoReturn

import typer
from rich.console import Console

console = Console()
err_console = Console(stderr=True)

# Exit codes: 1 = the work ran and something failed (a check, a trial);
# 2 = the request itself was bad or cannot run here.
EXIT_FAILED = 1
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line to stderr and exit with ``code``: never a traceback."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the core's input errors (ValueError, TypeError) into one-line exits."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        fail(str(exc))


def print_json(obj: Any) -> None:
    """Machine-readable output, alone on stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
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
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the results as JSON alone on stdout.")]


def problem_sizes(size: list[int] | None, m: int | None, n: int | None, k: int | None) -> list[tuple[int, int, int]] | None:
    """(M, N, K) triples from --size or --m/--n/--k; None when neither was given."""
    if size and any(v is not None for v in (m, n, k)):
        fail("give either --size or --m/--n/--k, not both")
    if size:
        for s in size:
            if s < 0:
                fail(f"--size must be >= 0, got {s}")
        return [(s, s, s) for s in size]
    if any(v is not None for v in (m, n, k)):
        if any(v is None for v in (m, n, k)):
            fail("--m, --n and --k go together: give all three")
        for name, v in (("--m", m), ("--n", n), ("--k", k)):
            if v < 0:
                fail(f"{name} must be >= 0, got {v}")
        return [(m, n, k)]
    return None
