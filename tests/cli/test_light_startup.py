"""The CLI starts without torch and Triton: they load only in commands that run kernels or
pick configs, so `--help`, argument errors and reading the history stay fast."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from autokernel.config import KernelConfig
from autokernel.history import History, make_row
from autokernel.records import Problem

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI in a fresh interpreter, each argument list in turn (exit codes collected),
# then prints the codes and the heavy modules that got imported.
_RUN = """
import json, sys
from autokernel.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit as exc:
        codes.append(exc.code)
print(json.dumps({"codes": codes, "loaded": sorted({m.split('.')[0] for m in sys.modules} & {"torch", "triton"})}))
"""


def _light_run(*argvs: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-c", _RUN, json.dumps(list(argvs))], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_importing_the_cli_loads_neither_torch_nor_triton():
    assert _light_run() == {"codes": [], "loaded": []}


def test_help_runs_without_torch_or_triton():
    got = _light_run(["--help"], ["history", "--help"], ["export-best", "--help"], ["tune", "--help"],
                     ["bench", "--help"], ["cache", "--help"])
    assert got == {"codes": [0] * 6, "loaded": []}


def test_the_history_is_listed_without_torch_or_triton(tmp_path):
    path = tmp_path / "h.csv"
    History(path).append_many([
        make_row("bench", Problem(64, 64, 64), KernelConfig(), status="success", run_id="r", kernel="triton", ms=ms)
        for ms in (2.0, 1.0)])
    got = _light_run(["history", "--history", str(path)], ["history", "--best", "--json", "--history", str(path)])
    assert got == {"codes": [0, 0], "loaded": []}
