"""The position-encoding interface: one base class, three sites, three hooks.

Every PE acts at exactly one *site* of a Transformer:

========  =====================================================  ==========================================
site      hook (default: do nothing)                             shapes
========  =====================================================  ==========================================
tokens    ``add_to_tokens(x, state, layer) -> x``                x: (B, P + N, D), called before block ``layer``
qk        ``rotate(x, state, layer) -> x``                        x: (..., nH, P + N, Dh), applied to q and to k
logits    ``attention_bias(state, layer) -> (nH, P+N, P+N)``      added to the attention scores (a float mask)
========  =====================================================  ==========================================

``P`` is the number of prefix tokens (e.g. a class token), which no PE moves: they get no position, no rotation and a
zero bias. ``N`` is the number of grid tokens. A model calls ``state = pe.prepare(grid)`` once per forward -- the work
that depends only on the grid (tables, rotations, bias matrices) -- and hands ``state`` to every block's hooks. A PE
without parameters is a pure function of ``(grid, resize mode)``, so its state is cached per grid.

Attention calls the qk site through ``rotate_qkv(qkv, state, layer) -> (q, k, v)`` on its stacked projections
(3, B, nH, P + N, Dh): by default :meth:`~PositionEncoding.rotate` on q and on k, and a rotary PE overrides it with
one fused rotation of both (the same result, less memory traffic in the backward). A PE with ``widens_qk`` (PaPE)
returns q and k with more channels than v, which scaled dot-product attention accepts.

A batch whose images lie on different grids (native aspect, mixed resolution) has ``state = pe.prepare_mixed(layout)``
instead, whose own ``add_to_tokens`` / ``rotate_qkv`` / ``attention_bias`` take the padded batch: every PE has it,
through the hooks above applied to each grid's images (:mod:`vitpe.pe.mixed`).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, ClassVar, Iterator, TypedDict

import torch
from torch import nn

from vitpe.pe.coord_augment import CoordAugment
from vitpe.pe.grid import (BASIC_RESIZE_MODES, Grid, as_grid, check_resize_mode, grid_positions,
                           relative_offsets, unscalable)
from vitpe.pe.layout import unbind_in_memory_order
from vitpe.pe.mixed import GridLayout, MixedState

from vitpe.pe.bound import BoundEncoding

if sys.version_info >= (3, 11):  # Unpack[CommonArgs] types the PEs' **common (imported from here)
    from typing import Unpack  # noqa: F401
else:  # (torch depends on typing_extensions)
    from typing_extensions import Unpack  # noqa: F401

SITES = ("none", "tokens", "qk", "logits")
_CACHE_SIZE = 32


class _RequiredArgs(TypedDict):
    dim: int
    heads: int
    grid: int | tuple[int, ...]


class CommonArgs(_RequiredArgs, total=False):
    """The keyword arguments every PE takes (documented on :class:`PositionEncoding`): a PE's constructor passes them
    on as ``**common: Unpack[CommonArgs]`` (both importable from here), so that an editor and a type checker know
    them; ``help()`` and ``inspect.signature`` show them with each PE's own options
    (:func:`vitpe.pe.registry.full_signature`)."""

    depth: int | None
    num_prefix_tokens: int
    resize: str


class ResizeError(ValueError):
    """A PE cannot work at the requested grid in the requested resize mode (e.g. extrapolating a learned table)."""


class PositionEncoding(nn.Module):
    """Base class of every PE. Subclasses set ``site``, may restrict ``grid_dims`` and override the hooks.

    Args:
        dim: model width D (token-site PEs produce D channels).
        heads: number of attention heads nH (D must be divisible by nH; Dh = D / nH).
        depth: number of Transformer blocks; needed only by a PE that holds something per block (``layered``: its
            parameters, slopes or the block it acts at), and ignored by the others.
        grid: reference grid, ``(L,)`` for sequences or ``(gh, gw)`` for images; an int ``g`` is the square
            ``(g, g)`` for a PE that works on images (a 1D-only PE, ``t5bias``, reads it as ``(g,)``).
        num_prefix_tokens: P, tokens in front of the grid tokens that carry no position (class token, registers).
        resize: ``"interpolate"`` or ``"extrapolate"``, how to act at a grid other than the reference (see ``grid.py``).
    """

    site: ClassVar[str] = "none"
    grid_dims: ClassVar[tuple[int, ...]] = (1, 2)
    name: ClassVar[str] = ""
    #: The resize modes this PE has (``ntk`` and ``yarn`` only for PEs made of frequencies).
    resize_modes: ClassVar[tuple[str, ...]] = BASIC_RESIZE_MODES
    #: Coordinate augmentation in training (:mod:`vitpe.pe.coord_augment`), for PEs that read coordinates.
    augment: CoordAugment | None = None
    #: q,k site only: ``rotate_qkv`` returns q and k with channels added (their dot product then carries a bias, as
    #: PaPE's), v unchanged; ``rotate`` alone is then undefined, since q and k gain different channels.
    widens_qk: ClassVar[bool] = False
    #: The PE holds something per block (parameters, slopes, the block it acts at): it needs ``depth``, and its hooks
    #: check the layer index. The others act the same in every block.
    layered: ClassVar[bool] = False

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        depth: int | None = None,
        grid: int | tuple[int, ...],
        num_prefix_tokens: int = 0,
        resize: str = "interpolate",
    ) -> None:
        super().__init__()
        label = self.name or type(self).__name__
        if depth is None and self.layered:
            raise ValueError(f"{label} acts differently in each block (its own parameters, slopes or the block it "
                             f"acts at): give depth=<the number of blocks of the model it goes into>")
        if dim < 1 or heads < 1 or (depth is not None and depth < 1) or num_prefix_tokens < 0:
            raise ValueError(f"{label}: dim, heads, depth must be >= 1 and num_prefix_tokens >= 0")
        if dim % heads:
            raise ValueError(f"{label}: dim {dim} is not divisible by heads {heads}")
        self.grid = as_grid(grid, dims=2 if 2 in self.grid_dims else 1)
        if len(self.grid) not in self.grid_dims:
            kinds = " or ".join(f"{d}D" for d in self.grid_dims)
            raise ValueError(f"{label} works on {kinds} grids only; got the {len(self.grid)}D grid {self.grid}")
        self.dim, self.heads, self.depth = dim, heads, depth
        self.head_dim = dim // heads
        self.num_prefix_tokens = num_prefix_tokens
        self._resize = self._supported(check_resize_mode(resize))
        # Persistent so that a state dict records the grid its tables were learned on (used when loading elsewhere).
        self.register_buffer("reference_grid", torch.tensor(self.grid, dtype=torch.long), persistent=True)
        self._cache: dict[Any, Any] = {}

    # ----------------------------------------------------------------------------------------------- configuration
    @property
    def resize(self) -> str:
        return self._resize

    @resize.setter
    def resize(self, mode: str) -> None:
        self._set_resize(self._supported(check_resize_mode(mode)))

    def _supported(self, mode: str) -> str:
        """``mode``, or a :class:`ResizeError` where this PE does not have it."""
        if mode not in self.resize_modes:
            raise ResizeError(unscalable(self.name or type(self).__name__, mode, self.resize_modes))
        return mode

    def _set_resize(self, mode: str) -> None:
        """Switch to ``mode`` (already checked); a PE made of others passes it on."""
        self._resize = mode

    @contextlib.contextmanager
    def resize_mode(self, mode: str) -> Iterator["PositionEncoding"]:
        """Act in ``mode`` inside the ``with`` block, then return to the previous mode."""
        previous, self.resize = self.resize, mode
        try:
            yield self
        finally:
            self.resize = previous

    @property
    def sites(self) -> frozenset[str]:
        """The sites this PE acts at: one, none for ``none``, several for a composed PE."""
        return frozenset({self.site}) - {"none"}

    @property
    def augmenting(self) -> bool:
        """Whether this forward moves the coordinates (training mode, an augmentation set)."""
        return self.training and self.augment is not None and self.augment.active

    @property
    def device(self) -> torch.device:
        return self.reference_grid.device

    @property
    def working_dtype(self) -> torch.dtype:
        """The dtype a PE computes its tables, biases and rotations in from coordinates: float32, or float64 for a PE
        cast to it (its parameters' dtype promoted to at least float32). A PE cast to bfloat16 or float16 keeps those
        small products in float32, as it does under autocast."""
        dtype = next((p.dtype for p in self.parameters() if p.is_floating_point()), torch.float32)
        return torch.promote_types(dtype, torch.float32)

    def check_grid(self, grid: int | tuple[int, ...]) -> Grid:
        """``grid`` as a tuple with this PE's axes (an int: a square on an image PE, a length on a 1D one)."""
        grid = as_grid(grid, dims=len(self.grid))
        if len(grid) != len(self.grid):
            raise ValueError(f"{self.name} was built for the {len(self.grid)}D grid {self.grid}; got the grid {grid}")
        return grid

    # ------------------------------------------------------------------------------------------------------ hooks
    def prepare(self, grid: int | tuple[int, ...]) -> Any:
        """Everything that depends only on ``grid``; call once per forward and pass the result to the hooks."""
        grid = self.check_grid(grid)
        return self.cached_if_fixed(("state", grid, self.resize), lambda: self._prepare(grid))

    def _prepare(self, grid: Grid) -> Any:
        return None

    def batch_states(self, layout: GridLayout, states: list[Any]) -> Any | None:
        """One state for all the images of a mixed batch, from each distinct grid's state (``states``, in the order
        of ``layout.groups``), where this PE's own hooks take it (a rotary PE: per-image angle tables); None, the
        default, has the mixed state apply the hooks grid by grid."""
        return None

    def bind(self, grid: int | tuple[int, ...] | GridLayout) -> BoundEncoding:
        """This PE prepared for one forward at ``grid`` (or a mixed batch's :class:`~vitpe.pe.mixed.GridLayout`), as a
        typed object whose ``.layer(i)`` gives block ``i``'s hooks with nothing to thread (:mod:`vitpe.pe.bound`)."""
        return BoundEncoding.of(self, grid)

    def prepare_mixed(self, layout: GridLayout) -> MixedState:
        """The state of a batch whose sequences lie on different grids (:mod:`vitpe.pe.mixed`): each distinct grid's
        state from :meth:`prepare`, and the hooks over the padded batch. Every PE has it through its one-grid hooks."""
        return MixedState(self, layout)  # (each grid checked by prepare)

    def add_to_tokens(self, x: torch.Tensor, state: Any, layer: int) -> torch.Tensor:
        """Tokens site: ``x`` (B, P + N, D) before block ``layer``; returns the same shape."""
        return x

    def rotate(self, x: torch.Tensor, state: Any, layer: int) -> torch.Tensor:
        """q,k site: rotate ``x`` (..., nH, P + N, Dh), queries or keys of block ``layer``; prefix tokens untouched."""
        return x

    def rotate_qkv(self, qkv: torch.Tensor, state: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q,k site on stacked projections ``qkv`` (3, ..., nH, P + N, Dh) -> ``(q, k, v)``, q and k rotated as by
        :meth:`rotate`; a PE may override it with a fused form that gives the same result. The caller gives ``qkv``
        up: where no gradient is asked for, that form may rotate q and k in ``qkv``'s own memory (vitpe's RoPE does)."""
        q, k, v = unbind_in_memory_order(qkv)  # 3 x (..., nH, P + N, Dh); the backward is one stack in qkv's order
        return self.rotate(q, state, layer), self.rotate(k, state, layer), v

    def rotate_qk(self, q: torch.Tensor, k: torch.Tensor, state: Any, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """q,k site on queries and keys given apart, each (..., nH, P + N, Dh) -> ``(q, k)``: :meth:`rotate` on each,
        or both widened together by a PE with ``widens_qk`` (PaPE). The form for attention that keeps q and k apart."""
        return self.rotate(q, state, layer), self.rotate(k, state, layer)

    def attention_bias(self, state: Any, layer: int) -> torch.Tensor | None:
        """Logits site: float bias (nH, P + N, P + N) added to block ``layer``'s attention scores, or None."""
        return None

    # --------------------------------------------------------------------------- the hooks' checks, for own models
    def check_tokens(self, tokens: int, expected: int, what: str) -> None:
        """Raise a clear error where a hook gets ``tokens`` tokens and its state was prepared for ``expected``
        (P + N): a PE hosted in another model is most often built with the wrong ``num_prefix_tokens``."""
        if tokens != expected:
            raise ValueError(
                f"{self.name}: {what} has {tokens} tokens, but the state was prepared for {expected} "
                f"({self.num_prefix_tokens} prefix + {expected - self.num_prefix_tokens} grid tokens): give prepare() "
                f"the grid of these tokens, and build the PE with num_prefix_tokens = the tokens in front of the grid "
                f"(1 for a class token)")

    def check_layer(self, layer: int) -> None:
        """Raise a clear error where a PE with one parameter set per block is asked for a block it does not have."""
        if self.depth is not None and not 0 <= layer < self.depth:
            raise IndexError(f"{self.name}: block {layer} does not exist in a PE built with depth={self.depth} (one "
                             f"set of parameters per block); build it with the depth of the model")

    def no_weight_decay(self) -> set[str]:
        """Names (relative to this module) of parameters to exclude from weight decay: all PE parameters by default."""
        return {name for name, _ in self.named_parameters()}

    # ------------------------------------------------------------------------------------------------- caching
    def cached(self, key: Any, build: Callable[[], Any]) -> Any:
        """Return ``build()`` memoised under ``key``; built outside autograd and inference mode, on this device.

        While ``torch.compile`` traces, a missing entry is built into the graph and not stored: storing it would change
        the dict the graph's guards read, and the next call would compile the whole forward again (two compilations
        per grid). An entry stored before compiling is a constant of the graph
        (:func:`vitpe.engine.compiled.fill_grid_caches`)."""
        if key not in self._cache:
            if torch.compiler.is_compiling():
                with torch.no_grad():
                    return build()
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            with torch.inference_mode(False), torch.no_grad():
                self._cache[key] = build()
        return self._cache[key]

    def cached_geometry(self, key: Any, build: Callable[[], Any]) -> Any:
        """:meth:`cached` for what depends on the grid's coordinates alone; built anew on every call while the
        coordinate augmentation moves them (training mode)."""
        return build() if self.augmenting else self.cached(key, build)

    def cached_if_fixed(self, key: Any, build: Callable[[], Any]) -> Any:
        """:meth:`cached_geometry` for a PE without parameters; built anew on every call where it learns something
        (what depends on a parameter changes with every optimiser step, and needs its gradient)."""
        if any(True for _ in self.parameters()):
            return build()
        return self.cached_geometry(key, build)

    # ------------------------------------------------------------------------------- coordinates, as this forward
    def positions_at(self, grid: Grid, anchor: str = "centre") -> torch.Tensor:
        """Every cell's position in reference units in this resize mode (:func:`vitpe.pe.grid.grid_positions`),
        moved by this forward's coordinate augmentation while training: (N, ndim), columns (row, col)."""
        pos = grid_positions(grid, self.grid, self.resize, self.device, anchor)  # (N, ndim)
        return self.augment.positions(pos, self.grid) if self.augmenting else pos

    def positions_in_sides(self, grid: Grid) -> torch.Tensor:
        """:meth:`positions_at` in units of the reference grid's side per axis (the reference grid spans [0, 1)), the
        coordinates of the PEs whose learned scale should not depend on the training grid: (N, ndim)."""
        side = torch.tensor(self.grid, dtype=torch.float32, device=self.device)
        return self.positions_at(grid) / side

    def offsets_at(self, grid: Grid) -> torch.Tensor:
        """Every relative offset in reference units in this resize mode (:func:`vitpe.pe.grid.relative_offsets`),
        scaled by this forward's coordinate augmentation while training: (*extent, ndim)."""
        offsets = relative_offsets(grid, self.grid, self.resize, self.device)  # (*extent, ndim)
        return self.augment.offsets(offsets) if self.augmenting else offsets

    def _apply(self, fn: Callable, *args: Any, **kwargs: Any) -> "PositionEncoding":
        self._cache.clear()  # cached tables must follow .to(device) / .half(): rebuild them lazily
        return super()._apply(fn, *args, **kwargs)

    # ------------------------------------------------------------------------------------- loading across grids
    def resample_loaded(self, state_dict: dict[str, torch.Tensor], prefix: str, old_grid: Grid) -> None:
        """Rewrite, in ``state_dict``, the grid-shaped tensors saved at ``old_grid`` for this PE's grid."""

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:  # noqa: D401 (torch hook signature)
        key = prefix + "reference_grid"
        if key in state_dict:
            old_grid = tuple(int(v) for v in state_dict[key].reshape(-1).tolist())
            if len(old_grid) != len(self.grid):
                error_msgs.append(f"{key}: saved for the {len(old_grid)}D grid {old_grid}, this {self.name} "
                                  f"is built for the {len(self.grid)}D grid {self.grid}")
            elif old_grid != self.grid:
                self.resample_loaded(state_dict, prefix, old_grid)
                state_dict[key] = self.reference_grid.clone()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self) -> str:
        return (f"site={self.site}, grid={self.grid}, dim={self.dim}, heads={self.heads}, depth={self.depth}, "
                f"prefix={self.num_prefix_tokens}, resize={self.resize}")


def pad_prefix(x: torch.Tensor, num_prefix: int, dims: tuple[int, ...] = (-2,)) -> torch.Tensor:
    """Zero-pad each token dimension in ``dims`` of ``x`` at the front by ``num_prefix`` (prefix tokens get nothing)."""
    if num_prefix == 0:
        return x
    pad = [0] * (2 * x.dim())  # F.pad order: (left, right) of the last dim first
    for d in dims:
        pad[2 * (x.dim() - 1 - d % x.dim())] = num_prefix
    return torch.nn.functional.pad(x, pad)
