"""Name -> class registry of position encodings, with strict option checking."""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable, TypeVar

from vitpe.pe.base import PositionEncoding
from vitpe.pe.composed import SEPARATOR, ComposedEncoding, member_names

_REGISTRY: dict[str, type[PositionEncoding]] = {}
P = TypeVar("P", bound=type[PositionEncoding])

#: Arguments every PE takes, supplied by the model that hosts it.
COMMON_ARGS = ("dim", "heads", "depth", "grid", "num_prefix_tokens", "resize")
_REQUIRED_ARGS = ("dim", "heads", "grid")  # depth too, for a PE that is layered


def register(name: str) -> Callable[[P], P]:
    """Class decorator: make a :class:`PositionEncoding` subclass buildable as ``name``."""

    def wrap(cls: P) -> P:
        if name in _REGISTRY:
            raise ValueError(f"position encoding {name!r} is already registered ({_REGISTRY[name].__qualname__})")
        cls.name = name
        cls.__signature__ = full_signature(cls)  # type: ignore[attr-defined]
        _REGISTRY[name] = cls
        return cls

    return wrap


def full_signature(cls: type[PositionEncoding]) -> inspect.Signature:
    """The keyword parameters ``cls(...)`` takes: the common ones (:class:`PositionEncoding`'s, documented there) and
    the PE's own options, with their defaults -- what ``help(cls)``, ``inspect.signature`` and a notebook show, where
    the constructor itself passes the common ones on as ``**common``."""
    def keywords(function: Callable) -> list[inspect.Parameter]:
        return [p.replace(kind=p.KEYWORD_ONLY) for p in inspect.signature(function).parameters.values()
                if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]

    common = keywords(PositionEncoding.__init__)
    own = [p for p in keywords(cls.__init__) if p.name not in COMMON_ARGS]
    return inspect.Signature(common + own)


def available(dims: int | None = None) -> list[str]:
    """Names of the registered position encodings, sorted: all of them, or (``dims=2``, ``dims=1``) those that work
    on image grids or on sequences (``t5bias`` is 1D only; ``separable`` and ``rope_dinov3`` are 2D only)."""
    if dims not in (None, 1, 2):
        raise ValueError(f"available(dims=...) takes 1 (sequences) or 2 (images), got {dims!r}")
    return sorted(name for name, cls in _REGISTRY.items() if dims is None or dims in cls.grid_dims)


def get(name: str) -> type[PositionEncoding]:
    """The class registered as ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    if name not in _REGISTRY:
        hint = difflib.get_close_matches(str(name), _REGISTRY, n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ValueError(f"unknown position encoding {name!r}{suggestion}; available: {', '.join(available())}")
    return _REGISTRY[name]


def options(name: str) -> dict[str, Any]:
    """The PE-specific options of ``name`` and their defaults (the common model arguments excluded); for a composed
    name (``"learnable+rope_mixed"``), one such mapping per member."""
    if SEPARATOR in name:
        return {member: options(member) for member in member_names(name)}
    params = inspect.signature(get(name).__init__).parameters
    return {
        p.name: p.default
        for p in params.values()
        if p.name != "self" and p.name not in COMMON_ARGS and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def build(name: str, **kwargs: Any) -> PositionEncoding:
    """Build the PE ``name``. ``kwargs`` are the common arguments (``dim``, ``heads``, ``depth``, ``grid``,
    ``num_prefix_tokens``, ``resize``) plus the PE's own options; anything else raises ``ValueError`` naming it.

    ``name`` may join several PEs with ``+`` (:mod:`vitpe.pe.composed`); the options are then keyed by member, each a
    mapping of that member's options (plus ``resize`` to pin its resize mode)."""
    if SEPARATOR in name:
        return _build_composed(name, kwargs)
    own = options(name)
    unknown = sorted(set(kwargs) - set(own) - set(COMMON_ARGS))
    if unknown:
        valid = ", ".join(own) if own else "none"
        raise ValueError(f"unknown option(s) {unknown} for position encoding {name!r}; its options are: {valid}")
    missing = [a for a in _REQUIRED_ARGS if a not in kwargs]
    if missing:
        raise ValueError(f"building position encoding {name!r} needs {missing}")
    return get(name)(**kwargs)


def _build_composed(name: str, kwargs: dict[str, Any]) -> PositionEncoding:
    members = member_names(name)
    for member in members:
        get(member)  # unknown names first, with suggestions
    common = {k: v for k, v in kwargs.items() if k in COMMON_ARGS}
    per_member = {k: v for k, v in kwargs.items() if k not in COMMON_ARGS}
    stray = sorted(set(per_member) - set(members))
    if stray:
        raise ValueError(f"composed position encoding {name!r}: options are keyed by member ({', '.join(members)}), "
                         f"e.g. {{{members[-1]!r}: {{...}}}}; got {stray}")
    for member, opts in per_member.items():
        if not isinstance(opts, dict):
            raise ValueError(f"composed position encoding {name!r}: the options of {member!r} must be a mapping, "
                             f"got {opts!r}")
    return ComposedEncoding(name, build, per_member, **common)
