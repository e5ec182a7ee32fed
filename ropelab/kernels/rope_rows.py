"""Plain RoPE on rows of heads: 16-bit or float32 storage, row strides, q and k in one launch.

What a model hands a RoPE op is rarely one contiguous float32 tensor: activations are bfloat16
or float16, q and k are column slices of a packed ``qkv`` (a row stride larger than the row),
and both must rotate in one launch with their own head counts (GQA).  This kernel is the plain
(norm-free) relative of :mod:`ropelab.kernels.fused_qknorm_rope`, with the same choices:

* A *lane* (thread) owns ``2 * RUN`` elements of a head: GPT-J, ``RUN * 2`` contiguous elements
  (pairs ``(2j, 2j+1)`` inside them); NeoX, ``RUN`` elements at offset ``o`` and the ``RUN``
  partners at ``o + rotary_dim / 2``, so both elements of every pair are the lane's own (no
  shuffle).  A run moves with 128-bit (or 64-bit) vector accesses (:mod:`.vec`) when the
  arrays, the row strides and the run allow it; 16-bit words are unpacked by :mod:`.words16`.
* ``heads_per_thread`` heads are loaded one after the other before any arithmetic (bytes in
  flight), and the lane's cos/sin, which depend on the token and the lane only, are computed
  once and shared by all of them.  A head past the end reads the last head and stores nothing
  (a select, not a branch around the loads).
* Index arithmetic is 32-bit (numba widens ``uint32 op uint32``: every step is cast back); the
  launcher refuses spans of ``2**32`` elements or more.
* Frequencies come from a float32 table built on the host in float64 (scaling included), as in
  ``freq_table``; or cos/sin come from a float32 cache ``[max_pos, rotary_dim]``, cos half then
  sin half (the vLLM / SGLang / FlashInfer ``cos_sin_cache``), which the user passes or the host
  builds in float64.  A position outside the cache writes NaN into that token's rotated pairs
  and stores the position in the device error word (:func:`ropelab.check_errors`).
* NeoX with partial rotary: lanes past the rotated dims copy the pass-through elements, or,
  when the call is in place, do nothing at all.

The caller's arrays, as the kernel sees them (1-D spans from the first element of the first
row to the last element of the last row; rows ``row`` elements apart):

* ``one``: ``x``, ``out``, ``positions`` (``ropelab.rope``; ``out`` may be ``x``);
* ``qk``: ``q``, ``k``, ``positions`` (``ropelab.rope_qk``, in place);
* with a user cache, the cache follows ``positions``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache, lru_cache

import numpy as np
from numba import cuda, float32, uint32

from ..bf16 import load_bf16, store_bf16
from ..validate import check_int, fail
from .plan import Plan, Variant
from .freq_table import MAX_CACHE_ENTRIES
from .freq_table import cos_sin_cache as _cos_sin_halves
from .vec import load_f32x4, load_u32x2, load_u32x4, store_f32x4, store_u32x2, store_u32x4
from .words16 import CODECS

NAME = "rope_rows"
SUMMARY = ("plain RoPE on rows of heads: float32/float16/bfloat16, row strides, q and k in one "
           "launch, cos/sin once per lane for several heads, 64/128-bit accesses, inv_freq "
           "table or a [max_pos, rotary_dim] cos/sin cache")
STORAGES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
            "bfloat16": np.dtype(np.uint16)}
MAX_ELEMENTS = 2**32 - 1  # 32-bit index arithmetic
HEADS_PER_THREAD = {"float32": 1, "float16": 2, "bfloat16": 2}
HEADS_PER_THREAD_CHOICES = (1, 2, 4)
BLOCK_THREADS = 256


@dataclass(frozen=True)
class RowsProblem:
    """One validated call: plain numbers, the float64 frequencies, row strides in elements."""

    tokens: int
    heads_q: int
    heads_k: int  # 0 for a single tensor
    head_dim: int
    rotary_dim: int
    interleave: bool
    storage: str
    q_in_row: int
    q_out_row: int
    k_in_row: int = 0
    k_out_row: int = 0
    inverse: bool = False
    attention_factor: float = 1.0
    in_place: bool = False  # out is x (one) or always (qk): pass-through lanes do nothing
    pair: bool = False  # the qk kernel (two arrays, in place) rather than x -> out
    freqs: np.ndarray = field(default=None, repr=False, compare=False)  # float64 [rotary_dim/2]

    @property
    def n_pairs(self) -> int:
        return self.rotary_dim // 2


def run_fits(problem, run: int) -> bool:
    """Whether lanes of ``2 * run`` elements tile every head with this layout."""
    if problem.head_dim % (2 * run):
        return False
    if problem.interleave:
        return True
    return problem.n_pairs % run == 0 and (problem.head_dim - problem.rotary_dim) % (2 * run) == 0


def pick_run(problem, aligned: bool, requested=None) -> tuple[int, int]:
    """(elements per run, vector bytes): the widest access that fits, else scalar accesses.

    ``aligned``: every array starts on a 16-byte boundary and every row stride is a multiple
    of 16 bytes (the host checks; vector accesses fault otherwise).
    """
    item = STORAGES[problem.storage].itemsize
    if requested is not None:
        run = check_int("run", requested, minimum=1, maximum=16)
        if not run_fits(problem, run):
            fail(f"run={run} does not tile head_dim {problem.head_dim} with rotary_dim "
                 f"{problem.rotary_dim} in this layout")
        width = 16 if run * item % 16 == 0 else 8 if run * item % 8 == 0 and item == 2 else 0
        return run, width if aligned else 0
    if aligned:
        # 16-bit storage: 64-bit runs of 4 elements first.  On the H200 they beat 128-bit runs of 8
        # through the public call (data/bench_rows, 2026-12-01 15:06: 95.1-95.9% of the copy
        # against 87.9-92.6%, on all three shapes); float32 keeps 128-bit runs of 4.
        for width in ((8, 16) if item == 2 else (16,)):
            run = width // item
            if run_fits(problem, run):
                return run, width
    for run in (4, 2, 1):
        if run_fits(problem, run):
            return run, 0
    raise AssertionError("run 1 always fits an even head_dim")  # pragma: no cover


@cuda.jit(device=True, inline="always")
def _load_plain(v):
    return float32(v)


@cuda.jit(device=True, inline="always")
def _store_plain(v):
    return v  # float16 storage rounds on assignment (cvt.rn)


_LOAD = {"float32": _load_plain, "float16": _load_plain, "bfloat16": load_bf16}
_STORE = {"float32": _store_plain, "float16": _store_plain, "bfloat16": store_bf16}


@cache
def make_kernel(head_dim: int, interleave: bool, storage: str, run: int, vector_bytes: int,
                heads_per_thread: int, use_cache: bool, full_rotary: bool, in_place: bool,
                pair: bool):
    """The kernel function for one head size, layout, storage, access width and mapping.

    The number of values a lane holds must be a compile-time constant for them to stay in
    registers, hence one function per combination (cached).
    """
    RUN = int(run)
    LANE = 2 * RUN  # elements a lane holds per head
    G = head_dim // LANE  # lanes per head
    R = int(heads_per_thread)
    SLOTS = LANE * R  # local.array needs a plain constant
    HEAD = int(head_dim)
    INTERLEAVE = bool(interleave)
    FULL = bool(full_rotary)
    COPY = not in_place  # pass-through lanes copy x to out
    CACHE = bool(use_cache)
    NAN = float32(math.nan)
    WIDE16 = storage != "float32" and vector_bytes > 0
    V4 = vector_bytes == 16
    CHUNK = vector_bytes // 2 if WIDE16 else 1  # 16-bit elements per access
    CHUNKS = RUN // CHUNK
    VEC4 = storage == "float32" and vector_bytes == 16
    QUADS = RUN // 4
    # Every pair of a lane rotated and RUN a multiple of 4: its RUN frequencies are consecutive
    # floats of the table at a 16-byte boundary (pair sub * RUN), read with 128-bit loads.
    FREQ4 = FULL and not CACHE and RUN % 4 == 0
    load = _LOAD[storage]
    store = _STORE[storage]
    low, high, pack = CODECS.get(storage, CODECS["bfloat16"])  # unused for float32

    @cuda.jit(device=True, inline="always")
    def load_run(src, first, vals, o):
        if WIDE16:
            for k in range(CHUNKS):
                if V4:
                    w0, w1, w2, w3 = load_u32x4(src, uint32(first + uint32(k * CHUNK)))
                    words = (w0, w1, w2, w3)
                else:
                    w0, w1 = load_u32x2(src, uint32(first + uint32(k * CHUNK)))
                    words = (w0, w1, w0, w1)  # one tuple type; only two are used
                for m in range(CHUNK // 2):
                    vals[o + k * CHUNK + 2 * m] = low(words[m])
                    vals[o + k * CHUNK + 2 * m + 1] = high(words[m])
        elif VEC4:
            for k in range(QUADS):
                a, b, c, d = load_f32x4(src, uint32(first + uint32(4 * k)))
                vals[o + 4 * k] = a
                vals[o + 4 * k + 1] = b
                vals[o + 4 * k + 2] = c
                vals[o + 4 * k + 3] = d
        else:
            for i in range(RUN):
                vals[o + i] = load(src[uint32(first + uint32(i))])

    @cuda.jit(device=True, inline="always")
    def store_run(dst, first, vals, o):
        if WIDE16:
            for k in range(CHUNKS):
                v = o + k * CHUNK
                if V4:
                    store_u32x4(dst, uint32(first + uint32(k * CHUNK)), pack(vals[v], vals[v + 1]),
                                pack(vals[v + 2], vals[v + 3]), pack(vals[v + 4], vals[v + 5]),
                                pack(vals[v + 6], vals[v + 7]))
                else:
                    store_u32x2(dst, uint32(first + uint32(k * CHUNK)), pack(vals[v], vals[v + 1]),
                                pack(vals[v + 2], vals[v + 3]))
        elif VEC4:
            for k in range(QUADS):
                store_f32x4(dst, uint32(first + uint32(4 * k)), vals[o + 4 * k],
                            vals[o + 4 * k + 1], vals[o + 4 * k + 2], vals[o + 4 * k + 3])
        else:
            for i in range(RUN):
                dst[uint32(first + uint32(i))] = store(vals[o + i])

    # ex: begin rope_rows
    @cuda.jit(device=True, inline="always")
    def body(q_in, q_out, k_in, k_out, positions, table, errors, heads_q, heads_qk, q_in_row,
             q_out_row, k_in_row, k_out_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale):
        # x: the lanes of a token row (all its heads); y: the token.  No division by a runtime
        # number: G (lanes per head) is a compile-time constant.
        t = uint32(uint32(cuda.blockIdx.y) * uint32(cuda.blockDim.x) + uint32(cuda.threadIdx.x))
        token = uint32(uint32(cuda.blockIdx.x) * uint32(cuda.blockDim.y) + uint32(cuda.threadIdx.y))
        group = uint32(t // uint32(G))
        sub = uint32(t - uint32(group * uint32(G)))  # lane within its head
        head0 = uint32(group * uint32(R))
        if head0 >= heads_qk or token >= uint32(positions.shape[0]):
            return
        # Where the lane's two runs start in a head, and whether it rotates at all.
        if INTERLEAVE:
            off0 = uint32(sub * uint32(LANE))
            off1 = uint32(off0 + uint32(RUN))
            rotating = FULL or off0 < uint32(n_pairs + n_pairs)
        elif sub < rot_lanes:
            off0 = uint32(sub * uint32(RUN))
            off1 = uint32(off0 + n_pairs)
            rotating = True
        else:  # NeoX pass-through dims past rotary_dim
            off0 = uint32(uint32(n_pairs + n_pairs) + uint32(sub - rot_lanes) * uint32(LANE))
            off1 = uint32(off0 + uint32(RUN))
            rotating = False
        if not rotating and not COPY:
            return  # in place: nothing to move
        vals = cuda.local.array(SLOTS, float32)

        # Phase 1: every load of every head this lane works on.
        last = uint32(heads_qk - uint32(1))
        for r in range(R):
            head = uint32(head0 + uint32(r))
            src = head if head < heads_qk else last
            if src < heads_q:
                first = uint32(token * q_in_row + src * uint32(HEAD))
                load_run(q_in, uint32(first + off0), vals, r * LANE)
                load_run(q_in, uint32(first + off1), vals, r * LANE + RUN)
            else:
                first = uint32(token * k_in_row + uint32(src - heads_q) * uint32(HEAD))
                load_run(k_in, uint32(first + off0), vals, r * LANE)
                load_run(k_in, uint32(first + off1), vals, r * LANE + RUN)

        # Phase 2: cos/sin of the lane's pairs, once for all its heads.  Pair j of the lane is
        # pair sub * RUN + j of the head in both layouts.
        p = positions[token]
        in_range = True
        if rotating:
            cs = cuda.local.array(RUN, float32)
            sn = cuda.local.array(RUN, float32)
            pos = float32(p)
            prow = uint32(0)
            if CACHE:
                # A negative position wraps to a huge unsigned row: one compare checks both ends.
                prow = uint32(p)
                in_range = prow < cache_rows
                if not in_range:
                    prow = uint32(0)  # read a valid row; the pairs are written as NaN below
            if FREQ4:
                for q4 in range(RUN // 4):
                    f0, f1, f2, f3 = load_f32x4(table, uint32(sub * uint32(RUN) + uint32(4 * q4)))
                    freqs = (f0, f1, f2, f3)
                    for m in range(4):
                        angle = pos * freqs[m]
                        cs[4 * q4 + m] = math.cos(angle) * cos_scale
                        sn[4 * q4 + m] = math.sin(angle) * sin_scale
            for j in range(0 if FREQ4 else RUN):
                pair = uint32(sub * uint32(RUN) + uint32(j))
                cs[j] = float32(1.0)
                sn[j] = float32(0.0)
                if FULL or pair < n_pairs:
                    if CACHE:
                        row = uint32(prow * uint32(n_pairs + n_pairs))
                        cs[j] = table[uint32(row + pair)] * cos_scale
                        sn[j] = table[uint32(row + n_pairs + pair)] * sin_scale
                    else:
                        angle = pos * table[pair]
                        cs[j] = math.cos(angle) * cos_scale
                        sn[j] = math.sin(angle) * sin_scale
            for r in range(R):
                for j in range(RUN):
                    if INTERLEAVE:
                        a = r * LANE + 2 * j
                        b = a + 1
                    else:
                        a = r * LANE + j
                        b = a + RUN
                    x0 = vals[a]
                    x1 = vals[b]
                    if FULL or uint32(sub * uint32(RUN) + uint32(j)) < n_pairs:
                        # A select, not a branch: an out-of-range position poisons the pair.
                        vals[a] = (x0 * cs[j] - x1 * sn[j]) if in_range else NAN
                        vals[b] = (x0 * sn[j] + x1 * cs[j]) if in_range else NAN
            if CACHE:
                if not in_range and sub == uint32(0) and head0 == uint32(0):
                    errors[0] = p

        # Phase 3: stores, for the heads that exist.
        for r in range(R):
            head = uint32(head0 + uint32(r))
            if head < heads_qk:
                if head < heads_q:
                    first = uint32(token * q_out_row + head * uint32(HEAD))
                    store_run(q_out, uint32(first + off0), vals, r * LANE)
                    store_run(q_out, uint32(first + off1), vals, r * LANE + RUN)
                else:
                    first = uint32(token * k_out_row + uint32(head - heads_q) * uint32(HEAD))
                    store_run(k_out, uint32(first + off0), vals, r * LANE)
                    store_run(k_out, uint32(first + off1), vals, r * LANE + RUN)
    # ex: end rope_rows

    # The entry points differ only in which arrays the caller passes; ``errors`` is the device
    # error word with a cache, else ``positions`` stands in for it and is never written.
    if pair and CACHE:
        def rope_rows(q, k, positions, cos_sin, errors, heads_q, heads_qk, q_row, k_row,
                      rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale):
            body(q, q, k, k, positions, cos_sin, errors, heads_q, heads_qk, q_row, q_row, k_row,
                 k_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)
    elif pair:
        def rope_rows(q, k, positions, inv_freq, heads_q, heads_qk, q_row, k_row, rot_lanes,
                      n_pairs, cache_rows, cos_scale, sin_scale):
            body(q, q, k, k, positions, inv_freq, positions, heads_q, heads_qk, q_row, q_row,
                 k_row, k_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)
    elif CACHE:
        def rope_rows(x, out, positions, cos_sin, errors, heads_q, heads_qk, x_row, out_row,
                      rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale):
            body(x, out, x, out, positions, cos_sin, errors, heads_q, heads_qk, x_row, out_row,
                 x_row, out_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)
    else:
        def rope_rows(x, out, positions, inv_freq, heads_q, heads_qk, x_row, out_row, rot_lanes,
                      n_pairs, cache_rows, cos_scale, sin_scale):
            body(x, out, x, out, positions, inv_freq, positions, heads_q, heads_qk, x_row,
                 out_row, x_row, out_row, rot_lanes, n_pairs, cache_rows, cos_scale, sin_scale)

    rope_rows.__qualname__ = (
        f"rope_rows_d{head_dim}_{'gptj' if interleave else 'neox'}_{storage}_r{RUN}"
        f"{f'_v{vector_bytes * 8}' if vector_bytes else ''}_h{R}{'_full' if FULL else ''}"
        f"{'_cache' if CACHE else ''}{'_inplace' if in_place else ''}{'_qk' if pair else ''}")
    return rope_rows


# The kernel the course shows: bfloat16 GPT-J, head_dim 128, q and k in one launch.
KERNEL = make_kernel(128, True, "bfloat16", 8, 16, 2, False, True, True, True)


# ---- host side ---------------------------------------------------------------------------------

@lru_cache(maxsize=16)
def freq_table(freq_bytes: bytes) -> np.ndarray:
    """float32 frequencies, one array per distinct set (so the device copy is made once)."""
    return np.frombuffer(freq_bytes, dtype=np.float64).astype(np.float32)


def cos_sin_cache(freqs, max_positions: int) -> np.ndarray:
    """float32 ``[max_positions, 2 * len(freqs)]``: cos half then sin half, built in float64.

    The layout vLLM, SGLang and FlashInfer use for their ``cos_sin_cache``.
    """
    cos, sin = _cos_sin_halves(freqs, max_positions)
    return np.concatenate([cos, sin], axis=1)


@lru_cache(maxsize=4)
def built_cache(freq_bytes: bytes, max_positions: int) -> np.ndarray:
    """:func:`cos_sin_cache` flattened, one array per (frequencies, length), uploaded once."""
    return cos_sin_cache(np.frombuffer(freq_bytes, dtype=np.float64), max_positions).reshape(-1)


OPTIONS = {"heads_per_thread": None, "run": None, "cache": False, "max_positions": None,
           "user_cache_rows": None}


def launch_config(problem, run: int, heads_per_thread: int):
    """``((token_blocks, row_blocks), (threads_x, tokens_per_block))``: blocks of about
    ``BLOCK_THREADS`` threads, several tokens per block when a token row is short."""
    lanes = problem.head_dim // (2 * run)
    groups = -(-(problem.heads_q + problem.heads_k) // heads_per_thread)
    row_threads = groups * lanes
    bx = min(-(-row_threads // 32) * 32, BLOCK_THREADS)
    ty = max(1, min(BLOCK_THREADS // bx, problem.tokens))
    return (-(-problem.tokens // ty), -(-row_threads // bx)), (bx, ty)


def caller_dtypes(problem, user_cache: bool) -> tuple:
    dt = STORAGES[problem.storage]
    arrays = (dt, dt, np.dtype(np.int32))
    return arrays + ((np.dtype(np.float32),) if user_cache else ())


def plan(problem: RowsProblem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    """``aligned``: every array starts on a 16-byte boundary and every row stride is a multiple
    of 16 bytes.  ``options["user_cache_rows"]``: the caller passes a cos/sin cache of that many
    rows as its last array; ``cache=True, max_positions=N``: the host builds one."""
    hpt = options.get("heads_per_thread")
    hpt = HEADS_PER_THREAD[problem.storage] if hpt is None else check_int("heads_per_thread", hpt)
    if hpt not in HEADS_PER_THREAD_CHOICES:
        fail(f"heads_per_thread must be one of {HEADS_PER_THREAD_CHOICES}, got {hpt}")
    run, width = pick_run(problem, aligned, options.get("run"))
    user_rows = options.get("user_cache_rows")
    max_positions = None
    if options.get("cache"):
        max_positions = check_int("max_positions", options.get("max_positions"), minimum=1)
        if max_positions * problem.n_pairs > MAX_CACHE_ENTRIES:
            fail(f"a cos/sin cache of {max_positions} x {problem.n_pairs} entries exceeds "
                 f"{MAX_CACHE_ENTRIES}")
    use_cache = user_rows is not None or max_positions is not None
    grid, block = launch_config(problem, run, hpt)
    full = problem.rotary_dim == problem.head_dim
    fn = make_kernel(problem.head_dim, problem.interleave, problem.storage, run, width, hpt,
                     use_cache, full, problem.in_place or problem.pair, problem.pair)
    af = problem.attention_factor
    rows = user_rows if user_rows is not None else (max_positions or 0)
    u = np.uint32
    if problem.pair:
        strides = (u(problem.q_in_row), u(problem.k_in_row))
    else:
        strides = (u(problem.q_in_row), u(problem.q_out_row))
    scalars = (u(problem.heads_q), u(problem.heads_q + problem.heads_k), *strides,
               u(problem.n_pairs // run if not problem.interleave else 0), u(problem.n_pairs),
               u(rows), np.float32(af), np.float32(-af if problem.inverse else af))
    caller = caller_dtypes(problem, user_rows is not None)
    if user_rows is not None:
        return Plan(fn, fastmath, grid, block, caller, scalars=scalars, errors=True,
                    position_limit=user_rows,
                    limit_reason=f"cos_sin_cache has rows for positions 0 .. {user_rows - 1}")
    freq_bytes = problem.freqs.tobytes()
    if max_positions is not None:
        return Plan(fn, fastmath, grid, block, caller,
                    tables=(built_cache(freq_bytes, max_positions),), scalars=scalars,
                    errors=True, position_limit=max_positions,
                    limit_reason=f"the cos/sin cache holds positions 0 .. {max_positions - 1} "
                                 f"(max_positions={max_positions})")
    return Plan(fn, fastmath, grid, block, caller, tables=(freq_table(freq_bytes),),
                scalars=scalars)


def census_plans() -> list[Plan]:
    """What the PTX census compiles, at head_dim 128: bfloat16 and float16 q+k in both layouts
    (the model case), bfloat16 x -> out, a user cache, and float32."""
    out = []
    for storage, inter, pair, extra in (
            ("bfloat16", True, True, {}), ("bfloat16", False, True, {}),
            ("float16", True, True, {}), ("bfloat16", True, False, {}),
            ("bfloat16", False, True, {"user_cache_rows": 16}), ("float32", True, False, {})):
        p = RowsProblem(1, 2, 1 if pair else 0, 128, 128, inter, storage, 256, 256, 128, 128,
                        in_place=pair, pair=pair, freqs=np.ones(64))
        out.append(plan(p, extra))
    return out


VARIANT = Variant(NAME, SUMMARY, frozenset(), plan, KERNEL, options=OPTIONS, census=census_plans)
