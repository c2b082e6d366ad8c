"""Numbers inside sentences read from committed logs of one-off measurements (an A/B harness's printout, a
profile, a kernel count, an early benchmark's ``bench.json``), kept under ``results/bench/history/``. A page writes,
e.g.,

    its kernel takes <!-- value: log-number bench/history/2026-12-02/host/profile_compiled_rope_mixed.txt
    graph_1_cpp_fused_add_clone_mul_neg 5 1 -->7.7<!-- /value --> ms

(on one line): the log under results/, the text that picks its line (``+`` for a space; the first line holding it,
or the K-th with a last argument ``@K``), which number of that line (1 = the first), and optionally how many
decimals to round it to. The numbers of a line are its signed decimals, a unit allowed after (``7.745ms``) but no
word before (``graph_1`` holds none).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable

NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?")  # a unit may follow ("7.745ms"), a word may not precede


def _record(root: Path, name: str) -> Path:
    """The committed record ``results/<name>``, or a ValueError naming it."""
    path = root / "results" / name
    if not path.is_file():
        raise ValueError(f"results/{name} is not a file")
    return path


def _log_line(root: Path, log: str, text: str, occurrence: int) -> str:
    path = _record(root, log)
    wanted = text.replace("+", " ")
    lines = [line for line in path.read_text().splitlines() if wanted in line]
    if len(lines) < occurrence:
        raise ValueError(f"results/{log} has {len(lines)} line(s) holding {wanted!r}, not {occurrence}")
    return lines[occurrence - 1]


def log_number(root: Path, log: str, text: str, field: str, *rest: str) -> str:
    """The ``field``-th number of the line of ``log`` that holds ``text``, as the log writes it (its sign kept), or
    rounded to ``rest[0]`` decimals; ``@K`` in ``rest`` takes the K-th such line."""
    occurrence = next((int(arg[1:]) for arg in rest if arg.startswith("@")), 1)
    digits = [arg for arg in rest if not arg.startswith("@")]
    if len(digits) > 1 or not field.isdigit() or int(field) < 1 or (digits and not digits[0].isdigit()):
        raise ValueError("log-number takes LOG TEXT FIELD [DECIMALS] [@K] (FIELD from 1)")
    line = _log_line(root, log, text, occurrence)
    numbers = NUMBER.findall(line)
    if int(field) > len(numbers):
        raise ValueError(f"results/{log}: the line {line.strip()!r} has {len(numbers)} numbers, not {field}")
    number = numbers[int(field) - 1]
    if not digits:
        return number
    rounded = f"{float(number):.{int(digits[0])}f}"
    return f"+{rounded}" if number.startswith("+") else rounded


def _bench_row(root: Path, bench: str, pe: str, px: str) -> dict:
    rows = [row for row in json.loads(_record(root, bench).read_text())["rows"]
            if row["pe"] == pe and str(row["img_size"]) == px]
    if len(rows) != 1:
        raise ValueError(f"results/{bench} has {len(rows)} rows for {pe} at {px} px, not one")
    return rows[0]


def _step(kind: str) -> str:
    if kind not in ("train", "infer"):
        raise ValueError(f"the step is train or infer, not {kind!r}")
    return kind


def bench_overhead(root: Path, bench: str, pe: str, px: str, kind: str) -> str:
    """A PE's step time over ``none`` in a benchmark's ``bench.json``, whole percent ("+52%")."""
    row = _bench_row(root, bench, pe, px)
    return f"{1 / row[f'{_step(kind)}_vs_none'] - 1:+.0%}"


def bench_img_s(root: Path, bench: str, pe: str, px: str, kind: str) -> str:
    """A PE's images per second in a benchmark's ``bench.json``, one decimal."""
    return f"{_bench_row(root, bench, pe, px)[f'{_step(kind)}_img_s']:.1f}"


def bench_checks(root: Path, bench: str, clear: str = "") -> str:
    """How many of a benchmark's speed checks its ``bench.json`` says were met ("12 of 12"), or with ``clear``, met
    clear of the noise (the whole interval on the right side of the limit)."""
    if clear not in ("", "clear"):
        raise ValueError(f"bench-checks takes a bench.json and optionally 'clear', not {clear!r}")
    checks = json.loads(_record(root, bench).read_text())["targets"]
    return f"{sum(c['met'] and (c['clear'] or not clear) for c in checks)} of {len(checks)}"


#: Numbers inside sentences (scripts/report.py's ``<!-- value: NAME ARG ... -->``).
VALUES: dict[str, Callable[..., str]] = {"log-number": log_number, "bench-overhead": bench_overhead,
                                         "bench-img-s": bench_img_s, "bench-checks": bench_checks}
