"""What ``import vitpe.pe`` costs over ``import torch`` alone: fresh processes, alternated, in one run.

    python benchmarks/import_time.py --out results/bench/import_cpu

Each round starts one process that imports torch and one that imports torch and then ``vitpe.pe`` (order alternating),
each timing its own imports with ``time.perf_counter`` (the second also ``import vitpe.pe`` alone, after torch's);
the record (``import.json``) holds every round's seconds and the
medians, and what else ``import vitpe.pe`` brought in (none of timm, torchvision, yaml, matplotlib).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from vitpe.atomic_files import write_text_atomic
from vitpe.machine import machine

TIMED = {
    "torch": "import time; s = time.perf_counter(); import torch; print(time.perf_counter() - s)",
    "torch + vitpe.pe": ("import time, sys; s = time.perf_counter(); import torch; t = time.perf_counter(); "
                         "import vitpe.pe; e = time.perf_counter(); print(e - s); print(e - t); "
                         "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                         "('timm', 'torchvision', 'yaml', 'matplotlib')))"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    seconds: dict[str, list[float]] = {name: [] for name in TIMED}
    heavy: list[str] = []
    for round_index in range(args.rounds):
        names = list(TIMED) if round_index % 2 == 0 else list(reversed(TIMED))
        for name in names:
            out = subprocess.run([sys.executable, "-c", TIMED[name]], capture_output=True, text=True, check=True)
            lines = out.stdout.splitlines()
            seconds[name].append(float(lines[0]))
            if len(lines) > 1:  # the vitpe.pe process: its own import after torch's, and the heavy modules
                seconds.setdefault("vitpe.pe after torch", []).append(float(lines[1]))
                heavy = json.loads(lines[2].replace("'", '"'))
    medians = {name: statistics.median(v) for name, v in seconds.items()}
    record = {"machine": machine(), "python": sys.version.split()[0],
              "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"), "rounds": args.rounds, "seconds": seconds,
              "median_s": medians, "added_s": medians["torch + vitpe.pe"] - medians["torch"], "heavy_modules": heavy,
              "command": "python benchmarks/import_time.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    args.out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(json.dumps(record, indent=1) + "\n", args.out / "import.json")
    print(f"torch {medians['torch']:.3f} s, torch + vitpe.pe {medians['torch + vitpe.pe']:.3f} s: "
          f"+{record['added_s']:.3f} s (vitpe.pe's own import {medians['vitpe.pe after torch']:.3f} s); "
          f"heavy modules: {heavy or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
