"""Kernels a step launches: what sets the pace where a step is launch-bound, as the benchmark's small ViTs are on a
GPU (a training step of 10-16 ms at batch 128 on an H200, where RoPE's overhead grew with the operations it added).

:func:`kernels_per_step` runs a step once under :class:`KernelCounter`, a ``TorchDispatchMode`` that sees every aten
operation on its way to a kernel -- after autograd, so the backward's operations too, and after autocast's casts --
and adds the Triton kernels vitpe's rotation launched (:data:`vitpe.pe.rotary_triton.launches`). Views, allocations
and metadata queries launch nothing and do not count; an operation that runs several kernels inside (a cuBLAS
product, an SDPA kernel) counts once. Count inference under ``torch.no_grad``, not ``inference_mode``: under the
latter, composite operations (``linear``, a no-op ``dropout``) reach the mode whole, before autocast.
"""

from __future__ import annotations

import collections
import sys
from typing import Callable

from torch.utils._python_dispatch import TorchDispatchMode

#: Operations that allocate or query without a kernel, and ``_unsafe_view``, a view aten does not mark as one
#: (views, ``func.is_view``, are left out already).
NOT_KERNELS = frozenset({
    "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "result_type", "promote_types",
    "_unsafe_view", "_local_scalar_dense", "is_same_size", "sym_size", "sym_stride", "_has_compatible_shallow_copy_type",
})


class KernelCounter(TorchDispatchMode):
    """Counts, by name, the aten operations that reach a kernel while it is active (``ops``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not func.is_view and name not in NOT_KERNELS:
            self.ops[name] += 1
        return func(*args, **(kwargs or {}))


def _triton_launches() -> int:
    kernels = sys.modules.get("vitpe.pe.rotary_triton")  # imported only where a CUDA rotation ran
    return kernels.launches if kernels is not None else 0


def kernels_per_step(step: Callable[[], None]) -> int:
    """Kernels one call of ``step`` launches: its aten operations that reach a kernel, plus vitpe's Triton kernels."""
    launched = _triton_launches()
    with KernelCounter() as counter:
        step()
    return sum(counter.ops.values()) + _triton_launches() - launched
