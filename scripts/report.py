"""Every published table and number, generated from the committed records under results/.

    python scripts/report.py            # rewrite the tables and numbers in place
    python scripts/report.py --check    # exit 1, naming each page, where a page differs from its records

A page marks a generated table with ``<!-- table: NAME -->`` before it and ``<!-- /table -->`` after it, and a
generated number inside a sentence with ``<!-- value: NAME [ARG ...] -->...<!-- /value -->``; what lies between is
replaced by :data:`reports.TABLES` [NAME] or :data:`reports.VALUES` [NAME] (called with the ARGs: e.g. ``sweep-mean``
gives the mean accuracy of the runs a pattern names in a committed sweep; scripts/reports/, one module per study).
The pages are those of :data:`reports.pages.MARKERS` -- README.md, RESULTS.md, BENCHMARKS.md and every page under
docs/ -- and each must hold exactly the tables listed there, in order, and as many spans of each value. The check
also fails on a marker naming nothing, a table or number no page shows, a page under docs/ that the list does not
name, and a placeholder left on a page. Figures (:data:`reports.FIGURES`) are drawn into results/figures/ with the
numbers they plot beside them; the check compares those numbers and fails on a figure no page shows.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections import Counter
from pathlib import Path

from reports import FIGURES, TABLES, VALUES  # one module per study (scripts/reports/): tables, numbers, figures
from reports.figures import FOLDER, stale_or_write
from reports.pages import MARKERS
from reports.table_cells import table_rows

ROOT = Path(__file__).resolve().parents[1]
# a table's markers stand on lines of their own, a value's anywhere but in inline code (where a page shows the syntax)
TABLE = re.compile(r"^(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)$", re.S | re.M)
VALUE = re.compile(r"(?<!`)(<!-- value: (?P<name>[\w-]+)(?P<args>(?: [^\s>]+)*) -->)(?P<body>[^\n]*?)(<!-- /value -->)")
MARKER = re.compile(r"^<!-- (table): ([\w-]+) -->$|(?<!`)<!-- (value): ([\w-]+)(?: [^\s>]+)* -->", re.M)
CODE = re.compile(r"```.*?```", re.S)
#: What a page must not say: work not done, written as if it were a result.
PLACEHOLDERS = re.compile(r"not committed yet|\bTODO\b|\bTBD\b|\bFIXME\b|still to (?:be )?measured?|coming soon|"
                          r"to be filled", re.I)


def documentation_pages(root: Path) -> list[str]:
    """Every page the project publishes: the three at the top and each markdown file under docs/."""
    return ["README.md", "RESULTS.md", "BENCHMARKS.md",
            *sorted(str(p.relative_to(root)) for p in (root / "docs").rglob("*.md"))]


def render(text: str, root: Path, rendered: dict[str, str], shown: set[str], page: str) -> str:
    """``text`` with every marked table and value regenerated (``rendered`` caches each, by name and arguments;
    ``shown`` collects the names, ``"table:NAME"`` or ``"value:NAME"``)."""
    def generated(kind: str, name: str, args: tuple[str, ...] = ()) -> str:
        known = TABLES if kind == "table" else VALUES
        if name not in known:
            raise SystemExit(f"error: {page}: <!-- {kind}: {name} --> names no {kind}; known: "
                             f"{', '.join(sorted(known))}")
        key = " ".join((f"{kind}:{name}", *args))
        if key not in rendered:
            try:
                made = known[name](root, *args)
            except (TypeError, ValueError, KeyError) as err:
                raise SystemExit(f"error: {page}: <!-- {kind}: {' '.join((name, *args))} -->: {err}") from None
            rendered[key] = made.rstrip("\n") + "\n" if kind == "table" else made
        shown.add(f"{kind}:{name}")
        return rendered[key]

    text = TABLE.sub(lambda m: m.group(1) + generated("table", m["name"]) + m.group(4), text)
    return VALUE.sub(lambda m: m.group(1) + generated("value", m["name"], tuple(m["args"].split())) + m.group(5),
                     text)


def markers_of(text: str) -> tuple[str, ...]:
    """A page's markers as :data:`MARKERS` lists them: its tables in order, then each value's name with how many
    sentences hold it (``"value:sweep-mean x9"``)."""
    found = [(table or value, table_name or value_name)
             for table, table_name, value, value_name in MARKER.findall(text)]
    tables = [f"table:{name}" for kind, name in found if kind == "table"]
    values = Counter(name for kind, name in found if kind == "value")
    return (*tables, *(f"value:{name} x{count}" for name, count in sorted(values.items())))


def layout_errors(root: Path) -> list[str]:
    """Where the pages' markers and words disagree with :data:`MARKERS`: a page missing from the list (or listed and
    gone), markers not those listed, a placeholder."""
    errors = []
    published = documentation_pages(root)
    for page in sorted(set(published) - set(MARKERS)):
        errors.append(f"{page}: a page scripts/reports/pages.py does not list (add it, with its markers)")
    for page in sorted(set(MARKERS) - set(published)):
        errors.append(f"{page}: listed in scripts/reports/pages.py but not found")
    for page in published:
        if page not in MARKERS or not (root / page).is_file():
            continue
        text = (root / page).read_text()
        found = markers_of(text)
        if found != MARKERS[page]:
            missing = [m for m in MARKERS[page] if m not in found]
            extra = [m for m in found if m not in MARKERS[page]]
            what = "; ".join(filter(None, [f"missing {', '.join(missing)}" if missing else "",
                                           f"not listed {', '.join(extra)}" if extra else "",
                                           "" if missing or extra else "in another order"]))
            errors.append(f"{page}: its generated tables and numbers are not those scripts/reports/pages.py lists "
                          f"({what})")
        for match in PLACEHOLDERS.finditer(CODE.sub("", text)):
            errors.append(f"{page}: a placeholder where a result belongs: {match.group(0)!r}")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 where a page is out of date")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    parser.add_argument("--markers", metavar="PAGE", help="print PAGE's markers as scripts/reports/pages.py lists them "
                                                          "(to update the list after adding a table or a number)")
    args = parser.parse_args(argv)
    if args.markers:
        page = args.root / args.markers
        if not page.is_file():
            print(f"error: --markers {args.markers}: no such page under {args.root} (give it relative to the "
                  f"repository, e.g. RESULTS.md)", file=sys.stderr)
            return 2
        print(markers_of(page.read_text()))
        return 0
    table_rows.cache_clear()  # the tables sentences quote, rendered afresh from the records as they are now
    rendered: dict[str, str] = {}
    shown: set[str] = set()
    stale = []
    pages_text = []
    for page in documentation_pages(args.root):
        path = args.root / page
        if not path.is_file():
            continue
        text = path.read_text()
        pages_text.append(text)
        new = render(text, args.root, rendered, shown, page)
        if new == text:
            continue
        stale.append(path)
        if args.check:
            diff = difflib.unified_diff(text.splitlines(), new.splitlines(), str(path), "from the records", lineterm="")
            print("\n".join(list(diff)[:40]))
        else:
            path.write_text(new)
    unused = [name for name in sorted({f"table:{n}" for n in TABLES} | {f"value:{n}" for n in VALUES})
              if name not in shown]
    errors = layout_errors(args.root)
    stale_figures = []
    for name, figure in FIGURES.items():
        panels = figure(args.root)
        if panels is not None and not any(f"{FOLDER}/{name}.png" in text for text in pages_text):
            unused.append(f"figure:{name}")
        reason = stale_or_write(name, panels, args.root, args.check)
        if reason:
            stale_figures.append((name, reason))
    if unused:
        errors.append(f"no page shows {', '.join(unused)}")
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    if errors:
        return 1
    if args.check and (stale or stale_figures):
        out_of_date = [str(p.relative_to(args.root)) for p in stale]
        out_of_date += [f"figure {reason}" for _, reason in stale_figures]
        print(f"out of date with their records: {'; '.join(out_of_date)}; run python scripts/report.py",
              file=sys.stderr)
        return 1
    for path in [] if args.check else stale:
        print(f"rewrote {path.relative_to(args.root)}")
    for name, _ in [] if args.check else stale_figures:
        print(f"redrew {FOLDER}/{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
