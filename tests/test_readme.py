"""The README's CPU examples of the Python API run as written."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
CPU_BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "cuda" not in b]


def test_readme_has_cpu_examples():
    assert len(CPU_BLOCKS) >= 2


@pytest.mark.parametrize("block", CPU_BLOCKS, ids=lambda b: b.splitlines()[2][:30])
def test_readme_cpu_example_runs(block, capsys):
    from autokernel import runtime

    if not runtime.INTERPRETER:
        pytest.skip("the CPU examples need the interpreter")
    exec(compile(block, str(README), "exec"), {})
