"""The published tables, one module per study, each computed from committed records only: run folders
(``config.yaml`` or a baseline's ``config.json``, ``metrics.jsonl``), the sweeps' ``resolution.json`` /
``length.json`` and the benchmark's ``bench.json``. :data:`TABLES` joins every study's; scripts/report.py puts them
into the pages, with the numbers of :data:`VALUES` inside sentences. A new study is a new module here, added to
:data:`STUDIES`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from reports import (bench, compare, detail, first_cpu_recipe, imagenette, imagewoof, imagewoof_native, loaders,
                     log_values, machines, mixed, model_values, recipe, recipe_gpu, recipe_levers, record_values,
                     library, run_values, table_cells, text, transfer)

STUDIES = (machines, model_values, record_values, run_values, table_cells, log_values, recipe, recipe_levers,
           recipe_gpu, compare, detail, transfer, first_cpu_recipe, text, bench, loaders, mixed, imagenette,
           imagewoof, imagewoof_native, library)
TABLES: dict[str, Callable[[Path], str]] = {name: table for study in STUDIES
                                           for name, table in getattr(study, "TABLES", {}).items()}
#: Figures (``results/figures/NAME.png``, :mod:`reports.figures`): name -> function of the root -> panels or None.
FIGURES: dict[str, Callable] = {name: figure for study in STUDIES for name, figure in getattr(study, "FIGURES", {}).items()}
#: Numbers inside sentences (``<!-- value: NAME -->``): name -> function of the repository root -> text.
VALUES: dict[str, Callable[..., str]] = {name: value for study in STUDIES
                                            for name, value in getattr(study, "VALUES", {}).items()}
