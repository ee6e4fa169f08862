"""The docs' citations of run records: every file under docs/runs/ that a page names exists."""

import re

from tests.helpers import ROOT


def test_every_cited_run_record_exists():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "configs").rglob("*.md"))]
    cited = {m.rstrip(".,;:") for page in pages
             for m in re.findall(r"docs/runs/[A-Za-z0-9_./-]+\.[a-z]{2,5}\b", page.read_text())}
    assert len(cited) > 40
    assert [c for c in sorted(cited) if not (ROOT / c).exists()] == []
