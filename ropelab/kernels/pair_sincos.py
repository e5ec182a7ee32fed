"""Variant 5, ``pair_sincos``: several pairs per thread, one ``pow`` per thread, one sin/cos per pair.

The idea of SGLang PR 21654 (fused QK-RMSNorm + RoPE), reimplemented from its description:
both elements of a pair rotate by the same angle, so sin/cos is evaluated once per pair and
shared; and since the default frequencies form a geometric sequence,
``f_{j+S} = f_j * base ** (-2 S / rotary_dim)`` for any distance ``S``, a thread that owns
``chunk`` pairs ``S`` apart computes the first frequency with one ``pow`` and reaches the others
with one multiply each by the constant ``ratio ** S`` (evaluated on the host in float64).

Each multiply rounds, so the recurrence drifts from the ``pow``-per-pair value by up to about
``k`` float32 roundings after ``k`` steps (``k < chunk``); :func:`ropelab.measure.precision.freq_drift`
measures that drift on a GPU (the ``freq_drift`` record under ``data/``) for several chunk
lengths, with the kernel's own stride.

Scaling schemes:

* none, linear, NTK keep the sequence geometric (linear multiplies every frequency by
  ``1 / factor``; NTK changes the base), so the recurrence is exact in exact arithmetic.
* YaRN and Llama 3.1 are not geometric: each blends the geometric frequency ``f`` with
  ``f / factor`` by a weight ``w`` clamped to ``[0, 1]``, ``f' = f - f * w * (1 - 1/factor)``.
  The kernel keeps the geometric recurrence and applies that blend per pair, as SGLang's
  kernel does for YaRN: YaRN's weight is a linear ramp over the pair index, Llama 3.1's a
  linear ramp over the frequency itself (``w = clamp((high_freq_factor - L0 f / 2 pi) /
  (high_freq_factor - low_freq_factor))``, which reproduces its three wavelength bands).  No
  table, no memory traffic for frequencies.  :func:`prepare` checks on the host, in float64, that
  these parameters give back exactly the frequencies of :mod:`ropelab.scaling`.

Threads: ``S = ceil(head_dim / 2 / chunk)`` threads per head (``head_dim / 2`` slots a head);
thread ``t`` of a head owns slots ``t, t + S, t + 2 S, ...`` (at most ``chunk`` of them), not
``chunk`` consecutive ones: at every step neighbouring lanes then read and write neighbouring
pairs, so each load and store instruction of a warp is coalesced.  (With consecutive slots per
thread the lanes were ``8 * chunk`` bytes apart and every instruction touched ``chunk`` times
more memory sectors than it used.)  Slots past the rotated pairs copy the partial-rotary
pass-through, as in ``freq_table``.

Storage: float32, float16 or bfloat16 (uint16 bits) for ``x`` and ``out``, one build each
(:func:`make_kernel`).  A 16-bit element widens to float32 on the load and rounds to nearest even
on the store, so the math is the float32 kernel's; a 16-bit GPT-J pair on aligned arrays moves
as one 32-bit word (:func:`pair_access`).

Precision: the angle is a float32 product as in ``flat``; for positions in the tens of thousands
use ``freq_table`` with ``cache=True`` or ``reduce_angle=True`` (see :mod:`ropelab.measure.precision`).
"""

import math
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
from numba import cuda, float32, uint64

from .. import scaling
from ..freqs import ntk_base, yarn_ramp_bounds
from ..errors import RopeInputError
from ..problem import HEADS, INVERSE, NEOX, PARTIAL, SCALED
from ..validate import check_int
from ._device import quotient, rotate, shift_for
from .plan import Plan, Variant, blocks_for, census_problem, rope_arrays
from .vec import load_u32, store_u32
from .words16 import CODECS, ELEMENT_CODECS

NAME = "pair_sincos"
SUMMARY = ("chunk of pairs per thread, strided for coalescing: one pow + ratio recurrence, one sin/cos "
           "per pair; YaRN/Llama3 blend in-kernel")
FEATURES = frozenset({HEADS, PARTIAL, NEOX, INVERSE, SCALED})
THREADS = 128
PAIRS_PER_THREAD = 4
MAX_PAIRS_PER_THREAD = 64
STORAGES = frozenset({"float32", "float16", "bfloat16"})  # x and out; the math is float32

RAMP_NONE, RAMP_ON_INDEX, RAMP_ON_FREQ = 0, 1, 2


# ex: begin first_freq
@cuda.jit(device=True, inline="always")
def first_freq(freq_scale, freq_base, exponent_step, j):
    """``freq_scale * freq_base ** (exponent_step * j)``: the one pow of a thread."""
    return freq_scale * math.pow(freq_base, exponent_step * float32(j))
# ex: end first_freq


# ex: begin blended
@cuda.jit(device=True, inline="always")
def blended(f, j, ramp_mode, ramp_a, ramp_b, shrink):
    """YaRN / Llama 3.1: move ``f`` towards ``f / factor`` by the clamped ramp weight."""
    if ramp_mode == RAMP_NONE:
        return f
    arg = float32(j) if ramp_mode == RAMP_ON_INDEX else f
    w = min(max(ramp_a * arg + ramp_b, float32(0.0)), float32(1.0))
    return f - f * w * shrink
# ex: end blended


def pair_access(storage: str, word_pairs: bool):
    """``(load2(x, a, partner) -> 2 float32, store2(out, a, partner, r0, r1))``: one pair.

    Per element by default (float32 passes through; 16-bit widens, and rounds on the store).
    ``word_pairs``: a 16-bit GPT-J pair is the two halves of one aligned 32-bit word, moved
    with one access each way instead of two.
    """
    if word_pairs:
        low, high, pack = CODECS[storage]

        @cuda.jit(device=True, inline="always")
        def load2(x, a, partner):
            w = load_u32(x, a)  # element a in the low half
            return low(w), high(w)

        @cuda.jit(device=True, inline="always")
        def store2(out, a, partner, r0, r1):
            store_u32(out, a, pack(r0, r1))

        return load2, store2
    load, store = ELEMENT_CODECS[storage]

    @cuda.jit(device=True, inline="always")
    def load2(x, a, partner):
        return load(x[a]), load(x[a + partner])

    @cuda.jit(device=True, inline="always")
    def store2(out, a, partner, r0, r1):
        out[a] = store(r0)
        out[a + partner] = store(r1)

    return load2, store2


def make_kernel(storage: str = "float32", word_pairs: bool = False):
    """The kernel for ``storage`` (one build per distinct argument pair; see :func:`_build`)."""
    return _build(storage, bool(word_pairs))


@cache
def _build(storage: str, word_pairs: bool):
    """The kernel for one storage: ``float32``, ``float16`` or ``bfloat16`` (uint16 bits).

    Loads widen to float32 and stores round to the storage (nearest even), so the math is the
    float32 kernel's; the float32 build passes elements through unchanged (same PTX as before
    16-bit storage existed).  The pass-through tail copies elements as they are.
    ``word_pairs`` (16-bit GPT-J, 4-byte aligned arrays): see :func:`pair_access`.
    """
    load2, store2 = pair_access(storage, word_pairs)

    # ex: begin rope_pair_sincos
    def rope_pair_sincos(x, out, positions, heads, heads_shift, half_dim, n_pairs, stride,
                         stride_shift, total_threads, step, partner, freq_scale, freq_base,
                         exponent_step, stride_ratio, ramp_mode, ramp_a, ramp_b, shrink,
                         cos_scale, sin_scale):
        idx = cuda.grid(1)
        if idx < total_threads:
            # Unsigned index math, as in flat.py: C-style division (or a shift, see quotient) and
            # no negative-index wrap-around on every x[a].  Every integer argument is a uint64.
            i = uint64(idx)
            head_row = quotient(i, stride, stride_shift)  # token * heads + head
            # ``stride`` threads share a head; this one owns slots j, j + stride, j + 2 stride,
            # ...  At every step the lanes of a warp touch neighbouring pairs, so each load and
            # store instruction is coalesced (a thread owning consecutive pairs put the lanes
            # 8 * chunk bytes apart).  The frequency still costs one pow per thread: slot
            # j + stride has frequency f_j * ratio ** stride, which the host passes as
            # stride_ratio.
            j = i - head_row * stride
            row = head_row * half_dim
            first = row + row  # the head's first element
            pos = float32(positions[quotient(head_row, heads, heads_shift)])
            f = first_freq(freq_scale, freq_base, exponent_step, j)
            a = first + j * step
            a_step = stride * step  # the element distance between two slots of this thread
            x0 = float32(0.0)
            x1 = float32(0.0)
            if j < n_pairs:
                x0, x1 = load2(x, a, partner)
            while j < n_pairs:
                j_next = j + stride
                a_next = a + a_step
                # Load the next step's pair before this step's math: two pairs in flight per
                # thread instead of one, more bytes requested while the first ones travel.
                n0 = x0
                n1 = x1
                if j_next < n_pairs:
                    n0, n1 = load2(x, a_next, partner)
                angle = pos * blended(f, j, ramp_mode, ramp_a, ramp_b, shrink)
                c = math.cos(angle)  # once per pair, used by both of its elements
                s = math.sin(angle)
                r0, r1 = rotate(x0, x1, c * cos_scale, s * sin_scale)
                store2(out, a, partner, r0, r1)  # rounds to the storage (float32: as is)
                f = f * stride_ratio  # the frequency of slot j + stride, without a pow
                x0 = n0
                x1 = n1
                j = j_next
                a = a_next
            while j < half_dim:  # pass-through tail of a partial rotation
                a = first + j + j
                out[a] = x[a]
                out[a + uint64(1)] = x[a + uint64(1)]
                j += stride
    # ex: end rope_pair_sincos

    # One census row per build; the float32 build keeps the course's name.
    name = "rope_pair_sincos" + ("" if storage == "float32" else f"_{storage}") + \
        ("_words" if word_pairs else "")
    rope_pair_sincos.__name__ = rope_pair_sincos.__qualname__ = name
    return rope_pair_sincos


rope_pair_sincos = make_kernel("float32")


def freq_drift_kernel(pow_out, rec_out, n_pairs, stride, freq_scale, freq_base, exponent_step,
                      stride_ratio):
    """Frequency of every pair two ways, with the arithmetic of :func:`rope_pair_sincos`.

    ``pow_out[j]``: one ``pow`` for pair ``j``.  ``rec_out[j]``: what the kernel uses, i.e.
    ``pow`` for the thread's first slot ``j % stride``, then ``j // stride`` multiplications
    by ``stride_ratio`` (see :func:`drift_args` for the arguments of a given chunk length).
    """
    j = cuda.grid(1)
    if j < n_pairs:
        pow_out[j] = first_freq(freq_scale, freq_base, exponent_step, j)
        u = uint64(j)
        steps = u // stride
        f = first_freq(freq_scale, freq_base, exponent_step, u - steps * stride)
        for _ in range(steps):
            f = f * stride_ratio
        rec_out[j] = f


KERNEL = rope_pair_sincos
DRIFT_KERNEL = freq_drift_kernel


# --------------------------------------------------------------------------------------------
# Host side
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FreqParams:
    """The in-kernel frequency formula, in float64 (cast to float32 at launch).

    ``f_j = freq_scale * freq_base ** (exponent_step * j)``, then the blend of :func:`blended`.
    """

    freq_scale: float
    freq_base: float
    exponent_step: float
    ramp_mode: int = RAMP_NONE
    ramp_a: float = 0.0
    ramp_b: float = 0.0
    shrink: float = 0.0

    @property
    def ratio(self) -> float:
        return self.freq_base ** self.exponent_step

    def freqs(self, n_pairs: int) -> np.ndarray:
        """What the kernel computes, evaluated in float64 (for checks and the drift study)."""
        j = np.arange(n_pairs, dtype=np.float64)
        f = self.freq_scale * self.freq_base ** (self.exponent_step * j)
        if self.ramp_mode == RAMP_NONE:
            return f
        arg = j if self.ramp_mode == RAMP_ON_INDEX else f
        w = np.clip(self.ramp_a * arg + self.ramp_b, 0.0, 1.0)
        return f - f * w * self.shrink

    def stride_ratio(self, stride: int) -> float:
        """``f_{j + stride} / f_j`` of the geometric part: ``ratio ** stride``, in float64."""
        return self.freq_base ** (self.exponent_step * stride)

    def kernel_args(self, stride: int = 1) -> tuple:
        """The float32 formula arguments, the recurrence advancing ``stride`` pairs a step.

        ``stride_ratio`` is evaluated in float64 and rounded once, so a step adds the same
        single rounding as a step of the per-pair ``ratio`` would.
        """
        f32 = np.float32  # the type numba's float32(...) returns on the host, built faster
        return (f32(self.freq_scale), f32(self.freq_base), f32(self.exponent_step),
                f32(self.stride_ratio(stride)), np.int64(self.ramp_mode), f32(self.ramp_a), f32(self.ramp_b),
                f32(self.shrink))


def freq_params(scheme, rotary_dim: int, base: float) -> FreqParams:
    """Kernel parameters that reproduce ``scheme``'s frequencies (``scheme`` None: unscaled)."""
    step = -2.0 / rotary_dim
    if scheme is None:
        return FreqParams(1.0, base, step)
    if isinstance(scheme, scaling.Linear):
        return FreqParams(1.0 / scheme.factor, base, step)
    if isinstance(scheme, scaling.NTK):
        return FreqParams(1.0, ntk_base(rotary_dim, base, scheme.factor), step)
    shrink = 1.0 - 1.0 / scheme.factor
    if isinstance(scheme, scaling.YaRN):
        low, high = yarn_ramp_bounds(*scheme.ramp(rotary_dim, base))
        return FreqParams(1.0, base, step, RAMP_ON_INDEX, 1.0 / (high - low), -low / (high - low), shrink)
    if isinstance(scheme, scaling.Llama3):
        span = scheme.high_freq_factor - scheme.low_freq_factor
        return FreqParams(1.0, base, step, RAMP_ON_FREQ,
                          -scheme.original_max_positions / (2 * math.pi * span),
                          scheme.high_freq_factor / span, shrink)
    raise RopeInputError(f"pair_sincos has no in-kernel formula for {scheme!r}")


OPTIONS = {"pairs_per_thread": PAIRS_PER_THREAD}


def formula_for(problem) -> FreqParams:
    """The in-kernel frequency formula for ``problem``, proven equal to its frequencies."""
    params = freq_params(scaling.parse(problem.scaling), problem.rotary_dim, problem.base)
    # The kernel evaluates a formula, not the table the reference uses: prove they agree.
    if not np.allclose(params.freqs(problem.n_pairs), problem.inv_freq, rtol=1e-9, atol=0.0):
        raise RuntimeError(f"pair_sincos: in-kernel frequencies disagree with {problem.scaling!r}")
    return params


# Keyword options `python -m ropelab check` runs besides the defaults.
CHECK_OPTIONS = (dict(pairs_per_thread=3),)


def threads_per_head(half_dim: int, chunk: int) -> int:
    """Threads sharing one head of ``half_dim`` slots, ``chunk`` slots each (the last fewer).

    It is also the distance between two slots of one thread (see :func:`rope_pair_sincos`).
    """
    return -(-half_dim // chunk)


def drift_args(params: FreqParams, n_pairs: int, chunk: int) -> tuple:
    """Arguments of ``DRIFT_KERNEL`` after ``n_pairs`` for a fully rotated head of ``n_pairs``
    pairs and ``chunk`` pairs per thread: ``(stride, freq_scale, freq_base, exponent_step,
    stride_ratio)``.  Pair ``j`` then takes ``j // stride`` recurrence steps, as in the kernel.
    """
    stride = threads_per_head(n_pairs, chunk)
    return (np.uint64(stride),) + params.kernel_args(stride)[:4]


def launch_config(problem, threads_per_block=None, chunk=PAIRS_PER_THREAD):
    """(blocks, threads): ``threads_per_head`` threads for each (token, head)."""
    threads = threads_per_block or THREADS
    per_head = threads_per_head(problem.head_dim // 2, chunk)
    return blocks_for(problem.tokens * problem.heads * per_head, threads), threads


def launch_args(problem, chunk: int, params: FreqParams) -> tuple:
    """The kernel's arguments after ``(x, out, positions)``, in order, typed as the kernel wants.

    Index arguments are unsigned 64-bit so the kernel's index math stays unsigned (a Python int
    types as int64, and int64 mixed with uint64 computes in float64); ``total_threads`` stays
    int64 because it is compared with the signed ``cuda.grid(1)``.
    """
    half_dim = problem.head_dim // 2
    stride = threads_per_head(half_dim, chunk)
    step, partner = (2, 1) if problem.interleave else (1, problem.n_pairs)
    af = problem.attention_factor
    u = np.uint64
    return (u(problem.heads), u(shift_for(problem.heads)), u(half_dim), u(problem.n_pairs),
            u(stride), u(shift_for(stride)), np.int64(problem.tokens * problem.heads * stride),
            u(step), u(partner), *params.kernel_args(stride), np.float32(af),
            np.float32(-af if problem.inverse else af))


def plan(problem, options, *, fastmath=True, threads=None, aligned=True) -> Plan:
    chunk = check_int("pairs_per_thread", options.get("pairs_per_thread", PAIRS_PER_THREAD),
                      minimum=1, maximum=MAX_PAIRS_PER_THREAD)
    blocks, threads = launch_config(problem, threads, chunk)
    # A 16-bit GPT-J pair is one 32-bit word: a word access needs 4-byte aligned arrays (the
    # op's ``aligned`` says 16) and a head that starts on an even element (head_dim is even).
    words = problem.storage != "float32" and problem.interleave and aligned
    return Plan(make_kernel(problem.storage, words), fastmath, blocks, threads,
                rope_arrays(problem.storage),
                scalars=launch_args(problem, chunk, formula_for(problem)))


def census_plans() -> list[Plan]:
    """The census's builds: float32 (the default problem, as before 16-bit storage), then each
    16-bit storage in GPT-J (word pairs) and NeoX (per element)."""
    problem = census_problem(FEATURES)
    plans = [plan(problem, {})]
    for storage in ("float16", "bfloat16"):
        for interleave in (True, False):
            plans.append(plan(replace(problem, storage=storage, interleave=interleave), {}))
    return plans


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL, options=OPTIONS,
                  check_cases=CHECK_OPTIONS, storages=STORAGES, census=census_plans)
