"""The precision a run computes in: ``train.precision``.

``auto`` is bf16 autocast on CUDA and float32 on CPU (the default: CPU runs stay comparable with every run before the
option). ``bf16`` is bf16 autocast on either device: on a CPU with bf16 instructions (AVX512-BF16, AMX) a small ViT's
training step is cheaper than in float32 (docs/training.md gives by how much), and CPU runs stay reproducible (same
config, seed and threads: same numbers). ``fp32`` turns autocast off everywhere. Weights, optimiser state and the
loss stay float32; the PE sites compute RoPE's angles and attention biases in float32 (:mod:`vitpe.pe.sites`; a bias
is then cast once to the attention's dtype), and on the CPU attention through SDPA runs in float32
(:mod:`vitpe.models.attention`: its CPU kernel is slower in bf16). ``fast`` is bf16 where the machine computes it
natively -- a CUDA GPU, or a CPU whose flags name bf16 instructions -- and float32 elsewhere (where autocast would
emulate bf16 at many times the float32 time); train.py resolves it when a run starts and saves the resolved value in
the run's config, so a resumed or evaluated run computes as it trained.
"""

from __future__ import annotations

import torch

from vitpe.machine import cpu_flags

PRECISIONS = ("auto", "bf16", "fp32", "fast")
#: The CPU flags of bf16 instructions: AVX512-BF16 and AMX on x86, the BF16 extension on Arm.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
NO_BF16_FLAGS = "no avx512_bf16, amx_bf16 or bf16 among its flags"  # what the notes below say of such a CPU


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively: a CUDA GPU, or a CPU whose flags name bf16 instructions."""
    return device.type == "cuda" or bool(cpu_flags() & BF16_CPU_FLAGS)


def resolve_precision(device: torch.device, precision: str) -> str:
    """``precision`` with ``fast`` made concrete for ``device``: ``bf16`` where it is native, else ``fp32``."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: one of {', '.join(PRECISIONS)}")
    if precision != "fast":
        return precision
    return "bf16" if native_bf16(device) else "fp32"


def uses_bf16(device: torch.device, precision: str = "auto") -> bool:
    """Whether ``precision`` runs bf16 autocast on ``device``."""
    precision = resolve_precision(device, precision)
    return precision == "bf16" or (precision == "auto" and device.type == "cuda")


def autocast(device: torch.device, precision: str = "auto") -> torch.autocast:
    """The autocast context ``precision`` asks for on ``device`` (a disabled one for float32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=uses_bf16(device, precision))


def emulated_bf16_note(device: torch.device, precision: str) -> str | None:
    """A note for a run that asks for bf16 autocast on a CPU whose flags name no bf16 instructions (there autocast
    emulates them, which can cost more than it saves); None elsewhere, and where the flags cannot be read."""
    if device.type != "cpu" or not uses_bf16(device, precision):
        return None
    flags = cpu_flags()
    if not flags or flags & BF16_CPU_FLAGS:
        return None
    return (f"note: train.precision=bf16 on a CPU without bf16 instructions ({NO_BF16_FLAGS}): autocast emulates "
            "them, at many times the float32 time of a step; train with train.precision=fp32 (for the CPU recipe add "
            "train.epochs=17, its float32 budget)")


def fast_in_float32_note(device: torch.device, precision: str) -> str | None:
    """A note for a run that asks for ``fast`` on a CPU where it resolves to float32; None elsewhere."""
    if precision != "fast" or resolve_precision(device, precision) != "fp32":
        return None
    return (f"note: train.precision=fast trains in float32 here: this CPU has no bf16 instructions ({NO_BF16_FLAGS}), "
            "where bf16 autocast would be emulated")
