"""What the model knows about a kernel: numbers a machine without a GPU can compute.

From the census (PTX counts, and the SASS load schedule where the census has one) and the
launch (grid, block, lookup tables), for one problem of ``bytes_moved`` bytes:

``table``
    ``log(1 + table_bytes / bytes_moved)``: bytes read from lookup tables on top of the
    operation's minimum traffic (the cos/sin cache reads as many bytes as ``x``).  Its weight
    should come out near 1: extra bytes cost as much time as the bytes themselves.
``scalar``
    Global memory instructions per 16 bytes a thread moves, minus one.  A 128-bit access
    moves 16 bytes in one instruction (0); a kernel moving floats one at a time spends four
    (3).  Narrow accesses by neighbouring threads leave holes in each sector that the
    next instruction fetches again.
``serial``
    1 when the SASS issues a thread's loads in two rounds (a load waits for an earlier load's
    value, as block2d's pair loads wait for the position), divided by how many times the
    thread's loop body runs (a wait paid once per thread weighs less over eight pairs than
    over one).  0 when the census has no SASS schedule (a learner's kernel): unknown.
``serial_size``
    ``serial * log(bytes_moved / 1e8)``: the wait costs more on larger problems (flat made to
    wait, flat_serial_pos, is at 81% of the copy at 17 MB and 67% at 1 GB).

Tried and dropped (:mod:`.model` says how that choice was made): threads per 16 bytes moved;
``scalar * log(size)`` (narrow accesses costing more on larger problems); the block size times
the problem size (1024-thread blocks), whose weight came out zero.  Static instruction counts by
class (SFU, integer division, total) are left out: on these kernels they do not predict time
(block2d has the fewest instructions and is among the slowest; pair_sincos has the most and is
among the fastest).
"""

from __future__ import annotations

import math

NAMES = ("table", "scalar", "serial", "serial_size")
THREADS_WHEN_UNKNOWN = 256


def _bytes(widths: dict) -> int:
    """Bytes per thread of accesses counted by width in bits, e.g. {"32": 3, "128": 1}."""
    return sum(int(bits) // 8 * int(n) for bits, n in (widths or {}).items())


def _count(widths: dict) -> int:
    return sum(int(n) for n in (widths or {}).values())


def _threads(dims) -> int:
    dims = tuple(dims) + (1, 1, 1)
    return int(dims[0]) * int(dims[1]) * int(dims[2])


def features(census: dict, bytes_moved: int, grid=None, block=None, table_bytes: int = 0) -> dict:
    """The model's inputs for one kernel on one problem (see the module docstring)."""
    if not bytes_moved or bytes_moved <= 0:
        raise ValueError(f"bytes_moved must be positive, got {bytes_moved!r}")
    loads, stores = census.get("ld_global") or {}, census.get("st_global") or {}
    moved = _bytes(loads) + _bytes(stores)
    if moved == 0:
        raise ValueError("the census counts no global loads or stores: nothing to predict from")
    scalar = 16.0 * (_count(loads) + _count(stores)) / moved - 1.0
    size = math.log(bytes_moved / 1e8)
    per_block = _threads(block) if block is not None else THREADS_WHEN_UNKNOWN
    iterations = 1.0
    if grid is not None and block is not None and _bytes(stores):
        written = bytes_moved / 2 / (_threads(grid) * per_block)  # half the traffic is written
        iterations = max(1.0, written / _bytes(stores))
    schedule = census.get("sass_schedule")
    serial = 0.0
    if schedule:
        serial = float(schedule["max_loads_in_flight"] < _count(loads)) / iterations
    return {"table": math.log1p(table_bytes / bytes_moved),
            "scalar": scalar,
            "serial": serial,
            "serial_size": serial * size if serial else 0.0}
