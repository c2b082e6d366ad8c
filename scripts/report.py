"""Every published table, generated from the committed records under results/.

    python scripts/report.py            # rewrite the tables in place
    python scripts/report.py --check    # exit 1, naming each table, where a page differs from its records

A page marks a generated table with ``<!-- table: NAME -->`` before it and ``<!-- /table -->`` after it; what lies
between is replaced by :data:`TABLES` [NAME] (scripts/reports/, one module per study). Pages: README.md, RESULTS.md,
BENCHMARKS.md and docs/results/*.md. A marker naming no table, or a table that no page shows, is an error.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from reports import TABLES  # one module per study (scripts/reports/), each adding its tables

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def pages(root: Path) -> list[Path]:
    return [root / "README.md", root / "RESULTS.md", root / "BENCHMARKS.md", *sorted((root / "docs/results").glob("*.md"))]


def render(text: str, root: Path, rendered: dict[str, str], page: str) -> str:
    """``text`` with every marked table regenerated (``rendered`` caches each table's markdown)."""
    def fill(match: re.Match) -> str:
        name = match["name"]
        if name not in TABLES:
            raise SystemExit(f"error: {page}: <!-- table: {name} --> names no table; known: {', '.join(sorted(TABLES))}")
        if name not in rendered:
            rendered[name] = TABLES[name](root).rstrip("\n") + "\n"
        return match.group(1) + rendered[name] + match.group(4)

    return MARKED.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a page is out of date")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    args = parser.parse_args(argv)
    rendered: dict[str, str] = {}
    stale = []
    for path in pages(args.root):
        if not path.is_file():
            continue
        text = path.read_text()
        new = render(text, args.root, rendered, str(path.relative_to(args.root)))
        if new == text:
            continue
        stale.append(path)
        if args.check:
            diff = difflib.unified_diff(text.splitlines(), new.splitlines(), str(path), "from the records", lineterm="")
            print("\n".join(list(diff)[:40]))
        else:
            path.write_text(new)
    unused = sorted(set(TABLES) - set(rendered))
    if unused:
        print(f"error: no page shows the table(s) {', '.join(unused)}", file=sys.stderr)
        return 1
    if args.check and stale:
        print(f"out of date with their records: {', '.join(str(p.relative_to(args.root)) for p in stale)}; run "
              f"python scripts/report.py", file=sys.stderr)
        return 1
    for path in [] if args.check else stale:
        print(f"rewrote {path.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
