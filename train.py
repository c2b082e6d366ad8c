"""Train a ViT (or, with ``task: text``, the text classifier) with any registered position encoding.

    python train.py --config configs/cifar10.yaml [key=value ...]     e.g. model.pe=rope_mixed train.epochs=5
    python train.py --resume RUN_DIR                                   continue a run where it stopped
    torchrun --nproc_per_node=N train.py --config ...                  DistributedDataParallel

One process owns a run folder (RUN_DIR/.lock). SIGTERM or Ctrl-C stops after the current step with a checkpoint at
that step and exit code 75; --resume then continues exactly. Errors are one line (--debug shows the traceback);
exit codes in vitpe/cli/exits.py.

The run folder (``out_dir``) receives config.yaml (resolved), metrics.jsonl (one record per epoch),
checkpoint.pt (last, written atomically every epoch and every ``train.checkpoint_every`` steps) and best.pt;
text runs also vocab.json and data_stats.json (tokens per sequence in each split); a run started from another
(``model.init=run:DIR``) also init.json (which run, checkpoint, epoch and step).
"""

import sys

from vitpe.cli.train import main

if __name__ == "__main__":
    sys.exit(main())
