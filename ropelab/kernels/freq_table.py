"""Variant 4, ``freq_table``: frequencies (or cos/sin) looked up from tables built on the host.

``flat`` spends a ``pow`` per thread to rebuild a number that depends on the pair index alone.
Here the host computes the inverse frequencies once, in float64 and already scaled (linear, NTK,
YaRN, Llama 3.1; see :mod:`ropelab.scaling`), casts them to float32 and uploads one
``[rotary_dim / 2]`` table.  Each thread reads ``inv_freq[pair]``: no ``pow`` on the GPU.

Three modes, chosen with keyword options of ``ropelab.rope(..., variant="freq_table", ...)``:

``table`` (default)
    ``angle = float32(position) * inv_freq[pair]``, then sin/cos.  Fast, but the float32 angle
    itself is off by up to about ``angle * 2**-23`` radians (the rounding of ``inv_freq`` and of
    the product): around 1e-2 rad at position 131072 for the fastest pairs, whatever the
    accuracy of sin/cos.
``cache=True, max_positions=N``
    float32 ``cos`` and ``sin`` tables of shape ``[N, rotary_dim / 2]`` computed in float64 on the
    host (the vLLM / FlashInfer "cos_sin_cache"): the kernel does no transcendental math at all
    and every value is exact to float32 rounding at any position.  It costs
    ``8 * N * rotary_dim / 2`` bytes of memory and reads; positions ``>= N`` are refused before
    launch.
``reduce_angle=True``
    The accurate path without a cache: the table holds each frequency in *turns* (``f / 2 pi``)
    split into a float32 head and tail.  The kernel forms ``position * turns`` with an
    ``fma`` that recovers the product's rounding error, drops the whole turns, and only then
    multiplies by ``2 pi``: sin/cos see an angle below ``2 pi`` in magnitude that is accurate to
    a few 1e-7 rad at any position, where even fast-math ``sin.approx`` is accurate.

Threads and layout: one thread per *slot* of a head, ``head_dim / 2`` slots per head.  Slot
``j < rotary_dim / 2`` rotates pair ``j`` (elements ``(2j, 2j+1)`` interleaved, ``(j, j +
rotary_dim/2)`` half-split); a slot ``j`` past the rotated pairs copies the pass-through
elements ``(2j, 2j+1)``, so partial rotary needs no second kernel.  The layout is two integers
(``step``, ``partner``), not a branch.  Inverse rotation and YaRN's attention factor fold into
the two float32 scales applied to cos and sin.
"""

import math
import threading
from collections import OrderedDict

import numpy as np
from numba import cuda, float32, int64, uint64

from ..problem import HEADS, INVERSE, NEOX, PARTIAL, SCALED
from ..validate import check_bool, check_int, fail
from ._device import quotient, rotate, shift_for
from .plan import ROPE_ARRAYS, Plan, Variant, blocks_for

NAME = "freq_table"
SUMMARY = "inverse-frequency table (no pow per thread), or a float64-built cos/sin cache, or turns + fma angle reduction"
FEATURES = frozenset({HEADS, PARTIAL, NEOX, INVERSE, SCALED})
THREADS = 256
TWO_PI = 2.0 * math.pi
# reduce_angle's documented limit: every |position| <= 2**24 is exact in float32; past it
# float32(position) rounds (by 1 at 2**24 + 1), an error no angle reduction can undo.
REDUCE_LIMIT = 2**24
# The largest cache accepted (positions x pairs), 2**28 entries = 2 GiB for cos + sin.
MAX_CACHE_ENTRIES = 2**28


# ex: begin rope_freq_table
def rope_freq_table(x, out, positions, inv_freq, heads, heads_shift, half_dim, half_shift, n_pairs,
                    total_slots, step, partner, cos_scale, sin_scale):
    idx = cuda.grid(1)
    if idx < total_slots:
        # Unsigned from here on: C-style division and no negative-index wrap-around on x[a].
        i = uint64(idx)
        head_row = quotient(i, half_dim, half_shift)  # token * heads + head
        j = i - head_row * half_dim  # the slot, without a second division
        first = (i - j) + (i - j)  # 2 * head_row * half_dim: the head's first element
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            angle = float32(positions[quotient(head_row, heads, heads_shift)]) * inv_freq[j]
            c = math.cos(angle) * cos_scale
            s = math.sin(angle) * sin_scale
            out[a], out[b] = rotate(x[a], x[b], c, s)
        else:  # pass-through tail of a partial rotation
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]
# ex: end rope_freq_table


# The slot -> (head row, pair, first float) prologue of rope_freq_table is written out again in
# this variant and the next, not called: notebook 04 shows each kernel whole, as one excerpt.
# ex: begin rope_cos_sin_cache
def rope_cos_sin_cache(x, out, positions, cos_cache, sin_cache, errors, heads, heads_shift,
                       half_dim, half_shift, n_pairs, total_slots, step, partner, cos_scale,
                       sin_scale):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = quotient(i, half_dim, half_shift)
        j = i - head_row * half_dim
        first = (i - j) + (i - j)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            p = positions[quotient(head_row, heads, heads_shift)]
            # A negative position wraps to a huge unsigned row, so one compare checks both ends.
            pos = uint64(p)
            if pos < uint64(cos_cache.shape[0]):
                c = cos_cache[pos, j] * cos_scale
                s = sin_cache[pos, j] * sin_scale
                out[a], out[b] = rotate(x[a], x[b], c, s)
            else:
                # Device positions are not read on the host (that would be a synchronization):
                # an out-of-range one poisons its pair and is reported by ropelab.check_errors().
                errors[0] = p
                out[a] = math.nan
                out[b] = math.nan
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]
# ex: end rope_cos_sin_cache


# ex: begin reduced_angle
@cuda.jit(device=True, inline="always")
def reduced_angle(pos, turns_hi, turns_lo):
    """``2 pi * frac(pos * (turns_hi + turns_lo))`` in float32, |result| < 2 pi.

    ``t = pos * turns_hi`` is rounded; ``fma(pos, turns_hi, -t)`` is exactly the rounding error.
    ``t`` minus its integer part is exact (both are multiples of ``t``'s ulp), so the only
    errors left are of the order of float32 epsilon in turns, not in the full angle.
    """
    t = pos * turns_hi
    err = cuda.fma(pos, turns_hi, -t)
    frac = (t - float32(int64(t))) + (err + pos * turns_lo)
    return frac * float32(TWO_PI)
# ex: end reduced_angle


# ex: begin rope_reduced_angle
def rope_reduced_angle(x, out, positions, turns_hi, turns_lo, errors, heads, heads_shift, half_dim,
                       half_shift, n_pairs, total_slots, step, partner, cos_scale, sin_scale):
    idx = cuda.grid(1)
    if idx < total_slots:
        i = uint64(idx)
        head_row = quotient(i, half_dim, half_shift)
        j = i - head_row * half_dim
        first = (i - j) + (i - j)
        if j < n_pairs:
            a = first + j * step
            b = a + partner
            p = positions[quotient(head_row, heads, heads_shift)]
            if -REDUCE_LIMIT <= p <= REDUCE_LIMIT:
                pos = float32(p)  # exact: |p| <= 2**24
                angle = reduced_angle(pos, turns_hi[j], turns_lo[j])
                c = math.cos(angle) * cos_scale
                s = math.sin(angle) * sin_scale
                out[a], out[b] = rotate(x[a], x[b], c, s)
            else:  # float32(p) would round the position itself: flag it (see the cache kernel)
                errors[0] = p
                out[a] = math.nan
                out[b] = math.nan
        else:
            a = first + j + j
            out[a] = x[a]
            out[a + uint64(1)] = x[a + uint64(1)]
# ex: end rope_reduced_angle


KERNEL = rope_freq_table
CACHE_KERNEL = rope_cos_sin_cache
REDUCED_KERNEL = rope_reduced_angle


# --------------------------------------------------------------------------------------------
# Host side: the tables, this variant's and every other kernel's
# --------------------------------------------------------------------------------------------

# ex: begin cos_sin_cache
def cos_sin_cache(freqs: np.ndarray, max_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``cos`` and ``sin`` of shape ``[max_positions, len(freqs)]``, computed in float64.

    Row ``p`` holds ``cos(p * freqs)`` and ``sin(p * freqs)`` rounded once to float32, so any
    kernel reading them is exact to float32 rounding (about 6e-8) at every position.
    """
    theta = np.outer(np.arange(max_positions, dtype=np.float64), np.asarray(freqs, np.float64))
    return np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
# ex: end cos_sin_cache


def cos_sin_rows(freqs: np.ndarray, max_positions: int) -> np.ndarray:
    """float32 ``[max_positions, 2 * len(freqs)]``: each row the cos half then the sin half of
    :func:`cos_sin_cache` (the layout of the vLLM / SGLang / FlashInfer ``cos_sin_cache``,
    which rope_rows and both fused kernels read)."""
    return np.concatenate(cos_sin_cache(freqs, max_positions), axis=1)


def turns_tables(freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each frequency in turns per position, ``freqs / (2 pi)``, as a float32 head + tail."""
    turns = np.asarray(freqs, np.float64) / TWO_PI
    hi = turns.astype(np.float32)
    lo = (turns - hi.astype(np.float64)).astype(np.float32)
    return hi, lo


# The host tables of every kernel, by kind: float64 frequencies (their bytes) and a length in,
# the float32 arrays a plan hands its kernel out.
_BUILDERS = {
    "inv_freq": lambda freqs, n: (freqs.astype(np.float32),),
    "cos_sin": cos_sin_cache,  # this variant's cache mode: two [n, pairs] tables
    "cos_sin_rows": lambda freqs, n: (cos_sin_rows(freqs, n).reshape(-1),),  # flat rows
    "turns": lambda freqs, n: turns_tables(freqs),  # reduce_angle
}
# How many tables stay built.  A plan keeps its own tables alive, and the device copies have
# their own LRU (ropelab.kernels.launch.MAX_TABLES); this bounds what a program that cycles
# through cache lengths or scalings keeps on the host (a 131072-position cache of 64 pairs is
# 64 MiB).
MAX_HOST_TABLES = 16
_host_tables: OrderedDict = OrderedDict()
_host_lock = threading.Lock()


def tables(kind: str, freq_bytes: bytes, max_positions: int | None = None) -> tuple:
    """The float32 tables of ``kind`` (see ``_BUILDERS``) for the float64 frequencies whose bytes
    are ``freq_bytes``, built once per (kind, frequencies, length) while it is among the
    :data:`MAX_HOST_TABLES` most recently used.  The same arrays for the same key let
    :func:`ropelab.kernels.launch.device_table` find their device copy by identity."""
    key = (kind, freq_bytes, max_positions)
    with _host_lock:
        hit = _host_tables.get(key)
        if hit is not None:
            _host_tables.move_to_end(key)
            return hit
    built = _BUILDERS[kind](np.frombuffer(freq_bytes, dtype=np.float64), max_positions)
    with _host_lock:
        built = _host_tables.setdefault(key, built)
        _host_tables.move_to_end(key)
        while len(_host_tables) > MAX_HOST_TABLES:
            _host_tables.popitem(last=False)
    return built


def host_tables_held() -> int:
    """How many host tables are built and kept now."""
    return len(_host_tables)


OPTIONS = {"cache": False, "max_positions": None, "reduce_angle": False}


def mode_of(problem, options: dict) -> tuple[str, int | None]:
    """Check this variant's options; return (mode, max_positions).

    ``cache=True`` needs ``max_positions`` (the number of cached positions, 0 .. N-1).
    ``reduce_angle=True`` selects the fma angle-reduction path.  The two exclude each other.
    """
    cache = check_bool("cache", options.get("cache", False))
    reduce_angle = check_bool("reduce_angle", options.get("reduce_angle", False))
    max_positions = options.get("max_positions")
    if cache and reduce_angle:
        fail("choose cache=True or reduce_angle=True, not both: the cache has no angles to reduce")
    if not cache:
        if max_positions is not None:
            fail("max_positions is the length of the cos/sin cache; pass cache=True with it")
        return ("reduced" if reduce_angle else "table"), None
    if max_positions is None:
        fail("cache=True needs max_positions=N, the number of positions (0 .. N-1) to tabulate")
    max_positions = check_int("max_positions", max_positions, minimum=1)
    if max_positions * problem.n_pairs > MAX_CACHE_ENTRIES:
        fail(f"a cos/sin cache of {max_positions} x {problem.n_pairs} entries exceeds "
             f"{MAX_CACHE_ENTRIES}; use reduce_angle=True for long contexts")
    return "cache", max_positions


# Keyword options `python -m ropelab check` runs besides the defaults (positions there are < 4096).
CHECK_OPTIONS = (dict(cache=True, max_positions=4096), dict(reduce_angle=True))


def launch_config(problem, threads_per_block=None):
    """(blocks, threads): one thread per slot (``head_dim / 2`` slots per head)."""
    threads = threads_per_block or THREADS
    slots = problem.tokens * problem.heads * (problem.head_dim // 2)
    return blocks_for(slots, threads), threads


def scalar_args(problem) -> tuple:
    """The integer and float arguments every mode shares, in kernel order.

    Index arguments are unsigned 64-bit so the kernels' index arithmetic stays unsigned (a
    Python int would type as int64, and int64 mixed with uint64 computes in float64);
    ``total_slots`` stays int64 because it is compared with the signed ``cuda.grid(1)``.
    """
    half_dim = problem.head_dim // 2
    step, partner = (2, 1) if problem.interleave else (1, problem.n_pairs)
    af = problem.attention_factor
    u = np.uint64
    return (u(problem.heads), u(shift_for(problem.heads)), u(half_dim), u(shift_for(half_dim)),
            u(problem.n_pairs), np.int64(problem.tokens * problem.heads * half_dim), u(step),
            u(partner), np.float32(af), np.float32(-af if problem.inverse else af))


_KERNELS = {"table": rope_freq_table, "cache": rope_cos_sin_cache, "reduced": rope_reduced_angle}
_TABLES = {"table": "inv_freq", "cache": "cos_sin", "reduced": "turns"}
_LIMITS = {
    "table": (None, ""),
    "reduced": (REDUCE_LIMIT + 1, "reduce_angle=True is accurate for |position| <= 2**24 "
                                  "(float32 holds every such position exactly)"),
}


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    mode, max_positions = mode_of(problem, options)
    blocks, threads = launch_config(problem, threads)
    limit, reason = _LIMITS.get(mode, (max_positions, f"the cos/sin cache holds positions 0 .. "
                                                      f"{(max_positions or 0) - 1}"))
    return Plan(_KERNELS[mode], fastmath, blocks, threads, ROPE_ARRAYS,
                tables=tables(_TABLES[mode], problem.inv_freq.tobytes(), max_positions),
                scalars=scalar_args(problem), errors=mode != "table", position_limit=limit,
                limit_reason=reason)


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL, options=OPTIONS,
                  census_options=({}, dict(cache=True, max_positions=16), dict(reduce_angle=True)),
                  check_cases=CHECK_OPTIONS)
