"""``train.compile``: the training forward through ``torch.compile``, one static graph per training size.

A PE keeps what depends only on the grid (relative indices, a fixed table) in a cache that its first forward at a
grid fills (:meth:`vitpe.pe.base.PositionEncoding.cached`). Compiled, that first call mutates a dict the graph's
guards read, so the next call recompiles the whole forward: two compilations per size, and a progressive schedule of
five sizes then passes dynamo's recompile limit (8) and finishes in eager mode. Shapes marked dynamic after the
second size are worse: the PEs' grid arithmetic (sorting, cache keys) sees symbolic sizes and breaks the graph.

So the caches are filled first, by one eager forward of a single blank image per training size (evaluation mode, no
gradient, under the training's autocast, whose dtype is part of a cached bias's key: BatchNorm statistics,
dropout and the random generators are untouched), and the model is compiled with
static shapes and a recompile limit that holds every size: one compilation per size, each graph whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch._dynamo

from vitpe.engine.precision import autocast


def fill_grid_caches(model: torch.nn.Module, sizes: Sequence[tuple[int, int]], in_chans: int = 3,
                     precision: str = "auto") -> None:
    """One forward of a blank (1, in_chans, h, w) image per size, in evaluation mode without gradient and under the
    autocast of ``precision`` (:mod:`vitpe.engine.precision`), so the PE's grid caches hold every training grid; the
    model's mode is restored."""
    was_training = model.training
    parameter = next(model.parameters())
    model.eval()
    try:
        with torch.no_grad(), autocast(parameter.device, precision):
            for h, w in sizes:
                model(torch.zeros(1, in_chans, h, w, device=parameter.device))
    finally:
        model.train(was_training)


def compile_for_sizes(model: torch.nn.Module, sizes: Sequence[tuple[int, int]], in_chans: int = 3,
                      precision: str = "auto") -> torch.nn.Module:
    """``torch.compile(model)`` for training at ``sizes`` (h, w) under ``precision``: grid caches filled first, one
    static graph per size. The compiled module shares ``model``'s parameters; save and evaluate ``model`` itself."""
    sizes = list(dict.fromkeys(tuple(size) for size in sizes))
    fill_grid_caches(model, sizes, in_chans, precision)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, len(sizes))
    return torch.compile(model, dynamic=False)
