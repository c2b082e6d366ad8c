"""The documentation does not rot: every ```python block in README.md and docs/ runs as written, and every relative
link (file and #anchor) resolves."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "RESULTS.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("**/*.md")),
         ROOT / "benchmarks/README.md"]
CODE_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def python_blocks():
    for page in CODE_PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text[:match.start()].count("\n") + 1
            yield pytest.param(match.group(1), id=f"{page.relative_to(ROOT)}:{line}")


@pytest.mark.slow
@pytest.mark.parametrize("code", python_blocks())
def test_python_block_runs_as_written(code, tmp_path):
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_readme_stays_short():
    """What a reader sees: the generated spans' markers are comments, not text."""
    import re

    assert len(re.sub(r"<!--.*?-->", "", (ROOT / "README.md").read_text())) < 12_000
