"""`autokernel report` on selector checks (benchmarks/select_sweep.py's rows): the per-class
geomeans on a tiny synthetic check computed by hand, the worst-first listing, and the CLI on a
shipped GPU check.

The rows built here are SYNTHETIC (hand-picked times): they test the arithmetic and the
rendering, and must never be committed as measurements.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autokernel.cli import app
from autokernel.records import Problem
from autokernel.report import is_selector_file, problem_class, selector_report

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DEVICE = "NVIDIA H100 80GB HBM3 (synthetic)"

DEC16 = Problem(16, 4096, 4096, "float16", layout="nt")                    # decode
DEC1 = Problem(1, 4096, 4096, "float16", layout="nt")                      # decode
SKINNY = Problem(128, 4096, 4096, "bfloat16", layout="nt")                 # skinny
MID = Problem(1024, 4096, 4096, "float16", "relu", True, "nt")             # mid: 2MNK = 3.4e10
LARGE = Problem(8192, 8192, 8192, "bfloat16")                              # large: 2MNK = 1.1e12

# problem -> [(label, roles, GPU ms)], torch ("cublas") first. Per problem: torch/pick, torch/default,
# torch/previous, torch/best, pick/best.
CHECK = {
    DEC16: [("cublas", [], 1.0), ("a", ["default", "pick"], 2.0), ("b", ["previous"], 1.0)],  # .5 .5 1 1 .5
    DEC1: [("cublas", [], 1.0), ("a", ["default", "pick", "previous"], 0.5), ("b", [], 0.6)],  # 2 2 2 2 1
    SKINNY: [("cublas", [], 0.8), ("a", ["pick", "previous"], 1.0), ("b", ["default"], 1.6)],  # .8 .5 .8 .8 1
    MID: [("cublas", [], 1.0), ("a", ["default", "pick", "previous"], 0.9), ("bad", [], None)],  # 1/.9 x4, 1
    LARGE: [("cublas", [], 3.0), ("a", ["pick"], 4.0), ("b", ["default", "previous"], 5.0)],  # .75 .6 .6 .75 1
}


def check_rows(check=CHECK, device=DEVICE) -> list[dict]:
    rows = []
    for index, (p, configs) in enumerate(check.items()):
        for label, roles, ms in configs:
            rows.append({**p.to_dict(), "config": None if label == "cublas" else {"block_m": 16}, "label": label,
                         "default": "default" in roles, "roles": roles,
                         "status": "success" if ms is not None else "incorrect", "gpu_ms": ms,
                         "device": device, "index": index})
    return rows


def class_table(md: str) -> dict[str, list[str]]:
    """The 'By class' table: class -> its cells after the class name."""
    section = md.split("## By class", 1)[1].split("##", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")][1:]
    cells = [[c.strip().strip("*") for c in line.strip("|").split("|")] for line in lines]
    return {c[0]: c[1:] for c in cells}


def listing(md: str) -> list[list[str]]:
    section = md.split("## Problems, worst first by torch/pick", 1)[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ")][1:]


def test_classes_by_rows_and_work():
    assert [problem_class(p) for p in CHECK] == ["decode", "decode", "skinny", "mid", "large"]
    assert problem_class(Problem(64, 8, 8, "float16")) == "decode"
    assert problem_class(Problem(65, 8, 8, "float16")) == "skinny"
    assert problem_class(Problem(256, 8, 8, "float16")) == "skinny"
    assert problem_class(Problem(500, 10000, 10000, "float16")) == "mid"  # 2MNK = 1e11 exactly
    assert problem_class(Problem(501, 10000, 10000, "float16")) == "large"


def test_class_geomeans_by_hand():
    rows = check_rows()
    assert is_selector_file(rows)
    table = class_table(selector_report(rows, "check.jsonl"))
    # columns: problems, torch/pick, torch/default, torch/previous, torch/best, pick/best
    assert table["decode"] == ["2", f"{math.sqrt(0.5 * 2):.3f}", f"{math.sqrt(0.5 * 2):.3f}",
                               f"{math.sqrt(1 * 2):.3f}", f"{math.sqrt(1 * 2):.3f}", f"{math.sqrt(0.5 * 1):.3f}"]
    assert table["decode"] == ["2", "1.000", "1.000", "1.414", "1.414", "0.707"]
    assert table["skinny"] == ["1", "0.800", "0.500", "0.800", "0.800", "1.000"]
    assert table["mid"] == ["1", "1.111", "1.111", "1.111", "1.111", "1.000"]
    assert table["large"] == ["1", "0.750", "0.600", "0.600", "0.750", "1.000"]
    five = {"torch/pick": 0.5 * 2 * 0.8 / 0.9 * 0.75, "torch/default": 0.5 * 2 * 0.5 / 0.9 * 0.6,
            "torch/previous": 1 * 2 * 0.8 / 0.9 * 0.6, "torch/best": 1 * 2 * 0.8 / 0.9 * 0.75,
            "pick/best": 0.5 * 1 * 1 * 1 * 1}
    assert table["all"] == ["5"] + [f"{v ** (1 / 5):.3f}" for v in five.values()]
    assert table["all"][1] == "0.922"


def test_problems_worst_first_with_the_pick_and_the_best():
    md = selector_report(check_rows(), "check.jsonl")
    rows = listing(md)
    assert [r[1] for r in rows] == [DEC16.label(), LARGE.label(), SKINNY.label(), MID.label(), DEC1.label()]
    assert [r[5] for r in rows] == ["0.500", "0.750", "0.800", "1.111", "2.000"]
    assert rows[0][3:5] == ["a", "b"]  # the pick, the best
    assert "1 of them failed" in md
    short = selector_report(check_rows(), "check.jsonl", worst=2)
    assert len(listing(short)) == 2 and "The worst 2 of 5" in short


def slower_listing(md: str) -> list[list[str]]:
    section = md.split("## Picks more than 2% slower than the default", 1)[1]
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| ")][1:]


def test_picks_slower_than_the_default_are_listed_slowest_first():
    assert "None of the 5 problems where both were measured." in selector_report(check_rows(), "check.jsonl")
    check = dict(CHECK)
    check[SKINNY] = [("cublas", [], 0.8), ("a", ["pick", "previous"], 1.0), ("b", ["default"], 0.9)]  # 0.9
    check[LARGE] = [("cublas", [], 3.0), ("a", ["pick"], 4.0), ("b", ["default", "previous"], 3.96)]  # 0.99: within
    check[MID] = [("cublas", [], 1.0), ("a", ["pick"], 1.0), ("b", ["default"], 0.95)]  # 0.95
    md = selector_report(check_rows(check), "check.jsonl")
    rows = slower_listing(md)
    assert [(r[1], r[3], r[4], r[5]) for r in rows] == [(SKINNY.label(), "a", "b", "0.900"),
                                                         (MID.label(), "a", "b", "0.950")]
    assert "2 of the 5 problems where both were measured" in md
    check[DEC16] = [("cublas", [], 1.0), ("a", ["pick"], None), ("b", ["default"], 0.5)]  # the pick failed
    assert "2 of the 4 problems where both were measured" in selector_report(check_rows(check), "check.jsonl")


def test_a_problem_without_a_measured_pick_leads_the_list():
    check = dict(CHECK)
    check[DEC16] = [("cublas", [], 1.0), ("a", ["default", "pick"], None), ("b", ["previous"], 1.0)]
    md = selector_report(check_rows(check), "check.jsonl")
    first = listing(md)[0]
    assert first[1] == DEC16.label() and first[3] == "a (incorrect)" and first[5] == "–"
    assert class_table(md)["decode"][1] == "2.000 (1)"  # torch/pick over the one problem measured


def test_cli_reads_a_selector_check_and_keeps_stdout_and_output(tmp_path):
    path = tmp_path / "check.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in check_rows()))
    result = runner.invoke(app, ["report", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# Selector check") and "selector check of 5 problems" in result.stderr
    out = tmp_path / "docs" / "CHECK.md"
    result = runner.invoke(app, ["report", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert class_table(out.read_text())["all"][0] == "5" and not (tmp_path / "docs" / "img").exists()


def test_mixed_devices_refused(tmp_path):
    rows = check_rows() + check_rows(device="another GPU")
    path = tmp_path / "check.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, ["report", str(path)])
    assert result.exit_code == 2 and "mix devices" in result.stderr


def test_a_bad_row_is_one_line(tmp_path):
    rows = check_rows()
    rows[3]["roles"] = "pick"
    path = tmp_path / "check.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = runner.invoke(app, ["report", str(path)])
    assert result.exit_code == 2 and "line 4: roles must be a list" in result.stderr


@pytest.mark.parametrize("name, overall", [("check_random_h100_2.jsonl", "0.897")])
def test_cli_on_the_shipped_check(name, overall):
    result = runner.invoke(app, ["report", str(ROOT / "benchmarks" / "results" / name)])
    assert result.exit_code == 0, result.output
    assert class_table(result.stdout)["all"][:2] == ["60", overall]


def test_a_suite_report_shows_a_checks_classes(tmp_path):
    from tests.measure.test_report import TIMES, synthetic_row

    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(synthetic_row(*t)) + "\n" for t in TIMES))
    check = tmp_path / "check.jsonl"
    check.write_text("".join(json.dumps(r) + "\n" for r in check_rows()))
    out = tmp_path / "BENCHMARKS.md"
    result = runner.invoke(app, ["report", str(suite), "--classes", str(check), "-o", str(out), "--no-plots"])
    assert result.exit_code == 0, result.output
    md = out.read_text()
    assert f"autokernel report {suite} --classes {check}`" in md.splitlines()[2]
    section = md.split(f"## By problem class: {check}", 1)[1]
    assert "## squares" not in section and "5 problems" in section
    assert class_table("## By class" + section) == class_table(selector_report(check_rows(), str(check)))
    # a check of another device, a check given as the results, a suite given as the check: one line each
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in check_rows(device="another GPU")))
    for args, message in (([str(suite), "--classes", str(other)], "report one device at a time"),
                          ([str(check), "--classes", str(check)], "is a selector check"),
                          ([str(suite), "--classes", str(suite)], "not a selector check")):
        result = runner.invoke(app, ["report", *args, "-o", str(out), "--no-plots"])
        assert result.exit_code == 2 and message in result.stderr, result.output
        assert len(result.stderr.strip().splitlines()) == 1
    assert out.read_text() == md  # the page written before is kept
