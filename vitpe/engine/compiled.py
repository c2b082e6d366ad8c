"""``train.compile``: the training forward through ``torch.compile``, one static graph per training size, and
dynamo's graph limit set so that no graph silently runs eagerly (also used by the benchmarks).

A PE keeps what depends only on the grid (relative indices, a fixed table, a bias cast to the autocast dtype) in a
cache that an eager forward at a grid fills (:meth:`vitpe.pe.base.PositionEncoding.cached`). While dynamo traces, a
missing entry is built into the graph and not stored: stored, it changed a dict the graph's guards read, and the next
call compiled the whole forward again -- two compilations per size, and a progressive schedule of five sizes passed
dynamo's default limit of 8 graphs and finished eagerly, with one warning. A graph traced with an entry missing still
guards on its absence, so the eager evaluation between epochs, which stores it, would send every size it evaluates
through one more compilation. Shapes marked dynamic (dynamo's default after the second size) are worse: the PEs' grid
arithmetic (sorting, cache keys) sees symbolic sizes and breaks the graph.

So :class:`SizeCompiled` fills the caches first, by one eager forward of a single blank input per training shape
(evaluation mode, no gradient, under the training's autocast, whose dtype is part of a cached bias's key: BatchNorm
statistics, dropout and the random generators are untouched), then compiles with static shapes: one compilation per
shape, each graph whole, the tables its constants. Text batches vary in length: compiled, they are padded to a multiple
of :data:`vitpe.data.text_loader.COMPILED_WIDTH_MULTIPLE` tokens, one graph per width, where their lengths would ask
for one graph per length (SST-2: 52), past dynamo's limit. The fill is about the guards, not speed: a compiled step of a
dim-192, depth-6 ViT at 32 px with the tables built into the graph took 0.993-1.006x the time of one with them as
constants (sincos, rope_axial, relbias, alibi; one thread, interleaved).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from vitpe.engine.precision import autocast


def compile_limits(graphs: int) -> contextlib.AbstractContextManager:
    """Dynamo's settings for compiled calls that need ``graphs`` graphs of one function.

    Every vitpe model is the same function to dynamo. Past its default limit of 8 graphs per function, dynamo runs the
    rest eagerly and only warns once -- the compiled benchmarks made before this limit was raised timed some vitpe
    variants eager. The limit is raised to fit, and reaching it is an error instead of a silent fallback."""
    import torch._dynamo.config as dynamo_config

    settings: dict[str, Any] = {"cache_size_limit": max(dynamo_config.cache_size_limit, graphs)}
    if hasattr(dynamo_config, "fail_on_recompile_limit_hit"):  # torch >= 2.6
        settings["fail_on_recompile_limit_hit"] = True
    return dynamo_config.patch(**settings)


def missing_compiler(device: torch.device) -> str | None:
    """Why ``torch.compile`` (inductor) cannot compile for ``device`` here, or None: on the CPU it builds C++ and needs
    a compiler (``$CXX``, else ``g++``), which a slim container may lack."""
    if device.type != "cpu":
        return None
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except Exception as err:  # inductor's InvalidCxxCompiler, or the search's own failure
        return (f"train.compile=true on the CPU needs a C++ compiler, and none was found ({type(err).__name__}): "
                f"install g++ (or set CXX), or train without train.compile")
    return None


def blank_images(sizes: Sequence[tuple[int, int]], in_chans: int = 3) -> list[tuple[torch.Tensor]]:
    """One blank (1, in_chans, h, w) image per size: the example inputs of :class:`SizeCompiled` for a ViT."""
    return [(torch.zeros(1, in_chans, h, w),) for h, w in dict.fromkeys(tuple(size) for size in sizes)]


def blank_sequences(lengths: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One blank (1, L) token sequence with a (1, L) padding mask per length (its last token padding, so the forward
    takes the masked path of a training batch): the example inputs of :class:`SizeCompiled` for a text model."""
    examples = []
    for length in dict.fromkeys(lengths):
        mask = torch.ones(1, length, dtype=torch.bool)  # (1, L)
        mask[0, -1] = length == 1  # the last token padding, unless it is the only one
        examples.append((torch.zeros(1, length, dtype=torch.long), mask))
    return examples


def fill_grid_caches(model: nn.Module, examples: Sequence[tuple[torch.Tensor, ...]], precision: str = "auto") -> None:
    """One forward of each example input (:func:`blank_images`, :func:`blank_sequences`), in evaluation mode without
    gradient and under the autocast of ``precision`` (:mod:`vitpe.engine.precision`), so the PE's grid caches hold
    every training grid; the model's mode is restored."""
    was_training = model.training
    device = next(model.parameters()).device
    model.eval()
    try:
        with torch.no_grad(), autocast(device, precision):
            for inputs in examples:
                model(*(x.to(device) for x in inputs))
    finally:
        model.train(was_training)


class SizeCompiled(nn.Module):
    """``model`` compiled for training on inputs shaped as ``examples`` (one per training size or sequence width:
    :func:`blank_images`, :func:`blank_sequences`) under ``precision``: grid caches filled first, one static graph
    per shape, and no eager fallback (room for one unforeseen recompilation per shape; past it, dynamo's error). It
    shares ``model``'s parameters: save and evaluate ``model`` itself. ``backend``: torch.compile's; ``mode``:
    inductor's (``reduce-overhead`` records each shape's forward and backward as CUDA graphs and replays them, so a
    step no longer waits on the host launching every kernel; each training call then starts a new graph step)."""

    def __init__(self, model: nn.Module, examples: Sequence[tuple[torch.Tensor, ...]], precision: str = "auto",
                 backend: str | Any = "inductor", mode: str = "default") -> None:
        super().__init__()
        fill_grid_caches(model, examples, precision)
        self.graphs = 2 * len(examples)
        self.new_graph_step = mode == "reduce-overhead"
        options = {"mode": mode} if backend == "inductor" and mode != "default" else {}
        self.compiled = torch.compile(model, dynamic=False, backend=backend, **options)

    def forward(self, *inputs: Any) -> torch.Tensor:
        if self.new_graph_step and self.training:
            # the last step's graph outputs (logits, loss) are done with: its buffers may be reused by this replay
            torch.compiler.cudagraph_mark_step_begin()
        with compile_limits(self.graphs):
            return self.compiled(*inputs)
