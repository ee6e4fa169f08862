"""`autokernel report`: the benchmark report (tables, targets, charts) from a results file, or the
report of a selector check (geomeans per problem class, the worst problems)."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Annotated

import typer

from autokernel.cli._common import console, err_console, fail, warn

# autokernel.report loads torch (through the roofline): it is imported in the command itself.


def report(
    results: Annotated[str, typer.Argument(metavar="RESULTS",
                                           help="A results file (JSON lines) of benchmarks/suite.py, or a "
                                                "selector check of benchmarks/select_sweep.py.")],
    output: Annotated[str | None, typer.Option(
        "--output", "-o", help="The markdown file to (re)write, e.g. docs/BENCHMARKS.md (default, or -: stdout).")] = None,
    plots_dir: Annotated[str | None, typer.Option(
        "--plots-dir", help="Where the PNG charts go, one per suite, linked from the markdown "
                            "(default: img/ beside --output; none on stdout).")] = None,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Write the markdown without charts.")] = False,
    classes: Annotated[str | None, typer.Option(
        "--classes", metavar="CHECK", help="A selector check (benchmarks/select_sweep.py) whose geomeans per "
                                           "problem class (decode, skinny, mid, large) the suite report shows "
                                           "too.")] = None,
) -> None:
    """Regenerate the benchmark report from measured results: per shape and dtype Triton,
    cuBLAS, eager fused, cuBLASLt's epilogue and torch.compile side by side, speedups by GPU
    and wall time, roofline efficiency, GB/s of decode shapes, and the performance targets.
    Given a selector check (benchmarks/select_sweep.py's rows), the pick, default, previous rule
    and best config against torch per problem class, and the problems worst first (no charts).
    The markdown goes to stdout unless --output names a file."""
    from autokernel.report import SelectorReport, write_report

    if not results.strip():
        fail("RESULTS needs a file name: a results file of benchmarks/suite.py or benchmarks/select_sweep.py")
    if classes is not None and not classes.strip():
        fail("--classes needs a file name: a selector check of benchmarks/select_sweep.py")
    if output == "-":  # stdout, as the shell's convention has it
        output = None
    if output is not None and not output.strip():
        fail("-o needs a file name (leave -o out to print the report on stdout)")
    if plots_dir is not None and not plots_dir.strip():
        fail("--plots-dir needs a directory name (--no-plots writes no charts)")
    if no_plots:
        plots_dir = None
    elif plots_dir is None and output is not None:
        plots_dir = os.path.join(os.path.dirname(output), "img")
    try:
        with warnings.catch_warnings(record=True) as caught:  # the reader's skipped rows: one line each
            warnings.simplefilter("always")
            rep, charts = write_report(results, output, plots_dir, classes)
    except ValueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot write the report: {exc.strerror or exc}: {exc.filename or output}")
    for w in caught:
        warn(str(w.message))
    if output is None:
        sys.stdout.write(rep.markdown if rep.markdown.endswith("\n") else rep.markdown + "\n")
    if isinstance(rep, SelectorReport):
        summary = f"selector check of {rep.problems} problems"
    else:
        problems = sum(len(r) for r in rep.suites.values())
        verdicts = [t.verdict for t in rep.targets]
        summary = (f"{problems} problems in {len(rep.suites)} suites, "
                   f"targets {verdicts.count('MET')} met, {verdicts.count('MISSED')} missed, "
                   f"{len(verdicts) - verdicts.count('MET') - verdicts.count('MISSED')} not judged"
                   + (f"; {len(charts)} charts in {plots_dir}" if charts else ""))
    if output is None:
        err_console.print(f"report: {summary}", highlight=False, markup=False, soft_wrap=True)
    else:
        console.print(f"wrote {output}: {summary}", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command(name="report")(report)
