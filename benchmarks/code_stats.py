"""The shape of the code: lines per layer, imports inside functions, the largest functions.

    python3 benchmarks/code_stats.py                 # the working tree
    python3 benchmarks/code_stats.py --rev 3f104b7   # a commit (read with git show; nothing checked out)
    python3 benchmarks/code_stats.py --top 15        # more of the largest functions

Lines are physical lines of .py files (and of .sh files outside the package). The package's
modules are grouped by layer (LAYERS, bottom first; a module no layer names is counted under
"other"); scripts/ (where a revision has it), benchmarks/ and tests/ are counted as a whole. An import inside a function counts once wherever it nests;
"own" ones import autokernel (absolute or relative). Standard library only, so that it runs
on any checkout, old ones included.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (layer, modules under autokernel/: a file, or a folder ending in "/"), bottom first.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("records", ("knobs.py", "records.py", "config.py", "history.py", "export.py")),
    ("kernels", ("kernels/",)),
    ("pick", ("runtime.py", "best.py", "select.py", "candidates.py", "autotune.py", "userfiles.py")),
    ("op", ("api.py", "plans.py", "autograd.py", "ops.py", "nn.py", "__init__.py")),
    ("measure", ("evaluate.py", "timing.py", "roofline.py", "report.py")),
    ("tuning", ("tuning/",)),
    ("cli", ("cli/", "__main__.py")),
]
OUTSIDE = ("scripts", "benchmarks", "tests")


def layer_of(path: str) -> str:
    """The layer of a path relative to the repository root ("" for no .py of ours)."""
    top = path.split("/", 1)[0]
    if top in OUTSIDE and path.endswith((".py", ".sh")):
        return top + "/"
    if not path.endswith(".py"):
        return ""
    if top != "autokernel":
        return ""
    inner = path.split("/", 1)[1]
    for name, members in LAYERS:
        for member in members:
            if inner == member or (member.endswith("/") and inner.startswith(member)):
                return name
    return "other"


def read_sources(rev: str | None) -> dict[str, str]:
    """path -> source of every .py file of ours, at a git revision or in the working tree."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout

    if rev is None:
        paths = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                 if not any(part.startswith(".") or part == "__pycache__" for part in p.relative_to(ROOT).parts)]
        return {p: (ROOT / p).read_text(encoding="utf-8") for p in sorted(paths) if layer_of(p)}
    paths = [p for p in git("ls-tree", "-r", "--name-only", rev).splitlines() if layer_of(p)]
    return {p: git("show", f"{rev}:{p}") for p in paths}


def _is_own(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "autokernel"
    return any(alias.name.split(".")[0] == "autokernel" for alias in node.names)


def _function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements inside any function, each once."""
    seen: dict[int, ast.Import | ast.ImportFrom] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    seen[id(node)] = node
    return list(seen.values())


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, lines) of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node.end_lineno - node.lineno + 1
            yield from _functions(node, name + ".")
        else:
            yield from _functions(node, prefix)


def stats(sources: dict[str, str]) -> dict:
    layers: dict[str, dict[str, int]] = {}
    largest: list[tuple[int, str]] = []
    for path, text in sources.items():
        layer = layer_of(path)
        row = layers.setdefault(layer, {"files": 0, "lines": 0, "imports_in_functions": 0, "own": 0})
        row["files"] += 1
        row["lines"] += len(text.splitlines())
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        inner = _function_imports(tree)
        row["imports_in_functions"] += len(inner)
        row["own"] += sum(_is_own(node) for node in inner)
        if path.startswith("autokernel/"):
            largest += [(lines, f"{path}:{name}") for name, lines in _functions(tree)]
    largest.sort(key=lambda item: (-item[0], item[1]))
    return {"layers": layers, "largest": largest}


def runs_size(rev: str | None) -> tuple[int, int]:
    """(files, bytes) under docs/runs/, the records of runs."""
    if rev is None:
        files = [p for p in (ROOT / "docs" / "runs").rglob("*") if p.is_file()]
        return len(files), sum(p.stat().st_size for p in files)
    out = subprocess.run(["git", "ls-tree", "-r", "-l", rev, "--", "docs/runs"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    return len(out), sum(int(line.split()[3]) for line in out if line.split()[3].isdigit())


def _order(name: str) -> int:
    names = [layer for layer, _ in LAYERS] + ["other"] + [top + "/" for top in OUTSIDE]
    return names.index(name) if name in names else len(names)


def render(result: dict, top: int) -> str:
    layers = result["layers"]
    lines = [f"{'layer':<18}{'files':>6}{'lines':>8}{'imports in functions':>22}{'of autokernel':>15}"]

    def row(name: str, r: dict) -> str:
        return f"{name:<18}{r['files']:>6}{r['lines']:>8}{r['imports_in_functions']:>22}{r['own']:>15}"

    package = {"files": 0, "lines": 0, "imports_in_functions": 0, "own": 0}
    for name in sorted(layers, key=_order):
        if name.endswith("/"):
            continue
        lines.append(row(name, layers[name]))
        for key in package:
            package[key] += layers[name][key]
    lines.append(row("autokernel/", package))
    for name in sorted(layers, key=_order):
        if name.endswith("/"):
            lines.append(row(name, layers[name]))
    per_k = 1000 * package["own"] / package["lines"] if package["lines"] else 0.0
    lines.append(f"imports of autokernel inside functions per 1,000 package lines: {per_k:.1f}")
    lines.append("")
    lines.append(f"largest functions (lines), top {top}:")
    lines += [f"{n:>6}  {name}" for n, name in result["largest"][:top]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", help="a git revision (default: the working tree)")
    parser.add_argument("--top", type=int, default=10, help="how many of the largest functions to list")
    args = parser.parse_args(argv)
    print(render(stats(read_sources(args.rev)), args.top))
    files, size = runs_size(args.rev)
    print(f"\ndocs/runs/: {files} files, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
