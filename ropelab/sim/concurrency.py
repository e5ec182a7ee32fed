"""Which simulated kernels need the threads of a block in flight together.

A kernel whose threads never wait for, or read, another thread of their block (no barrier,
warp exchange or fence in its own code or in the device functions and helpers it calls) gives
the same result in any order of its threads, so :mod:`ropelab.sim.block` runs such a block one
thread after another, with no switching at all.  :func:`needs_concurrency` decides that from the
names the kernel's code uses.
"""

from __future__ import annotations

# What a simulated thread calls to wait for, or read, another thread of its block.
_WAITS = frozenset({
    "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
    "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync",
    "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync", "activemask", "lanemask_lt",
    "threadfence", "threadfence_block", "threadfence_system", "cg", "this_grid", "sync",
    "nanosleep"})
_CONCURRENCY: dict = {}  # code object -> whether its kernel needs its threads concurrent


def _code_names(code) -> set:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _code_names(const)
    return names


def _callees(fn, names):
    """The Python functions ``fn`` may call by the global and closure names it uses."""
    scope = dict(getattr(fn, "__globals__", {}))
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    for name in names:
        value = scope.get(name)
        inner = getattr(value, "fn", None) or getattr(value, "py_func", None) or value
        if hasattr(inner, "__code__") and hasattr(inner, "__globals__"):
            yield inner


def needs_concurrency(fn, depth: int = 0) -> bool:
    """Whether ``fn`` (a simulated kernel's Python function) may wait for or read another
    thread of its block: a barrier, a warp exchange, a fence, anything named so in its code
    or in the functions it calls (to a depth of 6; deeper counts as yes)."""
    code = getattr(fn, "__code__", None)
    if code is None or depth > 6:
        return True
    known = _CONCURRENCY.get(code)
    if known is not None:
        return known
    _CONCURRENCY[code] = True  # a recursion back to fn: answered by the first visit
    names = _code_names(code)
    answer = bool(names & _WAITS) or any(
        needs_concurrency(callee, depth + 1) for callee in _callees(fn, names)
        if getattr(callee, "__module__", "").split(".")[0] not in ("numpy", "math", "numba"))
    _CONCURRENCY[code] = answer
    return answer
