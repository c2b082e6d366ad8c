"""``python -m vitpe.bench``: see :mod:`vitpe.bench.cli`."""

import sys

from vitpe.bench.cli import main

sys.exit(main())
