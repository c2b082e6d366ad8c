"""Speed benchmark: vitpe's ViT with every 2D PE against timm's VisionTransformer, the data pipeline, the text model.

    python -m vitpe.bench --out DIR [--quick] [--preset recipe] [--device cpu|cuda] [--compile] [--threads 1]

Each figure is the median over ``--repeats`` rounds (default 9) of ``--steps`` steps, timed interleaved
(:mod:`vitpe.bench.runner`), and each speed ratio the median of the ratios within rounds, with a bootstrap interval
over the rounds (:mod:`vitpe.bench.stats`) printed next to every target (:mod:`vitpe.bench.targets`). A second
``none`` model runs in the same rounds as a check: its interval should hold 1. Writes ``DIR/bench.json`` and
``DIR/bench.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

import vitpe.pe
from vitpe.atomic_files import write_text_atomic
from vitpe.bench.config import PRESETS, QUICK, BenchConfig
from vitpe.bench.report import markdown
from vitpe.bench.suites import bench_data, bench_text, bench_vit, graphs_per_function
from vitpe.engine.compiled import compile_limits
from vitpe.machine import checked_device, machine
from vitpe.bench.targets import check_targets
from vitpe.cli.arg_types import positive_float, positive_int, positive_int_list
from vitpe.cli.exits import add_debug_flag, run_cli
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.engine.precision import PRECISIONS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder for bench.json and bench.md")
    parser.add_argument("--quick", action="store_true", help="a tiny model and few rounds: about a minute on 2 cores")
    parser.add_argument("--preset", choices=tuple(PRESETS), default="default",
                        help="model shape: the default dims (dim 192, 3 heads, MLP ratio 4, class token) or the CPU "
                             "recipe's (dim 128, 4 heads, MLP ratio 2, mean pooling); the flags below override it")
    parser.add_argument("--threads", type=positive_int,
                        help="CPU threads for the timed steps (default: torch's; 1 with taskset pinning is the "
                             "steadiest on a shared machine)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--pes", help="2D PEs to time, comma-separated (default: every registered 2D PE)")
    parser.add_argument("--sizes", type=positive_int_list,
                        help=f"image sizes, comma-separated, each a multiple of the patch size "
                             f"{BenchConfig.patch_size} (default 32,64)")
    for name in ("dim", "depth", "heads", "batch", "repeats", "steps"):
        parser.add_argument(f"--{name}", type=positive_int)
    parser.add_argument("--mlp-ratio", type=positive_float)
    parser.add_argument("--compile", action="store_true", help="torch.compile every model")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help="auto: bf16 autocast on CUDA, float32 on CPU; bf16 on either; fp32 (timm and vitpe alike)")
    parser.add_argument("--pool", choices=("cls", "mean"),
                        help="class token (default) or average pooling without one, the LayerNorm after the pool "
                             "(configs/cifar10.yaml's head; timm's global_pool='avg'), for vitpe and timm alike")
    parser.add_argument("--no-text", action="store_true")
    parser.add_argument("--no-data", action="store_true")
    parser.add_argument("--data-root", help="CIFAR-10 for the data-pipeline figure (default $VITPE_DATA; else synthetic)")
    add_debug_flag(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_cli(lambda: run(args), debug=args.debug,
                   interrupted=f"nothing was written to {args.out} (a benchmark's figures come from one whole run "
                               f"of interleaved rounds); run it again", go_on="run the benchmark again")


def checked_output_folder(out: Path) -> Path:
    """``out``, created and proved writable before any timing: a benchmark that cannot write its results fails in
    its first second, not after its last round."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise ValueError(f"--out {out}: cannot write there ({err.strerror or err}); choose another folder") from None
    return out


def run(args: argparse.Namespace) -> None:
    """The benchmark of ``args``: check every argument, time, then write ``bench.json`` and ``bench.md`` whole."""
    import timm

    cfg = BenchConfig(**{**PRESETS[args.preset], **(QUICK if args.quick else {})})
    for name in ("dim", "depth", "heads", "batch", "repeats", "steps", "mlp_ratio", "pool"):
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    if args.sizes:
        cfg.img_sizes = args.sizes
    for size in cfg.img_sizes:
        if size % cfg.patch_size:
            raise ValueError(f"--sizes: {size} px is not a multiple of the patch size {cfg.patch_size} (e.g. "
                             f"{size // cfg.patch_size * cfg.patch_size or cfg.patch_size})")
    pes = args.pes.split(",") if args.pes else [n for n in vitpe.pe.available() if 2 in vitpe.pe.get(n).grid_dims]
    for pe in pes:
        if 2 not in vitpe.pe.get(pe).grid_dims:  # get: an unknown name is a clear error of its own
            raise ValueError(f"--pes: {pe} works on 1D sequences only; the benchmark times 2D PEs on images (the "
                             f"text classifier's 1D PEs are timed unless --no-text)")
    if "none" not in pes:
        pes = ["none", *pes]
    cfg.device, cfg.compile, cfg.precision = args.device, args.compile, args.precision
    device = checked_device(args.device)
    if cfg.dim % cfg.heads:
        raise ValueError(f"--dim {cfg.dim} is not divisible by --heads {cfg.heads}")
    out = checked_output_folder(Path(args.out))
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    malloc_tuned = keep_freed_memory(device)  # as train.py and eval.py do

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    torch.manual_seed(0)
    result: dict[str, Any] = {"machine": {**machine(), "cpu_malloc_tuned": malloc_tuned}, "torch": torch.__version__,
                              "timm": timm.__version__,
                              "config": {**asdict(cfg), "img_sizes": list(cfg.img_sizes)}}
    graphs = 2 * graphs_per_function(cfg, pes, text=not args.no_text)  # twice: room for dynamic-shape retries
    with compile_limits(graphs) if cfg.compile else contextlib.nullcontext():
        result["rows"] = bench_vit(cfg, pes, device, log)
        if not args.no_data:
            result["data"] = bench_data(cfg, device, args.data_root or os.environ.get("VITPE_DATA"), log)
            result["data_share"] = result["data"]["real_epoch_data_share"]
        if not args.no_text:
            result["text_rows"] = bench_text(cfg, device, log)
    result["targets"] = check_targets(result)
    write_text_atomic(json.dumps(result, indent=1) + "\n", out / "bench.json")
    write_text_atomic(markdown(result), out / "bench.md")
    print(markdown(result))
