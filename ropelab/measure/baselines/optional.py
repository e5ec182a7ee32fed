"""Which optional baseline packages (torch, CuPy) import here."""

from __future__ import annotations

import importlib


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except Exception:  # ImportError, or a wheel that fails to load its CUDA libraries
        return None


def available() -> dict:
    """{package: version or None} for the optional baseline packages."""
    out = {}
    for name in ("torch", "cupy"):
        mod = _optional(name)
        out[name] = getattr(mod, "__version__", None) if mod is not None else None
    return out
