"""The grader on kernels written as a learner writes them, both ways: the right ones pass, each
wrong kind fails with the message that names its cause.

``PROBES`` is the probe set: one entry per kernel (a notebook cell's source, the step it is
graded against, the status and the words the verdict must hold).  A new probe, an independent
learner's kernel say, is one more entry.  Probes are graded without the census (the step's
``signature`` dropped: no compile) unless an entry asks for it, so the list stays cheap; the
census gates have their own entries with ``census=True`` (served from the committed cache for
the recorded kernels, compiled once per fresh cache otherwise).

Also here, below the probes: the shims' rules one at a time (atomics in the race detector, the
argument types of a launch, the float64 finder's words).  Budget: a few seconds.
"""

import linecache
import textwrap
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab.grader import grading, recording, steps, widening
from ropelab.sim import shared_race

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="simulator grader")

_count = [0]
_HEADER = ("import math\nimport numpy as np\nfrom numba import cuda, float32, int32, int64, "
           "uint32, uint64\n")


def define(source: str, name: str, **names):
    """Define ``name`` from source text as a notebook cell does (source kept in linecache)."""
    _count[0] += 1
    filename = f"<probe cell {_count[0]}>"
    text = _HEADER + textwrap.dedent(source)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace = {"__name__": "__main__", **names}
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102  (the test's own source)
    return namespace[name]


@dataclass
class Probe:
    step: str  # the step id graded against
    name: str  # the function the source defines
    source: str
    status: str  # "PASS", "wrong", "barrier divergence", "race", "error", "not solved yet"
    fragments: list = field(default_factory=list)  # words the verdict must contain
    census: bool = False  # grade with the step's census gates (compiles on a cold cache)
    uses: tuple = ()  # (global name, step id, name): probes whose function this one calls

    @property
    def id(self) -> str:
        return f"{self.step}-{self.name}"


PROBES = [
    # --- barriers: every thread of the block reaches each one --------------------------------
    Probe("04.2", "barrier_in_guard", """
        @cuda.jit(fastmath=True)
        def barrier_in_guard(x, out, positions, inv_freq, n_pairs, total_pairs):
            table = cuda.shared.array(128, float32)
            idx = cuda.grid(1)
            if idx < total_pairs:
                k = uint64(cuda.threadIdx.x)
                while k < n_pairs:
                    table[k] = inv_freq[k]
                    k += uint64(cuda.blockDim.x)
                cuda.syncthreads()
                i = uint64(idx)
                token = i // n_pairs
                pair = i - token * n_pairs
                angle = float32(positions[token]) * table[pair]
                c = math.cos(angle)
                s = math.sin(angle)
                out[i + i] = x[i + i] * c - x[i + i + uint64(1)] * s
                out[i + i + uint64(1)] = x[i + i] * s + x[i + i + uint64(1)] * c
        """, "barrier divergence", ["thread 0 waits at the cuda.syncthreads() on line",
                                    "of barrier_in_guard (`cuda.syncthreads()`)",
                                    "threads 1-63 returned without reaching it"]),
    Probe("04.2", "barrier_after_guarded_copy", """
        @cuda.jit(fastmath=True)
        def barrier_after_guarded_copy(x, out, positions, inv_freq, n_pairs, total_pairs):
            table = cuda.shared.array(128, float32)
            t = cuda.threadIdx.x
            for k in range(t, 128, cuda.blockDim.x):
                if k < n_pairs:
                    table[k] = inv_freq[k]
            cuda.syncthreads()
            idx = cuda.grid(1)
            if idx < total_pairs:
                i = uint64(idx)
                token = i // n_pairs
                pair = i - token * n_pairs
                angle = float32(positions[token]) * table[pair]
                c = math.cos(angle)
                s = math.sin(angle)
                out[i + i] = x[i + i] * c - x[i + i + uint64(1)] * s
                out[i + i + uint64(1)] = x[i + i] * s + x[i + i + uint64(1)] * c
        """, "PASS"),
    Probe("06.2", "barrier_per_branch", """
        @cuda.jit(fastmath=True)
        def barrier_per_branch(x, out, weight, rows, eps):
            partial = cuda.shared.array(4, float32)
            t = cuda.threadIdx.x
            first = cuda.blockIdx.x * 256 + t * 2
            a = x[first]
            b = x[first + 1]
            ss = a * a + b * b
            for m in (16, 8, 4, 2, 1):
                ss += cuda.shfl_xor_sync(0xFFFFFFFF, ss, m)
            if t % 32 == 0:
                partial[t // 32] = ss
                cuda.syncthreads()
            else:
                cuda.syncthreads()
            total = partial[0] + partial[1] + partial[2] + partial[3]
            scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
            out[first] = a * scale * weight[t * 2]
            out[first + 1] = b * scale * weight[t * 2 + 1]
        """, "barrier divergence", ["the threads wait at different barriers",
                                    "threads 0, 32, 64, 96 at the cuda.syncthreads() on line",
                                    "threads 1-31, 33-63, 65-95, 97-127 at the"]),
    Probe("08.3", "extra_barrier_thread_0", """
        @cuda.jit(fastmath=True)
        def extra_barrier_thread_0(dz, n, out, rows):
            part = cuda.shared.array(256, float32)
            t = cuda.threadIdx.x
            acc = float32(0.0)
            row = cuda.blockIdx.x * 4 + t // 64
            while row < rows:
                acc += dz[row * 64 + t % 64] * n[row * 64 + t % 64]
                row += 4 * cuda.gridDim.x
            part[t] = acc
            cuda.syncthreads()
            if t == 0:
                cuda.syncthreads()
            if t < 64:
                out[cuda.blockIdx.x * 64 + t] = part[t] + part[t + 64] + part[t + 128] + part[t + 192]
        """, "barrier divergence", ["thread 0 waits at the cuda.syncthreads() on line",
                                    "threads 1-255 returned without reaching it"]),
    # --- atomics on one shared element are ordered; against a plain access they race -----------
    Probe("08.3", "shared_atomics", """
        @cuda.jit(fastmath=True)
        def shared_atomics(dz, n, out, rows):
            part = cuda.shared.array(64, float32)
            t = cuda.threadIdx.x
            if t < 64:
                part[t] = float32(0.0)
            cuda.syncthreads()
            acc = float32(0.0)
            row = cuda.blockIdx.x * 4 + t // 64
            while row < rows:
                acc += dz[row * 64 + t % 64] * n[row * 64 + t % 64]
                row += 4 * cuda.gridDim.x
            cuda.atomic.add(part, t % 64, acc)
            cuda.syncthreads()
            if t < 64:
                out[cuda.blockIdx.x * 64 + t] = part[t]
        """, "PASS"),
    Probe("08.3", "atomics_then_read_unsynced", """
        @cuda.jit(fastmath=True)
        def atomics_then_read_unsynced(dz, n, out, rows):
            part = cuda.shared.array(64, float32)
            t = cuda.threadIdx.x
            if t < 64:
                part[t] = float32(0.0)
            cuda.syncthreads()
            acc = float32(0.0)
            row = cuda.blockIdx.x * 4 + t // 64
            while row < rows:
                acc += dz[row * 64 + t % 64] * n[row * 64 + t % 64]
                row += 4 * cuda.gridDim.x
            cuda.atomic.add(part, t % 64, acc)
            if t < 64:
                out[cuda.blockIdx.x * 64 + t] = part[t]
        """, "race", ["updated it atomically", "with no cuda.syncthreads() between"]),
    # --- thread ownership and reads of the uninitialised output -------------------------------
    Probe("00.5", "pair_per_thread", """
        @cuda.jit(fastmath=True)
        def pair_per_thread(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                p = i // 2
                x0 = x[2 * p]
                x1 = x[2 * p + 1]
                out[2 * p] = x0 * cos_t[p] - x1 * sin_t[p]
                out[2 * p + 1] = x0 * sin_t[p] + x1 * cos_t[p]
        """, "wrong", ["the values are right, but thread 1 of block 0 wrote out[0]",
                       "thread i writes out[i] alone"]),
    Probe("00.1", "accumulates", """
        @cuda.jit
        def accumulates(x, out):
            i = cuda.grid(1)
            out[i] += x[i]
        """, "wrong", ["out is read before it is written", "thread 0 of block 0 read out[0]"]),
    Probe("00.1", "copy", """
        @cuda.jit
        def copy(x, out):
            i = cuda.grid(1)
            out[i] = x[i]
            out[i] = out[i] + float32(0.0)  # reads back its own store: fine
        """, "PASS"),
    # --- launch contracts ----------------------------------------------------------------------
    Probe("00.3", "rotate_pairs", """
        @cuda.jit(fastmath=True)
        def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                x0 = x[2 * p]
                x1 = x[2 * p + 1]
                out[2 * p] = x0 * cos_t[p] - x1 * sin_t[p]
                out[2 * p + 1] = x0 * sin_t[p] + x1 * cos_t[p]
        """, "PASS"),
    Probe("00.4", "launch_one_per_block", """
        def launch_one_per_block(x, out, cos_t, sin_t, n_pairs):
            rotate_pairs[n_pairs, 1](x, out, cos_t, sin_t, n_pairs)
        """, "wrong", ["1 thread per block, not a multiple of 32"],
          uses=(("rotate_pairs", "00.3", "rotate_pairs"),)),
    Probe("00.4", "launch_warps", """
        def launch_warps(x, out, cos_t, sin_t, n_pairs):
            rotate_pairs[(n_pairs + 95) // 96, 96](x, out, cos_t, sin_t, n_pairs)
        """, "PASS", uses=(("rotate_pairs", "00.3", "rotate_pairs"),)),
    Probe("08.4", "launch_four_times_the_cap", """
        def launch_four_times_the_cap(dz, n, out, tokens, heads):
            rows = tokens * heads
            blocks = 4 * ((rows + 3) // 4)
            partials = cuda.device_array(blocks * 64, np.float32)
            dw_partials[blocks, 256](dz, n, partials, rows)
            reduce_partials_kernel[2, REDUCE_THREADS](partials, out)
        """, "wrong", ["more than the step's cap of ceil(rows / 4)"],
          uses=(("dw_partials", "08.3", "shared_atomics"),)),
    Probe("08.4", "launch_without_stage_one", """
        def launch_without_stage_one(dz, n, out, tokens, heads):
            partials = cuda.device_array(64, np.float32)
            reduce_partials_kernel[2, REDUCE_THREADS](partials, out)
        """, "wrong", ["the partial rows reduce_partials_kernel summed were never written"]),
    Probe("04.5", "launch_plain_ints", """
        def launch_plain_ints(x, out, positions, inv_freq, tokens, heads, head_dim, interleave):
            half = head_dim // 2
            n_pairs = inv_freq.size
            total = tokens * heads * half
            step, partner = (2, 1) if interleave else (1, n_pairs)
            freq_heads[(total + 127) // 128, 128](x, out, positions, inv_freq, heads, half,
                                                   n_pairs, total, step, partner)
        """, "error", ["argument 5 (heads) is int64 (a Python int), but the contract wants "
                       "uint64: pass numba.uint64(heads)"],
          uses=(("freq_heads", "04.4", "freq_heads"),)),
    Probe("04.4", "freq_heads", """
        @cuda.jit(fastmath=True)
        def freq_heads(x, out, positions, inv_freq, heads, half_dim, n_pairs, total_slots, step,
                       partner):
            idx = cuda.grid(1)
            if idx < total_slots:
                i = uint64(idx)
                head_row = i // half_dim
                j = i - head_row * half_dim
                first = head_row * (half_dim + half_dim)
                if j < n_pairs:
                    a = first + j * step
                    b = a + partner
                    angle = float32(positions[head_row // heads]) * inv_freq[j]
                    x0 = x[a]
                    x1 = x[b]
                    out[a] = x0 * math.cos(angle) - x1 * math.sin(angle)
                    out[b] = x0 * math.sin(angle) + x1 * math.cos(angle)
                else:
                    a = first + j + j
                    out[a] = x[a]
                    out[a + uint64(1)] = x[a + uint64(1)]
        """, "PASS"),
    # --- census gates, with the operations that widened ----------------------------------------
    # (the code of the recorded attempt of notebooks/solutions/08_backward_pass.py: the committed
    # census and float64 findings serve it, no compile)
    Probe("08.1", "angle_in_float64", """
        @cuda.jit(fastmath=True)
        def angle_in_float64(dy, out, positions, inv_freq, rows):
            lane = cuda.threadIdx.x % 32
            row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
            if row < rows:
                first = row * 64 + lane * 2
                g0 = dy[first]
                g1 = dy[first + 1]
                angle = positions[row] * inv_freq[lane]
                c = math.cos(angle)
                s = math.sin(angle)
                out[first] = g0 * c + g1 * s
                out[first + 1] = -g0 * s + g1 * c
        """, "not solved yet", ["float64 instructions",
                                "positions[row] (int32) * inv_freq[lane] (float32)"],
          census=True),
]

_DEFINED: dict = {}


def _function(probe: Probe):
    key = (probe.step, probe.name)
    if key not in _DEFINED:
        from ropelab.grader.steps.nb08 import REDUCE_THREADS, reduce_partials_kernel

        names = {"REDUCE_THREADS": REDUCE_THREADS, "reduce_partials_kernel": reduce_partials_kernel}
        for alias, step_id, name in probe.uses:
            used = next(p for p in PROBES if (p.step, p.name) == (step_id, name))
            names[alias] = _function(used)
        _DEFINED[key] = define(probe.source, probe.name, **names)
    return _DEFINED[key]


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe_gets_the_verdict_that_names_its_cause(probe):
    step = steps.get(probe.step)
    if not probe.census:  # the run and its judgements only (a launch's argument types too)
        step = replace(step, signature=None, gates=(), counters=())
    verdict = grading.grade(step, _function(probe))
    text = str(verdict)
    assert verdict.status == probe.status, text
    missing = [f for f in probe.fragments if f not in text]
    assert not missing, f"{missing} not in:\n{text}"


# --- the rules one at a time -------------------------------------------------------------------

def _run_watched(kernel, *args, threads=64):
    out = np.zeros(threads, np.float32)
    with shared_race.watching():
        kernel[1, threads](out, *args)
    return out


def test_atomics_of_many_threads_on_one_shared_element_are_no_race():
    @cuda.jit
    def sums(out, values):
        acc = cuda.shared.array(1, np.float32)
        t = cuda.threadIdx.x
        if t == 0:
            acc[0] = 0.0
        cuda.syncthreads()
        cuda.atomic.add(acc, 0, values[t])
        cuda.syncthreads()
        if t == 0:
            out[0] = acc[0]

    values = np.arange(64, dtype=np.float32)
    out = _run_watched(sums, values)
    assert out[0] == values.sum()


def test_an_atomic_and_a_plain_write_in_one_interval_race():
    @cuda.jit
    def mixed(out, values):
        acc = cuda.shared.array(1, np.float32)
        t = cuda.threadIdx.x
        if t == 0:
            acc[0] = 0.0  # no barrier before the others add
        cuda.atomic.add(acc, 0, values[t])
        cuda.syncthreads()
        out[t] = acc[0]

    with pytest.raises(shared_race.SharedMemoryRace, match="atomically|wrote it"):
        _run_watched(mixed, np.ones(64, np.float32))


def test_lanes_of_one_warp_storing_one_value_race_with_the_one_writer_fix_named():
    @cuda.jit
    def every_lane(out, values):
        partial = cuda.shared.array(2, np.float32)
        t = cuda.threadIdx.x
        partial[t // 32] = values[t // 32]  # every lane of a warp stores its warp's value
        cuda.syncthreads()
        out[t] = partial[0] + partial[1]

    @cuda.jit
    def other_values(out, values):
        partial = cuda.shared.array(2, np.float32)
        t = cuda.threadIdx.x
        partial[t // 32] = values[t]  # lanes store different values: a plain race
        cuda.syncthreads()
        out[t] = partial[0] + partial[1]

    with pytest.raises(shared_race.SharedMemoryRace) as same:
        _run_watched(every_lane, np.arange(64, dtype=np.float32))
    assert "same value" in str(same.value) and "if lane == 0" in str(same.value)
    with pytest.raises(shared_race.SharedMemoryRace) as differ:
        _run_watched(other_values, np.arange(64, dtype=np.float32))
    assert "same value" not in str(differ.value)


def test_a_launch_with_another_type_than_the_contract_is_named_before_it_runs():
    @cuda.jit
    def k(out, n, scale):
        pass

    signature = "void(float32[::1], uint64, float32)"
    out = np.zeros(4, np.float32)
    assert recording.argument_problem(k, (out, np.uint64(3), np.float32(1)), signature) is None
    said = recording.argument_problem(k, (out, 3, np.float32(1)), signature)
    assert said == ("argument 2 (n) is int64 (a Python int), but the contract wants uint64: "
                    "pass numba.uint64(n)")
    said = recording.argument_problem(k, (np.zeros(4, np.float64), np.uint64(3),
                                          np.float32(1)), signature)
    assert said.startswith("argument 1 (out) is float64[:], but the contract wants float32[:]")
    assert recording.argument_problem(k, (out, 3), signature).startswith(
        "2 arguments, but the contract has 3")


def test_the_float64_finder_says_which_operands_widened_and_why():
    def operand(words, kind, literal=False, origin=None):
        return {"words": words, "type": kind, "literal": literal, "origin": origin}

    found = [
        {"line": 2, "op": "binop", "symbol": "<", "callee": "",
         "operands": [operand("pair", "int32", origin="cuda.threadIdx.x"),
                      operand("n_pairs", "uint64")]},
        {"line": 3, "op": "binop", "symbol": "*", "callee": "",
         "operands": [operand("x", "float32"), operand("the literal 2.0", "float64", True)]},
        {"line": 4, "op": "binop", "symbol": "/", "callee": "",
         "operands": [operand("a", "int64"), operand("b", "int64")]},
        {"line": 5, "op": "binop", "symbol": "*", "callee": "",
         "operands": [operand("positions[row]", "int32"), operand("f", "float32")]},
    ]

    def kernel(x, pair, n_pairs, a, b, positions, row, f):
        while pair < n_pairs:
            y = x * 2.0
            z = a / b
            w = positions[row] * f
            return y, z, w

    lines = widening.lines_for(kernel, found)
    first = kernel.__code__.co_firstlineno
    assert lines[0].startswith(f"  line {first + 1} `while pair < n_pairs:`: pair (int32, "
                               "cuda.threadIdx.x) < n_pairs (uint64): a signed and an unsigned")
    assert "a bare float literal is a float64" in lines[1]
    assert "an integer divided by an integer" in lines[2]
    assert lines[3] == "  ... and 1 more"  # the first three: what to fix first
    assert "an integer with a float32 gives a float64" in widening.lines_for(kernel, found[3:])[0]


@pytest.mark.parametrize("step", [s for s in steps.STEPS.values() if s.kind == "kernel"],
                         ids=lambda s: s.id)
def test_a_stated_owner_is_a_thread_of_the_grid_for_every_element(step):
    """A step that states who writes what says it for every element of out, and names a thread
    the case launches; a step that states nothing has no owner arrays."""
    for case in step.cases():
        if not step.ownership:
            assert case.owner is None, step.id
            continue
        threads = int(np.prod(case.grid)) * int(np.prod(case.block))
        assert case.owner is not None and case.owner.shape == (case.expected.size,), step.id
        # an element that must stay untouched (NaN expected: a cache slot no token maps to)
        # is nobody's to write
        untouched = np.isnan(case.expected.ravel())
        owned = case.owner[~untouched]
        assert 0 <= owned.min() and owned.max() < threads, (step.id, case.label)
        assert (case.owner[untouched] == -1).all(), (step.id, case.label)


# --- counts per pass: a loop body once, the copies a compiler makes of it once ------------------

_UNSWITCHED = """
	setp.ge.u64 	%p1, %rd1, %rd2;
	@%p1 bra 	$L__BB0_9;
	setp.eq.s64 	%p2, %rd3, 0;
	lg2.approx.ftz.f32 	%f1, %f2;
	@%p2 bra 	$L__BB0_6;
$L__BB0_2:
	div.u64 	%rd4, %rd1, %rd3;
	ex2.approx.ftz.f32 	%f3, %f1;
	cos.approx.ftz.f32 	%f4, %f3;
	sin.approx.ftz.f32 	%f5, %f3;
	@%p3 bra 	$L__BB0_2;
	bra.uni 	$L__BB0_9;
$L__BB0_6:
	ex2.approx.ftz.f32 	%f6, %f1;
	cos.approx.ftz.f32 	%f7, %f6;
	sin.approx.ftz.f32 	%f8, %f6;
	@%p4 bra 	$L__BB0_6;
$L__BB0_9:
	ret;
"""

_NESTED = """
$L__BB0_1:
	lg2.approx.ftz.f32 	%f1, %f2;
	ex2.approx.ftz.f32 	%f3, %f1;
$L__BB0_2:
	cos.approx.ftz.f32 	%f4, %f3;
	sin.approx.ftz.f32 	%f5, %f3;
	{EX2_PER_SLOT}
	@%p1 bra 	$L__BB0_2;
	@%p2 bra 	$L__BB0_1;
	ret;
"""


def test_a_loop_the_compiler_duplicated_counts_once_per_pass():
    from ropelab.measure.census.passes import count_passes
    from ropelab.measure.census.counting import count_extras

    assert count_extras(_UNSWITCHED)["sincos"] == 4  # the static count: both copies
    assert count_passes(_UNSWITCHED) == {"sincos_pass": 2, "pow_pass": 1, "pow_per_slot": 1}
    # two angles computed one after the other in one body are two, per pass too
    twice = _UNSWITCHED.replace("	sin.approx.ftz.f32 	%f5, %f3;\n",
                                "	sin.approx.ftz.f32 	%f5, %f3;\n	cos.approx.ftz.f32 	%f9, %f1;\n"
                                "	sin.approx.ftz.f32 	%f10, %f1;\n")
    assert count_passes(twice)["sincos_pass"] == 4
    straight = "\n".join(["	sin.approx.ftz.f32 	%f1, %f2;", "	cos.approx.ftz.f32 	%f3, %f2;"] * 2
                         + ["	ret;"])
    assert count_passes(straight)["sincos_pass"] == 4


# A grid-stride loop as LLVM unrolls it when the trip count is known only at run time: a
# remainder loop (marked nounroll) with the body once, then the body four times a trip.
_SC = "	sin.approx.ftz.f32 	%f2, %f1;\n	cos.approx.ftz.f32 	%f3, %f1;\n"
_UNROLLED = (
    "	setp.lt.s64 	%p1, %rd1, %rd2;\n	@%p1 bra 	$L__BB0_9;\n"
    "$L__BB0_2:\n	.pragma \"nounroll\";\n" + _SC
    + "	add.s64 	%rd3, %rd3, -1;\n	setp.ne.s64 	%p2, %rd3, 0;\n	@%p2 bra 	$L__BB0_2;\n"
    "$L__BB0_4:\n" + _SC * 4
    + "	add.s64 	%rd4, %rd4, -4;\n	setp.ne.s64 	%p3, %rd4, 0;\n	@%p3 bra 	$L__BB0_4;\n"
    "$L__BB0_9:\n	ret;\n")


def test_an_unrolled_loop_counts_one_iteration_of_the_source_loop():
    from ropelab.measure.census.counting import count_extras
    from ropelab.measure.census.passes import count_passes

    assert count_extras(_UNROLLED)["sincos"] == 10  # the static count: five copies
    assert count_passes(_UNROLLED)["sincos_pass"] == 2  # one sin, one cos per pair
    # without LLVM's mark it is a loop of the learner's with four angles a trip
    assert count_passes(_UNROLLED.replace('	.pragma "nounroll";\n', ""))["sincos_pass"] == 8
    # a body that is not whole copies of the remainder's keeps its own count
    odd = _UNROLLED.replace(_SC * 4, _SC * 3 + "	sin.approx.ftz.f32 	%f4, %f1;\n")
    assert count_passes(odd)["sincos_pass"] == 7


def test_a_pow_per_unit_is_not_a_pow_per_slot():
    from ropelab.measure.census.passes import count_passes

    per_unit = count_passes(_NESTED.replace("{EX2_PER_SLOT}", ""))
    assert per_unit == {"sincos_pass": 2, "pow_pass": 1, "pow_per_slot": 0}
    per_slot = count_passes(_NESTED.replace("{EX2_PER_SLOT}", "ex2.approx.ftz.f32 	%f6, %f5;"))
    assert per_slot["pow_per_slot"] == 1


def test_ptx_it_cannot_follow_gets_the_static_counts():
    from ropelab.measure.census.passes import count_passes

    indirect = _UNSWITCHED.replace("	@%p2 bra 	$L__BB0_6;", "	brx.idx 	%r1, $L_targets;")
    assert count_passes(indirect) == {"sincos_pass": 4, "pow_pass": 1, "pow_per_slot": 2}


# Numba's IR of a kernel before NVVM, cut to what the division count reads: blocks, branches,
# calls and the divisions (numba's unsigned // is a udiv beside a urem).
_IR = """
define i32 @"kernel"(i64 %"n") {
entry:
  br label %"B0"
B0:
  {BEFORE}
  br i1 %".1", label %"B96", label %"B240"
B96:
  br i1 %".2", label %"B96.if", label %"B96.else"
B96.if:
  br label %"B96.endif"
B96.else:
  %".81" = udiv i64 %".72", %".73"
  %".82" = urem i64 %".72", %".73"
  {CALL}
  br label %"B96.endif"
B96.endif:
  br i1 %".3", label %"B96", label %"B240"
B240:
  ret i32 0
}
define i32 @"helper"(i64 %"n") {
entry:
  %".5" = udiv i64 %"n", %"n"
  ret i32 0
}
"""


def test_divisions_of_the_source_count_one_path_each_loop_body_once():
    from ropelab.measure.census.ir_divisions import count_ir_divisions

    plain = _IR.replace("{BEFORE}", "").replace("{CALL}", "")
    assert count_ir_divisions(plain) == 1  # the loop's body once, the zero-test branch either way
    before = _IR.replace("{BEFORE}", '%".9" = udiv i64 %"n", %"n"').replace("{CALL}", "")
    assert count_ir_divisions(before) == 2  # one before the loop and one in it: added
    called = _IR.replace("{BEFORE}", "").replace("{CALL}", '%".6" = call i32 @"helper"(i64 %"n")')
    assert count_ir_divisions(called) == 2  # a called function's division counts where called
    assert count_ir_divisions(plain.replace("udiv", "fdiv")) == 0
    # a range()'s trip count divides by the step it keeps in its state: not the source's //
    step = ('%".10" = getelementptr inbounds {i64, i64, i64}, {i64, i64, i64}* %".9", i32 0, i32 2'
            '\n  %".11" = load i64, i64* %".10"\n  %".12" = sdiv i64 %".8", %".11"')
    assert count_ir_divisions(_IR.replace("{BEFORE}", step).replace("{CALL}", "")) == 1


def test_a_division_gate_names_the_range_that_divides():
    from ropelab.grader import census_gates

    ranges, written = census_gates.divisions_in(
        "def k(x, n):\n    for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):\n"
        "        x[i] = 0\n    for j in range(0, n, 32):\n        x[j] = 1\n")
    assert ranges == ["range(cuda.threadIdx.x, n, cuda.blockDim.x)"] and not written
    assert census_gates.divisions_in("def k(x, n):\n    x[n // 2] = divmod(n, 3)[0]\n") == (
        [], True)
    # a signed division with a range() of run-time step: the range's trip count is named first,
    # not the learner's // (numba computes the trip count in int64 whatever the range's types)
    from ropelab.grader.steps.nb01 import UNSIGNED

    text = census_gates._range_division_text(UNSIGNED, "1", ["range(a, b, c)"], True)
    assert text.startswith("the PTX has 1 signed integer div/rem") and "`range(a, b, c)`" in text
    assert "make its operands unsigned" in text


# A launch step whose text gives every item its own thread ("one thread per pair", 01.2) holds
# the learner's grid to the kernel step's ownership: a grid-stride kernel on one block covers
# every pair and computes the right angles, but its threads each write several pairs.
@cuda.jit(fastmath=True)
def _angles_stride(out, positions, inv_freq, n_pairs, total_pairs):
    i = cuda.grid(1)
    while i < total_pairs:
        token = np.uint64(i) // n_pairs
        pair = np.uint64(i) - token * n_pairs
        out[i] = np.float32(positions[token]) * inv_freq[pair]
        i += cuda.gridsize(1)


def _launch_one_block(out, positions, inv_freq, n_pairs, total_pairs):
    _angles_stride[1, 64](out, positions, inv_freq, np.uint64(n_pairs), total_pairs)


def _launch_every_pair(out, positions, inv_freq, n_pairs, total_pairs):
    _angles_stride[(total_pairs + 63) // 64, 64](out, positions, inv_freq, np.uint64(n_pairs),
                                                 total_pairs)


def test_a_launch_step_of_one_thread_per_pair_refuses_a_grid_that_shares_pairs():
    from ropelab.grader import steps

    refused = steps.check(_launch_one_block, "01.2", quiet=True)
    assert refused.status == "wrong", refused
    assert "the values are right" in str(refused) and "angle of pair idx" in str(refused)
    assert steps.check(_launch_every_pair, "01.2", quiet=True).passed


def test_every_launch_step_that_gives_each_item_a_thread_checks_ownership_on_its_cases():
    """The steps whose text says one thread per item carry the kernel step's ownership, and
    their cases an owner for every element (else the check would pass anything)."""
    from ropelab.grader import steps

    for sid in ("00.4", "01.2", "03.3", "04.5", "05.3"):
        step = steps.get(sid)
        assert step.kind == "launch" and step.ownership, sid
        assert all(c.owner is not None for c in step.make_cases(False)), sid
