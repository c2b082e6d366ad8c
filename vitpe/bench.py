"""Speed benchmark: vitpe's ViT with every 2D PE against timm's VisionTransformer, the data pipeline, the text model.

    python -m vitpe.bench --out DIR [--quick] [--device cpu|cuda] [--dim 192 --depth 6 --heads 3 --batch 128]

All variants of one measurement live in one process and are timed interleaved (A B C ... C A B ..., in a fresh seeded
order each round), so machine noise hits them alike; each figure is the median over ``--repeats`` rounds (default 9)
of ``--steps`` steps, and each speed ratio the median of the ratios within rounds, with a bootstrap interval over
the rounds (:mod:`vitpe.bench_stats`) printed next to every target. A second ``none`` model runs in the same rounds as
a check: its interval should hold 1. A training step is forward, cross-entropy, backward and an AdamW step on a fixed
random batch; inference is a forward under ``torch.inference_mode``. On CUDA, steps run under bf16 autocast and are
synchronised before the clock is read. Writes ``DIR/bench.json`` and ``DIR/bench.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

import vitpe.pe
from vitpe.atomic_files import write_text_atomic
from vitpe.bench_kernels import kernels_per_step
from vitpe.bench_stats import CONFIDENCE, paired_speed_ratio
from vitpe.bench_targets import NOISE_REFERENCE, check_targets, summary, targets_markdown
from vitpe.engine.arg_types import positive_float, positive_int, positive_int_list
from vitpe.engine.cli import add_debug_flag, run_cli
from vitpe.engine.cpu_malloc import keep_freed_memory
from vitpe.models import TextClassifier, ViT


@dataclass
class BenchConfig:
    dim: int = 192
    depth: int = 6
    heads: int = 3
    mlp_ratio: float = 4.0
    patch_size: int = 4
    batch: int = 128
    img_sizes: tuple[int, ...] = (32, 64)
    repeats: int = 9
    steps: int = 1
    warmup: int = 2
    text_len: int = 64
    text_batch: int = 64
    device: str = "cpu"
    compile: bool = False
    pool: str = "cls"  # "cls": class token (timm's default); "mean": average pooling without one (the recipe's head)


QUICK = dict(dim=64, depth=2, heads=2, batch=16, img_sizes=(32,), repeats=3, steps=1, warmup=1, text_len=32,
             text_batch=16)
#: Named model shapes (``--preset``): the benchmark's default dims, and the CPU recipe's model
#: (``configs/cifar10.yaml``: head dim 32, mean pooling), where attention is a larger share of a step. The speed
#: targets hold at both.
PRESETS = {"default": {}, "recipe": dict(dim=128, heads=4, mlp_ratio=2.0, pool="mean")}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def train_step_fn(model: torch.nn.Module, inputs: tuple, labels: torch.Tensor, device: torch.device) -> Callable:
    """One forward + backward + AdamW step on a fixed batch."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()

    def step() -> None:
        with _autocast(device):
            loss = F.cross_entropy(model(*inputs).float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def infer_step_fn(model: torch.nn.Module, inputs: tuple, device: torch.device,
                  no_grad: Callable[[], contextlib.AbstractContextManager] = torch.inference_mode) -> Callable:
    """One forward without autograd (``no_grad``: ``torch.no_grad`` to count its kernels, :mod:`vitpe.bench_kernels`)."""
    def step() -> None:
        model.eval()
        with no_grad(), _autocast(device):
            model(*inputs)

    return step


def interleaved(fns: dict[str, Callable], cfg: BenchConfig, device: torch.device) -> dict[str, float]:
    """Median seconds per step of each function, timed in interleaved rounds after a warmup."""
    return {name: statistics.median(values) for name, values in interleaved_rounds(fns, cfg, device).items()}


def interleaved_rounds(fns: dict[str, Callable], cfg: BenchConfig, device: torch.device) -> dict[str, list[float]]:
    """Seconds per step of each function in every round (``cfg.repeats`` rounds of ``cfg.steps`` steps, a fresh
    seeded order each round, after ``cfg.warmup`` steps each)."""
    for fn in fns.values():
        for _ in range(cfg.warmup):
            fn()
    _sync(device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    shuffle = random.Random(0).shuffle
    for _ in range(cfg.repeats):
        shuffle(order)  # a fresh order each round: no variant always runs right after the same (heavier) one
        for name in order:
            fn = fns[name]
            _sync(device)
            start = time.perf_counter()
            for _ in range(cfg.steps):
                fn()
            _sync(device)
            times[name].append((time.perf_counter() - start) / cfg.steps)
    return times


def timm_vit(cfg: BenchConfig, img_size: int, num_classes: int = 10) -> torch.nn.Module:
    """timm's VisionTransformer with the same dimensions and head (learned PE, pre-norm, GELU MLP; class token, or
    average pooling without one, with its LayerNorm after the pool)."""
    from timm.models.vision_transformer import VisionTransformer

    mean = cfg.pool == "mean"
    return VisionTransformer(img_size=img_size, patch_size=cfg.patch_size, num_classes=num_classes,
                             embed_dim=cfg.dim, depth=cfg.depth, num_heads=cfg.heads, mlp_ratio=cfg.mlp_ratio,
                             class_token=not mean, global_pool="avg" if mean else "token")


def graphs_per_function(cfg: BenchConfig, pes: list[str], text: bool) -> int:
    """The most graphs a compiled run needs of one function: ``ViT.forward`` once per PE (the second ``none``
    included), mode (training, inference) and image size; ``TextClassifier.forward`` once per 1D PE."""
    vit = 2 * (len(pes) + 1) * len(cfg.img_sizes)
    return max(vit, len(text_pes()) if text else 0)


def compile_limits(graphs: int) -> contextlib.AbstractContextManager:
    """Dynamo's settings for a compiled benchmark that needs ``graphs`` graphs of one function
    (:func:`graphs_per_function`).

    Every vitpe model is the same function to dynamo. Past its default limit of 8 graphs per function, dynamo runs the
    rest eagerly and only warns once -- the compiled runs made before this limit was raised timed some vitpe variants
    eager. The limit is raised to fit, and reaching it is an error instead of a silent fallback."""
    import torch._dynamo.config as dynamo_config

    settings: dict[str, Any] = {"cache_size_limit": max(dynamo_config.cache_size_limit, graphs)}
    if hasattr(dynamo_config, "fail_on_recompile_limit_hit"):  # torch >= 2.6
        settings["fail_on_recompile_limit_hit"] = True
    return dynamo_config.patch(**settings)


def _prepare(model: torch.nn.Module, cfg: BenchConfig, device: torch.device) -> torch.nn.Module:
    model = model.to(device)
    return torch.compile(model) if cfg.compile else model


def bench_vit(cfg: BenchConfig, pes: list[str], device: torch.device, log: Callable[[str], None]) -> list[dict]:
    """Train and inference throughput of timm and of vitpe with each PE, per image size."""
    rows = []
    for size in cfg.img_sizes:
        g = torch.Generator().manual_seed(0)
        images = torch.randn(cfg.batch, 3, size, size, generator=g).to(device)
        labels = torch.randint(0, 10, (cfg.batch,), generator=g).to(device)
        models = {"timm": timm_vit(cfg, size)}
        for name in (*pes, NOISE_REFERENCE):
            models[name] = ViT(img_size=size, patch_size=cfg.patch_size, num_classes=10, dim=cfg.dim,
                               depth=cfg.depth, heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, pool=cfg.pool,
                               fc_norm=cfg.pool == "mean", pe="none" if name == NOISE_REFERENCE else name)
        models = {name: _prepare(m, cfg, device) for name, m in models.items()}
        log(f"{size} px: training steps ({len(models)} variants interleaved)")
        train_fns = {n: train_step_fn(m, (images,), labels, device) for n, m in models.items()}
        rounds = {"train": interleaved_rounds(train_fns, cfg, device)}
        log(f"{size} px: inference")
        rounds["infer"] = interleaved_rounds({n: infer_step_fn(m, (images,), device) for n, m in models.items()},
                                             cfg, device)
        kernels = {}  # one more untimed step each; a compiled step's kernels are inductor's, not aten operations
        if not cfg.compile:
            kernels = {n: (kernels_per_step(train_fns[n]),
                           kernels_per_step(infer_step_fn(m, (images,), device, torch.no_grad)))
                       for n, m in models.items()}
        for name in models:
            row: dict[str, Any] = {"pe": name, "img_size": size}
            if kernels:
                row["train_kernels"], row["infer_kernels"] = kernels[name]
            for kind, times in rounds.items():
                row[f"{kind}_img_s"] = cfg.batch / statistics.median(times[name])
                row[f"{kind}_s"] = times[name]  # seconds per step, round by round
                for ref in ("timm", "none"):
                    ratio, low, high = paired_speed_ratio(times[name], times[ref])
                    row[f"{kind}_vs_{ref}"], row[f"{kind}_vs_{ref}_ci"] = ratio, [low, high]
            rows.append(row)
    return rows


def text_pes() -> list[str]:
    """The 1D PEs the text benchmark times."""
    return [n for n in vitpe.pe.available() if 1 in vitpe.pe.get(n).grid_dims]


def bench_text(cfg: BenchConfig, device: torch.device, log: Callable[[str], None]) -> list[dict]:
    """Training throughput (tokens/s) of the text classifier with each 1D PE, interleaved."""
    pes = text_pes()
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(3, 1000, (cfg.text_batch, cfg.text_len), generator=g).to(device)
    mask = torch.ones_like(tokens, dtype=torch.bool)
    labels = torch.randint(0, 2, (cfg.text_batch,), generator=g).to(device)
    fns = {}
    for pe in pes:
        model = _prepare(TextClassifier(1000, 2, max_len=cfg.text_len, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads,
                                        mlp_ratio=cfg.mlp_ratio, pe=pe), cfg, device)
        fns[pe] = train_step_fn(model, (tokens, mask), labels, device)
    log(f"text: training steps ({len(fns)} PEs interleaved)")
    seconds = interleaved(fns, cfg, device)
    tokens_per_step = cfg.text_batch * cfg.text_len
    return [{"pe": pe, "seq_len": cfg.text_len, "train_tokens_s": tokens_per_step / s,
             "train_vs_none": seconds["none"] / s} for pe, s in seconds.items()]


def bench_data(cfg: BenchConfig, device: torch.device, data_root: str | None, log: Callable[[str], None]
               ) -> dict[str, Any]:
    """The augmenting loader alone vs the model step alone at 32 px, and a short real epoch with both."""
    from vitpe.data import BatchLoader, DataError, channel_stats, load_cifar, synthetic_images
    from vitpe.engine.loop import TrainState, train_one_epoch
    from vitpe.engine.distributed import DistInfo

    source = "cifar10"
    try:
        if data_root is None:
            raise DataError("no data root")
        data = load_cifar(data_root, "cifar10", "train")
    except DataError:
        source, data = "synthetic", synthetic_images(max(cfg.batch * 20, 2048), 32)
    steps = max(cfg.repeats * cfg.steps, 3)
    data = data.limit(cfg.batch * (steps + cfg.warmup))
    mean, std = channel_stats(data.images)
    loader = BatchLoader(data, cfg.batch, train=True, mean=mean, std=std, seed=0, device=device)
    model = ViT(img_size=32, patch_size=cfg.patch_size, num_classes=len(data.classes), dim=cfg.dim, depth=cfg.depth,
                heads=cfg.heads, mlp_ratio=cfg.mlp_ratio, pe="learnable").to(device)
    batches = iter(loader.epoch(0))
    images, labels = next(batches)
    log("data pipeline vs model step")
    seconds = interleaved({"data": lambda: loader.batch(torch.arange(cfg.batch), 0, 0),
                           "model": train_step_fn(model, (images,), labels, device)}, cfg, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    class _NoSchedule:
        def step_update(self, step: int) -> None:
            pass

    start = time.perf_counter()
    train_one_epoch(model, loader, optimizer, _NoSchedule(), TrainState(), seed=0, label_smoothing=0.0,
                    grad_clip=1.0, mixup=None, ema=None, dist_info=DistInfo(), device=device, progress=False)
    _sync(device)
    epoch_s = time.perf_counter() - start
    return {"source": source, "batch": cfg.batch, "data_s_per_batch": seconds["data"],
            "model_s_per_step": seconds["model"], "data_share": seconds["data"] / (seconds["data"] + seconds["model"]),
            "real_epoch_steps": len(loader), "real_epoch_s": epoch_s,
            "real_epoch_data_share": len(loader) * seconds["data"] / epoch_s}


def cpu_model() -> dict[str, str]:
    """The CPU's model name and cache sizes, where Linux tells them (``/proc/cpuinfo``, sysfs): the same benchmark
    differed by 3x in a learned bias's overhead between two VMs of this project, so a result says what ran it."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            level, kind = (index / "level").read_text().strip(), (index / "type").read_text().strip()
            if kind in ("Unified", "Data"):
                info[f"l{level}_cache"] = (index / "size").read_text().strip()
    except OSError:
        pass  # not Linux, or a restricted /proc: the result just says less
    return info


def machine() -> dict[str, Any]:
    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(), "cpu_threads": torch.get_num_threads(), **cpu_model()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _cpu_line(info: dict[str, Any]) -> str:
    caches = ", ".join(f"{key[:2].upper()} {info[key]}" for key in ("l2_cache", "l3_cache") if key in info)
    return f"{info.get('cpu_model', info['processor'])}{f' ({caches})' if caches else ''}"


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    counted = all("train_kernels" in r for r in result["rows"])
    lines = ["# vitpe benchmark", "",
             f"{_cpu_line(result['machine'])}, {result['machine']['cpu_threads']} threads"
             f"{', ' + result['machine']['gpu'] if 'gpu' in result['machine'] else ''}; torch {result['torch']}, "
             f"timm {result['timm']}; device {cfg['device']}; ViT dim {cfg['dim']}, depth {cfg['depth']}, "
             f"heads {cfg['heads']}, MLP ratio {cfg['mlp_ratio']}, patch {cfg['patch_size']}, batch {cfg['batch']}, "
             f"{'average pooling' if cfg.get('pool') == 'mean' else 'class token'}"
             f"{', compiled' if cfg.get('compile') else ''}; "
             f"median of {cfg['repeats']} interleaved rounds of {cfg['steps']} steps; ratios paired within "
             f"rounds, {100 * CONFIDENCE:.0f}% bootstrap intervals in the targets.", "",
             "| PE | px | train img/s | vs timm | vs none | infer img/s | vs timm | vs none |"
             + (" kernels/step: train | infer |" if counted else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if counted else "")]
    for r in result["rows"]:
        lines.append(f"| {r['pe']} | {r['img_size']} | {r['train_img_s']:.1f} | {r.get('train_vs_timm', 1):.3f} | "
                     f"{r.get('train_vs_none', float('nan')):.3f} | {r['infer_img_s']:.1f} | "
                     f"{r.get('infer_vs_timm', 1):.3f} | {r.get('infer_vs_none', float('nan')):.3f} |"
                     + (f" {r['train_kernels']} | {r['infer_kernels']} |" if counted else ""))
    if counted:
        lines += ["", "Kernels per step: the aten operations that reach a kernel, and vitpe's Triton kernels "
                      "(vitpe.bench_kernels); on a GPU, where these small steps are launch-bound, a PE costs about "
                      "what it adds here."]
    d = result.get("data")
    if d:
        lines += ["", f"Data pipeline ({d['source']}, batch {d['batch']}): {1000 * d['data_s_per_batch']:.1f} ms per "
                      f"augmented batch vs {1000 * d['model_s_per_step']:.0f} ms per training step: "
                      f"{100 * d['data_share']:.1f}% of a step; in a real run of {d['real_epoch_steps']} steps "
                      f"({d['real_epoch_s']:.1f} s) {100 * d['real_epoch_data_share']:.1f}%."]
    if result.get("targets"):
        lines += ["", "Targets (training step; overhead = t_pe / t_none - 1):", "",
                  *targets_markdown(result["targets"]), "", summary(result["targets"])]
    if result.get("text_rows"):
        lines += ["", f"Text classifier, training, sequences of {result['text_rows'][0]['seq_len']} tokens:", "",
                  "| PE | tokens/s | vs none |", "|---|---|---|"]
        lines += [f"| {r['pe']} | {r['train_tokens_s']:.0f} | {r['train_vs_none']:.3f} |" for r in result["text_rows"]]
    return "\n".join(lines) + "\n"


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
    cfg.device, cfg.compile = args.device, args.compile
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda but no CUDA device is available")
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


if __name__ == "__main__":
    sys.exit(main())
