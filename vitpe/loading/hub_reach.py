"""Pretrained weights on a machine that cannot reach the Hugging Face hub.

Without a network, timm's download retries the hub for about a minute before it fails, and with the weights already
in the local cache it still retries before falling back to them. vitpe asks first: when the hub's host does not
resolve (or ``HF_HUB_OFFLINE`` is set), a model whose weights are in the hub's local cache is loaded from that file
at once, and one whose weights are not stops at once with a line saying what to do.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

from vitpe.config import ConfigError

#: The weight files timm looks for in a model's hub repository, in its order of preference.
HUB_WEIGHT_FILES = ("model.safetensors", "open_clip_model.safetensors", "pytorch_model.bin", "open_clip_pytorch_model.bin")


def hub_reachable() -> bool:
    """Whether the hub can be asked: not in offline mode, and its host resolves (a lookup, no request)."""
    from huggingface_hub import is_offline_mode

    if is_offline_mode():
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def cached_weights(name: str, cache_dir: str | None = None) -> str | None:
    """The path of ``name``'s weights in the hub's local cache, or None (also for a model not on the hub)."""
    from huggingface_hub import try_to_load_from_cache
    from timm.models import get_pretrained_cfg

    cfg = get_pretrained_cfg(name)
    repo = getattr(cfg, "hf_hub_id", None) if cfg is not None else None
    if not repo:
        return None
    files = (cfg.hf_hub_filename,) if getattr(cfg, "hf_hub_filename", None) else HUB_WEIGHT_FILES
    for filename in files:
        found = try_to_load_from_cache(repo, filename, cache_dir=cache_dir)
        if isinstance(found, str):
            return found
    return None


def offline_weights(name: str, spec: str, where: str, cache_dir: str | None = None) -> str | None:
    """None where the hub can be reached (timm downloads as usual); otherwise the cached weights file of ``name``,
    or a :class:`ConfigError` naming what to do when there is none."""
    if hub_reachable():
        return None
    try:
        cached = cached_weights(name, cache_dir)
    except RuntimeError:  # a tag timm does not know: timm's own error says so, without a network
        return None
    if cached is None:
        raise ConfigError(f"{where} {spec!r}: the Hugging Face hub cannot be reached from here (no network, or "
                          f"HF_HUB_OFFLINE is set) and {name}'s weights are not in its local cache; download them "
                          f"on a machine with a network and give the file as timm:{name}@/path/to/weights")
    return cached
