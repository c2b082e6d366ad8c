"""Name -> class registry of position encodings, with strict option checking."""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Callable, TypeVar

from vitpe.pe.base import PositionEncoding

_REGISTRY: dict[str, type[PositionEncoding]] = {}
P = TypeVar("P", bound=type[PositionEncoding])

#: Arguments every PE takes, supplied by the model that hosts it.
COMMON_ARGS = ("dim", "heads", "depth", "grid", "num_prefix_tokens", "resize")
_REQUIRED_ARGS = ("dim", "heads", "depth", "grid")


def register(name: str) -> Callable[[P], P]:
    """Class decorator: make a :class:`PositionEncoding` subclass buildable as ``name``."""

    def wrap(cls: P) -> P:
        if name in _REGISTRY:
            raise ValueError(f"position encoding {name!r} is already registered ({_REGISTRY[name].__qualname__})")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def available() -> list[str]:
    """Names of all registered position encodings, sorted."""
    return sorted(_REGISTRY)


def get(name: str) -> type[PositionEncoding]:
    """The class registered as ``name``; an unknown name raises ``ValueError`` listing the valid ones."""
    if name not in _REGISTRY:
        hint = difflib.get_close_matches(str(name), _REGISTRY, n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise ValueError(f"unknown position encoding {name!r}{suggestion}; available: {', '.join(available())}")
    return _REGISTRY[name]


def options(name: str) -> dict[str, Any]:
    """The PE-specific options of ``name`` and their defaults (the common model arguments excluded)."""
    params = inspect.signature(get(name).__init__).parameters
    return {
        p.name: p.default
        for p in params.values()
        if p.name != "self" and p.name not in COMMON_ARGS and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def build(name: str, **kwargs: Any) -> PositionEncoding:
    """Build the PE ``name``. ``kwargs`` are the common arguments (``dim``, ``heads``, ``depth``, ``grid``,
    ``num_prefix_tokens``, ``resize``) plus the PE's own options; anything else raises ``ValueError`` naming it."""
    own = options(name)
    unknown = sorted(set(kwargs) - set(own) - set(COMMON_ARGS))
    if unknown:
        valid = ", ".join(own) if own else "none"
        raise ValueError(f"unknown option(s) {unknown} for position encoding {name!r}; its options are: {valid}")
    missing = [a for a in _REQUIRED_ARGS if a not in kwargs]
    if missing:
        raise ValueError(f"building position encoding {name!r} needs {missing}")
    return get(name)(**kwargs)
