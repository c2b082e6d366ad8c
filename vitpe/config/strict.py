"""Strict filling: a nested mapping into the config dataclasses, and ``key=value`` dotted overrides.

Unknown keys and values of the wrong type are errors that name the key and suggest close ones; nothing is dropped.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any

import yaml

from vitpe.config.schema import Config, ConfigError


def close_names(key: str, choices: typing.Iterable[str]) -> str:
    """`` (did you mean a, b?)`` for the names in ``choices`` close to ``key``; empty when none is."""
    close = difflib.get_close_matches(key, list(choices), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Check ``value`` against the type ``hint``; ints are accepted for floats. Raises :class:`ConfigError`."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            try:
                return _coerce(value, arg, key)
            except ConfigError:
                pass
        raise ConfigError(f"{key}: {value!r} is not a {hint}")
    if origin is list:
        (inner,) = typing.get_args(hint)
        items = value if isinstance(value, list) else [value] if not isinstance(value, (dict, str)) else None
        if items is None:
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return [_coerce(v, inner, f"{key}[{i}]") for i, v in enumerate(items)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):  # YAML 1.1 reads "1e-3" (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    if hint is type(None) and value is None:
        return None
    if hint is str and isinstance(value, bool):  # a config file's unquoted off / on / yes / no
        raise ConfigError(f"{key}: expected text, got {value!r} (YAML reads an unquoted off, on, yes or no as "
                          f"false or true): quote it, e.g. {key.rpartition('.')[2]}: 'off'")
    if isinstance(hint, type) and isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{key}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


def fill(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """The dataclass ``cls`` (sections recursively) from ``data``; an unknown key or a value of the wrong type is a
    :class:`ConfigError` naming the dotted key under ``prefix``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        key = unknown[0]
        raise ConfigError(f"unknown config key {prefix + str(key)!r}{close_names(str(key), names)}; "
                          f"valid keys under {prefix.rstrip('.') or 'the top level'}: {', '.join(names)}")
    kwargs = {}
    for name, value in data.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = fill(hint, value, f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(value, hint, prefix + name)
    return cls(**kwargs)


def set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``tree["a"]["b"] = value`` for ``dotted`` ``"a.b"``, creating the sections it names."""
    node, parts = tree, dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {dotted!r}: {part!r} is not a section")
    node[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """``"train.epochs=5"`` -> ``("train.epochs", 5)``; the value is parsed as YAML (``[24,32]``, ``true``, ...)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value (e.g. train.epochs=5)")
    key, raw = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"override {text!r}: cannot parse the value ({err})") from None


def _field_hint(dotted: str) -> Any:
    """The type of the :class:`Config` field at ``dotted`` (``"data.cache_dir"`` -> ``str``); None for no field."""
    hint: Any = Config
    for part in dotted.split("."):
        if not dataclasses.is_dataclass(hint):
            return None
        hint = typing.get_type_hints(hint).get(part)
    return hint


def typed_override(text: str) -> tuple[str, Any]:
    """:func:`parse_override`, where the field's type settles what YAML alone cannot: a text option given a word that
    YAML 1.1 reads as a boolean (``data.cache_dir=off``) keeps the word; every other value is YAML's."""
    key, value = parse_override(text)
    if isinstance(value, bool) and _field_hint(key) is str:
        value = text.split("=", 1)[1].strip()
    return key, value
