"""Numbers inside sentences that restate a generated table: a sentence quoting a table's cell reads it from the table
as generated from the records, so the two cannot drift apart. A page writes, e.g.,

    CPB leads (<!-- value: cell recipe-pes cpb mean+±+std -->78.7 ± 0.9<!-- /value -->)

naming the table, the row (its first cell, backticks and bold removed; ``cpb&interpolate`` for the row whose first
two cells are those) and the column (its header, or ``#N`` for the N-th); ``+`` stands for a space inside an
argument, and a cell name with ``*`` or ``?`` matches as a shell pattern (``*rope_mixed`` for the row "+ rope_mixed").
A table that is several tables reads as its first. ``cell-range`` gives the span "low–high" of one column over
several rows (``row-range`` of one row over several columns), ``cell-gap`` the distance between two rows' numbers
(each cell's first number, after a leading rank "N:"), ``column-range`` the span of a whole column, ``ranked`` every
row in the order of one column, ``rank-correlation`` how alike two tables order the rows they share."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Callable

from reports.ranks import spearman
from reports.records import span

NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


@lru_cache(maxsize=64)
def table_rows(root: Path, table: str) -> tuple[list[str], list[list[str]]]:
    """A generated table's header and rows (cells stripped of backticks and bold), rendered once per report run
    (scripts/report.py clears the cache at its start)."""
    from reports import TABLES  # the study modules register their tables in the package, which imports this one

    if table not in TABLES:
        raise ValueError(f"no table named {table!r}")
    text = TABLES[table](root).splitlines()
    start = next((i for i, line in enumerate(text) if line.startswith("|")), len(text))
    end = next((i for i in range(start, len(text)) if not text[i].startswith("|")), len(text))
    lines = text[start:end]  # the first table's lines
    if len(lines) < 2:
        raise ValueError(f"table {table!r} has no rows")

    def cells(line: str) -> list[str]:
        return [c.strip().replace("`", "").replace("**", "") for c in line.strip().strip("|").split(" | ")]

    return cells(lines[0]), [cells(line) for line in lines[2:]]


def column_index(root: Path, table: str, column: str) -> int:
    """Where in ``table``'s rows the column headed ``column`` (``+`` for a space), or the ``#N``-th, is."""
    header, _ = table_rows(root, table)
    column = column.replace("+", " ")
    if column.startswith("#") and column[1:].isdigit() and 1 <= int(column[1:]) <= len(header):
        return int(column[1:]) - 1
    if column in header:
        return header.index(column)
    raise ValueError(f"table {table!r} has no column {column!r} (a header, or #N for the N-th); its columns: "
                     f"{', '.join(header)}")


def lookup(root: Path, table: str, row: str, column: str) -> str:
    """The text of ``table``'s cell in the row named ``row`` and the column headed ``column``."""
    _, rows = table_rows(root, table)
    row, at = row.replace("+", " "), column_index(root, table, column)
    names = row.split("&")
    matching = [r for r in rows if len(r) >= len(names) and all(
        fnmatch.fnmatchcase(got, name) if any(c in name for c in "*?[") else got == name for got, name in zip(r, names))]
    if len(matching) != 1:
        found = "no row" if not matching else f"{len(matching)} rows"
        raise ValueError(f"table {table!r} has {found} named {row!r}; its rows: "
                         f"{', '.join(dict.fromkeys(r[0] for r in rows))}")
    return matching[0][at]


def number_in(text: str, where: str) -> tuple[float, str]:
    """The first number of a cell's text, after the rank where one leads ("3: 76.5 ± 0.2", "2 of 5: 88.5"), as a
    value and as written."""
    found = NUMBER.search(text.rpartition(": ")[2])
    if found is None:
        raise ValueError(f"{where} holds no number: {text!r}")
    return float(found.group(0).replace("−", "-").replace(",", "")), found.group(0)


def cell(root: Path, table: str, row: str, column: str) -> str:
    """A table's cell as the table shows it."""
    return lookup(root, table, row, column)


def cell_number(root: Path, table: str, row: str, column: str) -> str:
    """The first number of a table's cell, as written (without the spread or a footnote mark after it)."""
    return number_in(lookup(root, table, row, column), f"{table} {row} {column}")[1]


def span_of(numbers: list[tuple[float, str]], unsigned: bool = False) -> str:
    """"low–high" of numbers (each as a value and as written), or one number where they agree; ``unsigned``: of their
    sizes, which must then share a sign."""
    if unsigned:
        if len({value > 0 for value, _ in numbers if value != 0}) > 1:
            raise ValueError("the numbers mix signs: use cell-range")
        numbers = [(abs(value), text.lstrip("+-−")) for value, text in numbers]
    numbers = sorted(numbers)
    return span(numbers[0][1], numbers[-1][1])


def cell_range(root: Path, table: str, column: str, *rows: str, unsigned: bool = False) -> str:
    """The lowest and the highest number of ``column`` over ``rows`` (each cell's first number, as written), "low–high",
    or one number where they agree; ``unsigned``: of the numbers' sizes ("lose 14.5–21.8 points")."""
    if len(rows) < 2:
        raise ValueError("a cell range takes TABLE COLUMN and two or more rows")
    return span_of([number_in(lookup(root, table, row, column), f"{table} {row} {column}") for row in rows], unsigned)


def row_range(root: Path, table: str, row: str, *columns: str) -> str:
    """:func:`cell_range` along one row: the lowest and highest number of ``row`` over ``columns``."""
    if len(columns) < 2:
        raise ValueError("row-range takes TABLE ROW and two or more columns")
    return span_of([number_in(lookup(root, table, row, column), f"{table} {row} {column}") for column in columns])


def cell_range_unsigned(root: Path, table: str, column: str, *rows: str) -> str:
    """:func:`cell_range` of the numbers' sizes, signs dropped."""
    return cell_range(root, table, column, *rows, unsigned=True)


def column_numbers(root: Path, table: str, column: str) -> list[tuple[tuple[float, str], str]]:
    """Every row's first number in ``column`` (as a value and as written), with the row's name."""
    _, rows = table_rows(root, table)
    at = column_index(root, table, column)
    return [(number_in(r[at], f"{table} {r[0]} {column}"), r[0]) for r in rows]


def column_range(root: Path, table: str, column: str, *options: str) -> str:
    """:func:`cell_range` over every row of ``table`` (``unsigned``: of the numbers' sizes): a sentence about all the
    rows stays true as rows are added."""
    if options not in ((), ("unsigned",)):
        raise ValueError(f"column-range takes TABLE COLUMN and optionally 'unsigned', not {' '.join(options)!r}")
    return span_of([number for number, _ in column_numbers(root, table, column)], unsigned=bool(options))


def ranked(root: Path, table: str, column: str, *order: str) -> str:
    """Every row of ``table`` by the first number of ``column``, highest first (``ascending``: lowest first), as
    "`name` number, ...": a sentence that states an order states the table's, whichever rows it holds."""
    if order not in ((), ("ascending",)):
        raise ValueError(f"ranked takes TABLE COLUMN and optionally 'ascending', not {' '.join(order)!r}")
    numbers = sorted(column_numbers(root, table, column), key=lambda item: item[0][0], reverse=not order)
    return ", ".join(f"`{name}` {text}" for (_, text), name in numbers)


def rank_correlation(root: Path, table: str, column: str, other_table: str, other_column: str) -> str:
    """Spearman's rank correlation (two decimals) of the rows two tables share (by name), each ordered by the first
    number of its column: whether two studies order the same PEs alike, over whichever rows both hold. A shared name
    on two rows of a table is an error (which row would it be?)."""
    scored = [column_numbers(root, t, c) for t, c in ((table, column), (other_table, other_column))]
    rows_named = [Counter(name for _, name in rows) for rows in scored]
    shared = rows_named[0].keys() & rows_named[1].keys()
    twice = sorted(n for n in shared if rows_named[0][n] > 1 or rows_named[1][n] > 1)
    if twice:
        raise ValueError(f"rank-correlation: {', '.join(twice)} names several rows of {table!r} or {other_table!r}")
    first, second = ({name: value for (value, _), name in rows if name in shared} for rows in scored)
    return f"{spearman(first, second):.2f}"


def cell_gap(root: Path, table: str, column: str, first: str, second: str) -> str:
    """How far apart (unsigned, to the decimals the table shows) two rows' numbers in ``column`` are."""
    (a, a_text), (b, b_text) = (number_in(lookup(root, table, row, column), f"{table} {row} {column}")
                                for row in (first, second))
    decimals = max(len(t.partition(".")[2]) for t in (a_text, b_text))
    return f"{abs(a - b):.{decimals}f}"


#: Numbers inside sentences (scripts/report.py's ``<!-- value: NAME ARG ... -->``).
VALUES: dict[str, Callable[..., str]] = {"cell": cell, "cell-number": cell_number, "cell-range": cell_range,
                                         "cell-range-unsigned": cell_range_unsigned, "cell-gap": cell_gap,
                                         "row-range": row_range, "column-range": column_range, "ranked": ranked,
                                         "rank-correlation": rank_correlation}
