"""Evaluate runs (and timm models) across image sizes, lengths and resize modes: ``python eval.py --help``.
The command is :mod:`vitpe.cli.evaluate`, installed as ``vitpe-eval``."""

import sys

from vitpe.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
