"""Evaluate trained runs at other image resolutions (or text runs at other sequence lengths), interpolating or
extrapolating their position encodings.

    python eval.py RUN_DIR_OR_CHECKPOINT [MORE ...] --resolutions 16,24,32,40,48,64 \\
                   --pe-resize interpolate,extrapolate --out DIR [--plot-pe]
    python eval.py TEXT_RUN_DIR [MORE ...] --lengths 64,128,256,512 --pe-resize interpolate,extrapolate --out DIR

Test images are resized from their native size with anti-aliased bicubic interpolation. Writes DIR/resolution.json,
.csv, .md (mean ± std over runs that differ only in seed) and .png; with --plot-pe, one PE picture per run.
Each run's records are also kept in DIR/runs/<run>.json with the checkpoint's SHA-256: rerunning the same command
reuses them, so a long sweep resumes where it stopped and more runs can be added to a finished one.
With --lengths (text runs on the synthetic tasks), test sequences of exactly each length are generated and the files
are DIR/length.json, .csv, .md, .png.

Pretrained timm models are evaluated the same way, converted to vitpe (vitpe.from_timm), on an image folder with
timm's own data config at every size (resize to size / crop_pct, centre crop) -- the rope-vit protocol:

    python eval.py timm:vit_small_patch16_rope_mixed_224.naver_in1k [timm:NAME@WEIGHTS_FILE ...] \
                   --data imagefolder:/path/to/imagenet/val --resolutions 224,288,384,512 --out DIR
"""

import sys

from vitpe.cli.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
