"""Controlled kernels: each differs from a ropelab kernel in one respect, so the time (or the
profile) of the pair says what that one respect costs.

The course left two gaps unexplained:

``block2d`` vs ``flat``
    At hidden = 512 both launch 4096 blocks of 256 threads, one pair per thread, and
    ``block2d`` has no division, yet it is 7-17% slower.  Suspects, one control each: the
    order in which its loads are issued (``block2d_loads_first``, ``block2d_pos_in_loop``,
    and the converse in flat, ``flat_serial_pos``), the stride loop (``block2d_no_loop``), the
    block size on wide rows (``block2d_256``), the exponent formula (``flat_block2d_exponent``).
``pack4_scalar`` vs ``flat``
    The old ``pack4_scalar`` loaded its second pair after storing the first (``x`` and ``out``
    may alias, so the compiler must keep that order): one 8-byte pair in flight per thread,
    with half as many threads as ``flat``.  ropelab's kernel now loads both pairs first;
    ``pack4_scalar_unhoisted`` keeps the old order for the record.

``copy_f32x4`` is a roof: a 128-bit copy kernel (no math), what a kernel that only streams the
same bytes reaches.

The kernels themselves are in :mod:`ropelab.measure.control_kernels`.  Every entry of
:data:`KERNELS` launches on flat float32 device arrays of one plain-RoPE shape
(``tokens x hidden``, one head, interleaved pairs, base 10000): ``make_launch(name, tokens,
hidden, x, out, positions)`` returns a no-argument callable that launches the kernel once, with
its arguments built in advance (a timing loop then pays only the dispatch).  References
(ropelab's own kernels) are launched the same way, so each pair differs in the kernel only.
Nothing here validates its input: these are instruments, not course API.

``python -m ropelab.measure.controls`` prints the census of every entry (PTX counts, the order
of loads and stores in PTX and SASS, see :mod:`ropelab.measure.order`); ``--save`` writes it to
``data/census/controls.json``.  It is a client of the census engine
(:mod:`ropelab.measure.census.engine`), which compiles in a child process without a GPU.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
from numba import cuda

from . import order
from .census import engine
from .census.counting import count_ptx, count_sass
from .control_kernels import (copy_f32x4, rope_block2d_loads_first, rope_block2d_no_loop,
                              rope_block2d_pos_in_loop, rope_flat_block2d_exponent,
                              rope_flat_serial_pos, rope_pack4_scalar_unhoisted)
from ..kernels import block2d, flat, pack4
from ..kernels._device import WARP
from ..kernels.launch import launch
from ..kernels.plan import Plan, blocks_for, census_problem
from ..freqs import DEFAULT_BASE
from ..problem import MAX_THREADS_PER_BLOCK

BASE = DEFAULT_BASE
THREADS = 256
CENSUS_FILE = engine.DATA_DIR / "controls.json"


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------

ARRAYS = "float32[::1], float32[::1], int32[::1]"
SIG_FLAT = f"void({ARRAYS}, uint64, int64, float32)"
SIG_BLOCK2D = f"void({ARRAYS}, uint64, float32)"
SIG_PACK4 = f"void({ARRAYS}, uint64, uint64, int64, float32)"
SIG_SERIAL = f"void({ARRAYS}, uint64, int64, float32, uint64)"
SIG_COPY = "void(float32[::1], float32[::1], int64)"


def _flat_launch(tokens, hidden, threads=THREADS):
    pairs = hidden // 2
    return blocks_for(tokens * pairs, threads), threads, (np.uint64(pairs), tokens * pairs, np.float32(BASE))


def _block2d_launch(tokens, hidden, threads=None):
    pairs = hidden // 2
    if threads is None:  # as ropelab.kernels.block2d: one thread per pair, whole warps, capped
        threads = min(-(-pairs // WARP) * WARP, MAX_THREADS_PER_BLOCK)
    return tokens, threads, (np.uint64(pairs), np.float32(BASE))


def _block2d_no_loop_launch(tokens, hidden):
    grid, threads, args = _block2d_launch(tokens, hidden)
    return (grid, -(-(hidden // 2) // threads)), threads, args


def _pack4_launch(tokens, hidden, threads=THREADS):
    pairs = hidden // 2
    quads = (pairs + 1) // 2
    return (blocks_for(tokens * quads, threads), threads,
            (np.uint64(pairs), np.uint64(quads), tokens * quads, np.float32(BASE)))


def _serial_launch(tokens, hidden):
    grid, threads, args = _flat_launch(tokens, hidden)
    return grid, threads, args + (np.uint64(0),)


def _copy_launch(tokens, hidden, threads=THREADS):
    quads = tokens * hidden // 4
    return blocks_for(quads, threads), threads, (quads,)


@dataclass(frozen=True)
class ControlKernel:
    """One kernel to time, profile and census (a bench row is a :class:`..entry.Entry`).

    ``role``: ``reference`` (a ropelab kernel), ``control`` or ``roof``.  ``reference``: the
    entry it is compared with.  ``isolates``: the one thing that differs.  ``confirms``: the
    result that would confirm the suspect, and what would rule it out.
    """

    name: str
    role: str
    question: str
    reference: str | None
    isolates: str
    confirms: str
    fn: object
    signature: str
    config: object  # (tokens, hidden) -> (grid, threads, scalar args after x, out, positions)
    copy_only: bool = False  # arguments are (x, out, *scalars): no positions
    needs_quads: bool = False  # 128-bit access: hidden % 4 == 0 and 16-byte aligned arrays


KERNELS = {e.name: e for e in (
    ControlKernel("flat", "reference", "block2d", None, "ropelab's flat", "-",
           flat.rope_flat, SIG_FLAT, _flat_launch),
    ControlKernel("block2d", "reference", "block2d", "flat", "ropelab's block2d", "-",
           block2d.rope_block2d, SIG_BLOCK2D, _block2d_launch),
    ControlKernel("block2d_loads_first", "control", "block2d", "block2d",
           "each pair's loads written before its pow/sin/cos in the source (flat's order)",
           "as fast as flat: source order was the cause; as slow as block2d (expected: the "
           "compiler already schedules these loads first, see the census): it was not",
           rope_block2d_loads_first, SIG_BLOCK2D, _block2d_launch),
    ControlKernel("block2d_pos_in_loop", "control", "block2d", "block2d",
           "position read next to the pair's loads, so all three are in flight together "
           "(block2d waits for the position before it can issue the pair's loads)",
           "level with flat: the serialized position read is the cause; level with block2d: not",
           rope_block2d_pos_in_loop, SIG_BLOCK2D, _block2d_launch),
    ControlKernel("block2d_no_loop", "control", "block2d", "block2d",
           "no stride loop (grid y covers wide rows); the position read and the pair's loads "
           "then share one block of code",
           "level with flat: the loop (and the wait it puts between the loads) is the cause",
           rope_block2d_no_loop, SIG_BLOCK2D, _block2d_no_loop_launch),
    ControlKernel("block2d_256", "control", "block2d", "block2d",
           "block2d's kernel with 256-thread blocks (differs from block2d only where rows have "
           "more than 256 pairs: hidden > 512)",
           "faster than block2d on wide rows: large blocks cost time; equal: they do not",
           block2d.rope_block2d, SIG_BLOCK2D, lambda t, h: _block2d_launch(t, h, THREADS)),
    ControlKernel("flat_block2d_exponent", "control", "block2d", "flat",
           "flat computing the exponent as block2d does (pair * (2 / hidden))",
           "slower than flat: the formula costs time; level with flat: it does not",
           rope_flat_block2d_exponent, SIG_FLAT, _flat_launch),
    ControlKernel("flat_serial_pos", "control", "block2d", "flat",
           "flat made to wait for the position before issuing the pair's loads, as block2d does",
           "as slow as block2d: the serialized position read is the cause (the converse of "
           "block2d_pos_in_loop); level with flat: not",
           rope_flat_serial_pos, SIG_SERIAL, _serial_launch),
    ControlKernel("pack4", "reference", "pack4_scalar", "flat", "ropelab's pack4 (128-bit access)", "-",
           pack4.rope_pack4, SIG_PACK4, _pack4_launch, needs_quads=True),
    ControlKernel("pack4_scalar", "reference", "pack4_scalar", "flat",
           "ropelab's pack4_scalar, both pairs loaded before the first store", "-",
           pack4.rope_pack4_scalar, SIG_PACK4, _pack4_launch),
    ControlKernel("pack4_scalar_unhoisted", "control", "pack4_scalar", "pack4_scalar",
           "the old order: the second pair loaded after the first pair is stored",
           "slower than pack4_scalar (and than flat): one pair in flight per thread was the "
           "cause; level with pack4_scalar: it was not",
           rope_pack4_scalar_unhoisted, SIG_PACK4, _pack4_launch),
    ControlKernel("copy_f32x4", "roof", "roof", None,
           "a 128-bit copy kernel of the same bytes, no math",
           "the best a streaming kernel reaches here; compare with the copy engine (copy_d2d)",
           copy_f32x4, SIG_COPY, _copy_launch, copy_only=True, needs_quads=True),
)}

# The launch arguments above mirror ropelab's launchers, which build them from these signatures.
_REFERENCE_MODULES = {"flat": flat, "block2d": block2d, "pack4": pack4, "pack4_scalar": pack4}


def _ropelab_signature(module) -> str:
    """The argument types ropelab's own launch passes to the module's kernel (from its plan)."""
    return module.VARIANT.plan(census_problem(module.VARIANT.features)).signature()


def signature_drift() -> list[str]:
    """References whose ropelab kernel no longer takes the arguments this module passes."""
    return [name for name, module in _REFERENCE_MODULES.items()
            if _ropelab_signature(module) != KERNELS[name].signature]


def applies(name: str, tokens: int, hidden: int) -> bool:
    """Whether the entry can run on this shape (128-bit entries need whole quads per row)."""
    return hidden % 2 == 0 and (not KERNELS[name].needs_quads or hidden % 4 == 0)


def make_launch(name: str, tokens: int, hidden: int, x, out, positions, *, fastmath: bool = True,
                stream=0):
    """A callable that launches entry ``name`` once on the given device arrays."""
    e = KERNELS[name]
    if name in _REFERENCE_MODULES and name in signature_drift():
        raise RuntimeError(f"ropelab's {name} kernel now has the signature "
                           f"{_ropelab_signature(_REFERENCE_MODULES[name])}; update "
                           f"ropelab.measure.controls to launch it")
    if not applies(name, tokens, hidden):
        raise ValueError(f"{name} needs hidden % 4 == 0, got {hidden}")
    grid, threads, scalars = e.config(tokens, hidden)
    f32, i32 = np.dtype(np.float32), np.dtype(np.int32)
    # Through ropelab's one launch path, like every other timed kernel: the rows compare kernels,
    # not launchers.
    plan = Plan(e.fn, fastmath, grid, threads, (f32, f32) if e.copy_only else (f32, f32, i32),
                scalars=tuple(np.int64(v) if type(v) is int else v for v in scalars))
    arrays = (x, out) if e.copy_only else (x, out, positions)
    return lambda: launch(plan, arrays, stream)


# --------------------------------------------------------------------------------------------
# Census: counts and memory order of every entry, compiled without a GPU
# --------------------------------------------------------------------------------------------

def cache_key(recorded: dict | None = None) -> str:
    """What the census depends on: each entry's code and signature, the order rules, and the
    PTX and SASS producers (a SASS tool not installed takes the committed census's version)."""
    return engine.cache_key("controls",
                            [e.fn for e in KERNELS.values()] + [order.ptx_memory_order, order.sass_schedule],
                            stages=("ptx", "sass"), recorded=recorded or _recorded(),
                            entries=[[e.name, e.signature] for e in KERNELS.values()])


def _recorded() -> dict | None:
    doc = engine.read_json(CENSUS_FILE)
    return doc.get("versions") if isinstance(doc, dict) else None


def compile_rows(payload=None):
    """(In the child.)  Compile every entry (fast-math, cc 9.0): counts and memory order."""
    from .census.sass import ptx_to_sass

    for e in KERNELS.values():
        def work(e=e):
            text, _ = cuda.compile_ptx(e.fn, e.signature, cc=engine.CC, fastmath=True)
            counts = count_ptx(text)
            out = {k: counts[k] for k in ("instructions", "int_divrem", "sfu", "ld_global",
                                          "st_global")}
            out["ptx_order"] = order.ptx_memory_order(text)
            sass = ptx_to_sass(text)
            out["sass_instructions"] = count_sass(sass)["sass_instructions"]
            out["sass_schedule"] = order.sass_schedule(sass)
            return out

        yield engine.attempt({"name": e.name, "role": e.role, "question": e.question,
                              "reference": e.reference, "kernel": e.fn.__name__}, work)


def _build() -> dict:
    rows = engine.run_child("ropelab.measure.controls", total=len(KERNELS),
                            label="controls census")
    return engine.document(cache_key(), rows, stages=("ptx", "sass"))


def census(*, use_cache: bool = True) -> dict:
    """``{"key", "cc", "versions", "rows"}``: each entry's PTX counts, memory order and SASS
    schedule.  Served from ``data/census/controls.json`` (then the user cache) when its key
    matches; otherwise compiled in the census engine's child process (real compiler, no driver),
    or refused first when nvdisasm is not installed."""
    key = cache_key()
    return engine.cached("controls", {key: None}, lambda _todo: {key: _build()},
                         committed=CENSUS_FILE, use_cache=use_cache,
                         # The notebooks read every entry's SASS schedule: no half census.
                         needs=("ptx", "sass"),
                         label=f"the controls census of {len(KERNELS)} kernels")[key]


def census_row(doc: dict, name: str) -> dict:
    for r in doc["rows"]:
        if r["name"] == name:
            return r
    raise KeyError(f"no census row for {name!r}")


def format_census(doc: dict) -> str:
    head = (f"{'entry':<24} {'vs':<14} {'instr':>5} {'SASS':>5} {'ld.global':<13} {'PTX order':<24} "
            f"{'SASS order (w = wait for a load)':<34} {'in flight':>9}")
    lines = [f"Controls census, cc {doc['cc']}, numba-cuda {doc['versions'].get('numba-cuda')} "
             f"(fast-math builds)", head, "-" * len(head)]
    for r in doc["rows"]:
        if r.get("error"):
            lines.append(f"{r['name']:<24} ERROR {r['error']}")
            continue
        sched = r.get("sass_schedule") or {}
        flight = (f"{sched['max_loads_in_flight']} / {sched['max_load_bytes_in_flight']} B"
                  if sched else "")
        ld = " ".join(f"{k}b:{v}" for k, v in sorted(r["ld_global"].items()))
        lines.append(f"{r['name']:<24} {r['reference'] or '-':<14} {r['instructions']:>5} "
                     f"{r.get('sass_instructions', ''):>5} {ld:<13} {r['ptx_order']['order']:<24} "
                     f"{sched.get('order', ''):<34} {flight:>9}")
    return "\n".join(lines)


def describe() -> str:
    """One paragraph per control: what it isolates and what result would confirm what."""
    out = []
    for e in KERNELS.values():
        if e.role == "reference":
            continue
        out.append(f"{e.name} (vs {e.reference or 'copy_d2d'}): isolates {e.isolates}.\n"
                   f"  reading: {e.confirms}.")
    return "\n".join(out)


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ropelab.measure.controls",
                                description="census of the controlled kernels (no GPU needed)")
    p.add_argument("--no-cache", action="store_true", help="recompile even if the saved census matches")
    p.add_argument("--save", action="store_true", help=f"write {CENSUS_FILE}")
    p.add_argument("--describe", action="store_true", help="what each control isolates")
    args = p.parse_args(argv)
    if args.describe:
        print(describe())
        return 0
    doc = census(use_cache=not args.no_cache)
    print(format_census(doc))
    if args.save:
        print(f"saved {engine.write_json(CENSUS_FILE, doc)}", file=sys.stderr)
    return 1 if any(r.get("error") for r in doc["rows"]) else 0


if __name__ == "__main__":
    # Run the imported module, not this __main__ copy: the census key reads the kernels' module.
    from ropelab.measure import controls as _imported

    sys.exit(_imported.main())
