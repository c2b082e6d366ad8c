"""Where one training step of a PE's ViT spends its time: ``torch.profiler`` over a few steps, eager or compiled, on
the CPU or a GPU, as the benchmark runs them (bf16 autocast on CUDA; :func:`vitpe.bench.runner.train_step_fn`).
Prints the wall time per step, on a GPU also the time its kernels kept the GPU busy (far less than the wall time:
the step is launch-bound, and the host's operators are where a PE's cost lies), then the profile table. From the
repository root:

    OMP_NUM_THREADS=1 taskset -c 1 python benchmarks/profile_step.py rope_mixed --compile  # per inductor kernel
    python benchmarks/profile_step.py rope_axial --device cuda                             # eager on a GPU
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere: benchmarks.ab importable

from benchmarks.ab import DIMS  # noqa: E402
from vitpe.bench.runner import train_step_fn  # noqa: E402
from vitpe.models import ViT  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pe")
    parser.add_argument("--dims", choices=sorted(DIMS), default="recipe")
    parser.add_argument("--px", type=int, default=32)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (after as many to warm up)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (on the CPU, time per kernel)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rows", type=int, default=40, help="rows of the profile table")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.exit(2, "error: --device cuda, but torch sees no CUDA GPU here\n")
    if args.compile and device.type == "cpu":
        inductor_config.cpp.enable_kernel_profile = True  # each inductor C++ kernel as a row of its own
    torch.manual_seed(0)
    model = ViT(img_size=args.px, patch_size=4, num_classes=10, pe=args.pe, **DIMS[args.dims]).to(device)
    images = torch.randn(args.batch, 3, args.px, args.px, device=device)
    labels = torch.randint(0, 10, (args.batch,), device=device)
    step = train_step_fn(torch.compile(model) if args.compile else model, (images,), labels, device)

    def steps() -> float:
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return (time.perf_counter() - start) / args.steps

    steps()  # compile and warm up
    print(f"{args.pe} ({args.dims} dims, {args.px} px, batch {args.batch}, "
          f"{'compiled' if args.compile else 'eager'}, {device.type}): {steps() * 1e3:.1f} ms per training step")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        steps()
    events = prof.key_averages()
    if device.type == "cuda":
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]  # the kernels' own rows, as the table sums
        busy = sum(e.self_device_time_total for e in kernels) / args.steps / 1e3  # microseconds -> ms per step
        print(f"GPU busy {busy:.1f} ms per step (the sum of its kernels' times)")
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=args.rows, max_name_column_width=90))
    return 0


if __name__ == "__main__":
    sys.exit(main())
