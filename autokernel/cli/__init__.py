"""The ``autokernel`` Typer app: one module per command group, assembled here."""

from __future__ import annotations

import inspect
import signal
import sys
from typing import Annotated

import typer
from rich.markup import escape

try:  # recent typer carries its own copy of click; older versions use click itself
    from typer._click.exceptions import ClickException
except ImportError:
    from click import ClickException
try:
    from typer.core import TyperArgument, TyperOption
except ImportError:  # an older typer has neither: its help is left as it prints it
    TyperArgument = TyperOption = None

from autokernel import __version__
from autokernel.cli import bench, cache, explain, export, fuse_bench, history, report, roofline, tune, validate
from autokernel.cli._common import EXIT_INTERRUPTED, err_console, this_run

app = typer.Typer(
    name="autokernel",
    help="Triton GEMM kernels with fused epilogues: validate, benchmark and tune them against PyTorch.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"autokernel {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """autokernel: fast, checked GEMMs for PyTorch users."""


def _register() -> None:
    validate.register(app)
    bench.register(app)
    fuse_bench.register(app)
    history.register(app)
    export.register(app)
    roofline.register(app)
    report.register(app)
    tune.register(app)
    cache.register(app)
    explain.register(app)


_register()


def _reflow_help() -> None:
    """Each command's docstring as its help, each paragraph one line for Rich to wrap at the
    terminal's width: hard-wrapped source lines would show as ragged lines."""
    for info in app.registered_commands:
        text = info.help or inspect.getdoc(info.callback) or ""
        paragraphs = inspect.cleandoc(text).split("\n\n")
        info.help = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _plain_placeholders() -> None:
    """--help as a user reads it: a flag takes no value, so no "<bool>" beside it; a
    required argument is RESULTS in the usage line, not "{RESULTS}"."""
    if TyperOption is None:
        return
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is not None:
        def display_type_rich(self, ctx):
            return None if self.is_flag else shown(self, ctx)

        TyperOption.display_type_rich = display_type_rich
    usage = getattr(TyperArgument, "_usage_display_name", None)
    if usage is not None:
        def _usage_display_name(self):
            name = usage(self)
            return name[1:-1] if name.startswith("{") and name.endswith("}") else name

        TyperArgument._usage_display_name = _usage_display_name


_reflow_help()
_plain_placeholders()


class _Interrupted(BaseException):
    """Ctrl-C while a command runs. Not a KeyboardInterrupt: click turns that into a silent
    exit or "Aborted!" inside the app, before main could say what was saved."""


def _interrupt(signum: int, frame: object) -> None:
    raise _Interrupted


def main(argv: list[str] | None = None) -> None:
    """The console script: the app, with every way out of it one line on stderr.

    Click's standalone mode is off so that this one place handles what it would print
    as a boxed panel (usage errors); Ctrl-C says how many history rows were saved and
    exits 130; the commands' own exits (typer.Exit from ``fail``) keep their codes.
    """
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        code = app(args=argv, prog_name="autokernel", standalone_mode=False)
    except _Interrupted:
        err_console.print(f"interrupted, {escape(this_run.saved())}", highlight=False, soft_wrap=True)
        sys.exit(EXIT_INTERRUPTED)
    except ClickException as exc:  # usage errors: -s abc, --bogus, a missing value
        if not exc.format_message():  # no arguments at all: the help was the answer
            sys.exit(exc.exit_code)
        hint = f" (see {exc.ctx.command_path} --help)" if getattr(exc, "ctx", None) is not None else ""
        err_console.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(hint)}", highlight=False,
                          soft_wrap=True)
        sys.exit(exc.exit_code)
    except BrokenPipeError:  # `autokernel history | head`: the reader left; say nothing more
        sys.stdout = None
        sys.exit(1)
    finally:
        signal.signal(signal.SIGINT, previous)
    sys.exit(code or 0)
