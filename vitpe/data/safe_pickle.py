"""Reading CIFAR's pickles without executing what a file brings.

The CIFAR "python version" files are pickles of dicts holding numpy arrays. A plain ``pickle.load`` can run arbitrary
code, so we unpickle with an allow-list: numpy's array reconstruction and nothing else.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),  # how Python 3 writes bytes into protocol-2 pickles
}


class _ArrayOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: only numpy arrays are allowed")


def load_array_pickle(data: bytes) -> Any:
    """Unpickle ``data`` (Python 2 or 3 protocol) allowing only plain containers and numpy arrays.

    Keys that come back as ``bytes`` (Python 2 pickles read with ``encoding="bytes"``) are decoded to ``str``.
    """
    obj = _ArrayOnlyUnpickler(io.BytesIO(data), encoding="bytes").load()
    if isinstance(obj, dict):
        obj = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}
    return obj
