"""Showing code in a lesson: always read from the package, never pasted into a notebook."""

from __future__ import annotations

import inspect


def source(obj) -> str:
    """The source text of a kernel (or any function or module), exactly as ropelab has it."""
    return inspect.getsource(obj)
