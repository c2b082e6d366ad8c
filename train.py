"""Train a ViT (or the text classifier) with any registered position encoding: ``python train.py --help``.
The command is :mod:`vitpe.cli.train`, installed as ``vitpe-train``."""

import sys

from vitpe.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
