"""Resolution-transfer evaluation: sweeps over image sizes and resize modes, tables, plots, PE pictures."""

from vitpe.resolution.report import summarise, write_reports
from vitpe.resolution.sweep import Run, cached_evaluate_run, evaluate_run, find_run, parse_modes, parse_resolutions

__all__ = ["Run", "cached_evaluate_run", "evaluate_run", "find_run", "parse_modes", "parse_resolutions", "summarise", "write_reports"]
