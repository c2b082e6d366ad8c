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

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from vitpe.cli.arg_types import non_negative_int, positive_int
from vitpe.cli.exits import add_debug_flag, run_cli
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.engine.precision import PRECISIONS
from vitpe.loading.checkpoint import build_from_checkpoint
from vitpe.machine import checked_device
from vitpe.pe.grid import RESIZE_MODES
from vitpe.resolution import cached_evaluate_run, find_run, parse_modes, parse_resolutions, write_reports
from vitpe.resolution.sweep import ASPECTS, parse_pe_options, split_run_spec, with_pe_options
from vitpe.resolution.lengths import cached_evaluate_lengths, parse_lengths
from vitpe.resolution.pe_plots import plot_pe
from vitpe.resolution.pretrained import PretrainedRun, cached_evaluate_pretrained, is_pretrained_spec, parse_data


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run folders (their checkpoint.pt), checkpoint files, or pretrained "
                                                "timm models as timm:NAME or timm:NAME@WEIGHTS_FILE; RUN@NAME=VALUE"
                                                "[,NAME=VALUE]: that run with PE options of its own")
    parser.add_argument("--resolutions", default="16,24,32,40,48,64", help="N or HxW, comma-separated")
    parser.add_argument("--lengths", help="text runs: sequence lengths, comma-separated (instead of --resolutions)")
    parser.add_argument("--pe-resize", default="interpolate,extrapolate",
                        help=f"resize modes, comma-separated: {', '.join(RESIZE_MODES)} (ntk and yarn for sinusoidal "
                             f"and rotary PEs; n/a, with the reason, for the others)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--aspect", choices=ASPECTS, default="run",
                        help="image runs: each size as the run was tested (default), the photographs' centred squares "
                             "(square), or every photograph at its own aspect with its short side at the size "
                             "(native; runs on image folders)")
    parser.add_argument("--best", action="store_true", help="use best.pt instead of checkpoint.pt of run folders")
    parser.add_argument("--ema", action="store_true", help="evaluate the EMA weights when the run has them")
    parser.add_argument("--data-root", help="where the test data lives (default: the run's data.root, or "
                                             "$VITPE_DATA when that folder is not on this machine)")
    parser.add_argument("--data", help="for timm: models, the test images: imagefolder:DIR (DIR/<class>/<image>)")
    parser.add_argument("--workers", type=non_negative_int, default=2,
                        help="image-decoding processes for --data (0: decode in this process)")
    parser.add_argument("--limit", type=non_negative_int, default=0,
                        help="evaluate on the first N test images only (with --data: N spread over the folder; "
                             "0: the whole test split, whatever data.test_limit the run trained with)")
    parser.add_argument("--batch-size", type=positive_int, default=500,
                        help="most images per batch (fewer at large resolutions: about 8k tokens per batch)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=("run",) + PRECISIONS, default="run",
                        help="autocast while evaluating: run (default: each run's own train.precision, so that the "
                             "training size reproduces its final evaluation), auto, bf16 or fp32")
    parser.add_argument("--plot-pe", action="store_true", help="also draw each run's PE (PNG files in --out)")
    parser.add_argument("--pe-option", action="append", default=[], metavar="NAME=VALUE",
                        help="evaluate with this PE option changed (repeatable), e.g. large_grid_slope=0.6 for "
                             "lookhere; the records are named <run>@NAME=VALUE")
    add_debug_flag(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_cli(lambda: sweep(args), debug=args.debug,
                   interrupted=f"the runs evaluated whole are kept in {Path(args.out) / 'runs'}; the same command "
                               f"continues from them",
                   go_on="run the same command: it continues from the runs evaluated whole")


def sweep(args: argparse.Namespace) -> None:
    """Evaluate every run and pretrained model at every size (or length) in every mode; write the reports."""
    lengths = parse_lengths(args.lengths) if args.lengths else None
    if lengths and args.plot_pe:
        raise ValueError("--plot-pe draws the PEs of image runs; it does not apply to --lengths")
    sizes, modes = parse_resolutions(args.resolutions), parse_modes(args.pe_resize)
    pretrained = [PretrainedRun(spec) for spec in args.runs if is_pretrained_spec(spec)]
    if pretrained and lengths:
        raise ValueError("--lengths evaluates text runs; timm: models are image models")
    folder = parse_data(args.data) if pretrained else None
    if args.data and not pretrained:
        raise ValueError("--data is the test set of timm: models; trained runs use their own data set")
    pe_options = parse_pe_options(args.pe_option)
    runs = []
    for spec in args.runs:
        if is_pretrained_spec(spec):
            continue
        path, own = split_run_spec(spec)  # RUN@NAME=VALUE: this run with a PE option of its own
        runs.append(with_pe_options(find_run(path, args.best), {**pe_options, **parse_pe_options(own)}))
    checked_device(args.device)
    keep_freed_memory(args.device)
    common = dict(limit=args.limit, batch_size=args.batch_size, use_ema=args.ema, device=args.device,
                  precision=None if args.precision == "run" else args.precision)
    records = []
    points = len(lengths) if lengths else len(sizes)
    with tqdm(total=(len(runs) + len(pretrained)) * points * len(modes), desc="evaluating",
              dynamic_ncols=True) as bar:
        for entry in pretrained:
            bar.set_postfix(run=entry.name)
            records += cached_evaluate_pretrained(entry, Path(args.out) / "runs", sizes, modes, folder,
                                                  limit=args.limit, batch_size=min(args.batch_size, 64),
                                                  workers=args.workers, device=args.device, progress=bar)
        for run in runs:
            bar.set_postfix(run=run.name)
            if lengths:
                records += cached_evaluate_lengths(run, Path(args.out) / "runs", lengths, modes, progress=bar,
                                                   **common)
            else:
                records += cached_evaluate_run(run, Path(args.out) / "runs", sizes, modes,
                                               data_root=args.data_root, progress=bar, aspect=args.aspect, **common)
    if lengths:
        paths = write_reports(records, args.out, "length", "Accuracy against sequence length")
    else:
        paths = write_reports(records, args.out, "resolution", "Accuracy against test resolution")
    if args.plot_pe:
        models = [(run.name, build_from_checkpoint(run.ckpt)) for run in runs]
        paths += plot_models(models + [(entry.name, entry.model()) for entry in pretrained], sizes, Path(args.out))
    print(Path(paths[2]).read_text())  # the markdown tables, then where every file went
    for path in paths:
        print(path)


def plot_models(models, sizes, out: Path) -> list[Path]:
    """One PE picture per (name, model), resized to the largest requested resolution."""
    written = []
    for name, model in models:
        largest = max(sizes, key=lambda s: s[0] * s[1])
        path = out / f"pe_{name.replace('/', '_')}.png"
        if plot_pe(model.pe, model.patch_grid(largest), path, f"{name} ({model.pe.name})"):
            written.append(path)
    return written


if __name__ == "__main__":
    sys.exit(main())
