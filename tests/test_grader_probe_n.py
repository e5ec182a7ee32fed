"""What two red teams found (rounds N and O, 2026-12-07), each closed and tested both ways.

* Threads that talk through global memory with nothing ordering them (``out[i] = out[i - 1] +
  ...``, ``out[row] += ...`` from every thread) passed: the simulator runs a block's threads in
  turn.  Now :class:`ropelab.grader.recording.GlobalMemoryRace`; atomics and a barrier between
  still pass.
* A shared array raced on in a step that is not a "shared" step passed: the detector now
  watches every step.
* Surplus blocks that only read passed behind a second launch: an idle block is one that wrote
  nothing.
* A launch function that ran ropelab's own kernel passed; so did a host read through
  ``np.array(x)``.
* A kernel that ignored its ``base`` argument passed (every case used 10000); 06.5 let one warp
  do every head.
* The graded code could SIGINT, SIGSTOP or SIGKILL the notebook (:mod:`.confine`).

Round O red-teamed those rules: a slice store into ``out`` crashed the check; two unordered
stores of different values passed (now a race once the values are right); ``x.copy()`` and
``np.asarray(x[:])`` on the host passed; ``cuda.to_device`` of a step's array and a NumPy
scratch array were taken for host work and idle blocks; a kernel step took ropelab's own kernel;
the child could leave its group (then ``kill(0)``), ask for SIGIO with ``F_SETOWN``, or write
the notebook's memory through ``/proc/<ppid>/mem``.

Graded in this process (:func:`.grading.grade`), on the simulator.
"""

import linecache
import os
import platform
import signal
import sys
import textwrap
import time

import pytest

import ropelab
from ropelab.grader import case_base, child, confine, grading, steps, unseen

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's records")

HEADER = '''
import numpy as np
from numba import cuda, float32, uint64
'''
_COUNT = [0]


def _define(cell: str, name: str, before: str = ""):
    """A notebook cell's function, its source kept as Jupyter keeps it."""
    _COUNT[0] += 1
    filename = f"<probe n cell {_COUNT[0]}>"
    source = HEADER + before + textwrap.dedent(cell)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def _grade(step_id: str, cell: str, name: str, before: str = "") -> str:
    verdict = grading.grade(steps.get(step_id), _define(cell, name, before))
    text = str(verdict)
    assert verdict.passed == text.startswith("PASS"), text
    return text


# --- global memory ---------------------------------------------------------------------------

def test_a_thread_reading_what_its_neighbour_stored_is_a_race_and_adding_the_inputs_passes():
    raced = _grade("ramp.14", '''
        @cuda.jit
        def seq_offsets(lengths, out, n):
            i = cuda.grid(1)
            if i == 0:
                out[0] = float32(0)
            elif i <= n:
                out[i] = out[i - 1] + float32(lengths[i - 1])
        ''', "seq_offsets")
    assert raced.startswith("race: global-memory race on out[0]: thread 0 of block 0 wrote it "
                            "and thread 1 of block 0 read it, with no cuda.syncthreads()"), raced
    right = _grade("ramp.14", '''
        @cuda.jit
        def seq_offsets(lengths, out, n):
            i = cuda.grid(1)
            if i <= n:
                total = float32(0)
                for j in range(i):
                    total += float32(lengths[j])
                out[i] = total
        ''', "seq_offsets")
    assert right.startswith("PASS"), right


# ramp.10 with out as the accumulator: thread 0 stores 0, then (after BARRIER) every thread ADDs
ROW_SUM = '''
@cuda.jit
def row_sum_squares(x, out):
    row = cuda.blockIdx.x
    j = cuda.threadIdx.x
    v = x[row * cuda.blockDim.x + j]
    if j == 0:
        out[row] = float32(0)
    BARRIER
    ADD
'''


def _row_sum(barrier: bool, add: str) -> str:
    kernel = ROW_SUM.replace("BARRIER", "cuda.syncthreads()" if barrier else "").replace(
        "ADD", add)
    return _grade("ramp.10", "", "row_sum_squares", kernel)


def test_every_thread_adding_into_one_global_float_is_a_race_and_atomics_pass():
    raced = _row_sum(True, "out[row] += v * v")
    assert raced.startswith("race: global-memory race on out["), raced
    # the same with an atomic add: the store of 0 is ordered before every add by the barrier
    atomic = _row_sum(True, "cuda.atomic.add(out, row, v * v)")
    # right values, no race: what is left is the step's own rule (a shared-memory meeting)
    assert "no thread read a shared element" in atomic, atomic
    # an atomic add with no barrier after the store of 0: unordered with that plain store
    unordered = _row_sum(False, "cuda.atomic.add(out, row, v * v)")
    assert unordered.startswith("race: global-memory race on out[") and \
        "updated it atomically" in unordered, unordered


def test_a_barrier_orders_a_read_of_what_another_thread_of_the_block_stored():
    # the last thread stores its square; after the barrier thread 0 reads it and adds the
    # rest: ordered, no race (ramp.10 then asks for the shared-memory meeting this kernel never
    # makes)
    text = _grade("ramp.10", '''
        @cuda.jit
        def row_sum_squares(x, out):
            row = cuda.blockIdx.x
            j = cuda.threadIdx.x
            n = cuda.blockDim.x
            v = x[row * n + j]
            if j == n - 1:
                out[row] = v * v
            cuda.syncthreads()
            if j == 0:
                total = out[row]
                for k in range(n - 1):
                    w = x[row * n + k]
                    total += w * w
                out[row] = total
        ''', "row_sum_squares")
    assert "race" not in text and "no thread read a shared element" in text, text


def test_a_shared_race_in_a_step_that_does_not_ask_for_shared_memory_is_still_a_race():
    text = _grade("ramp.14", '''
        @cuda.jit
        def seq_offsets(lengths, out, n):
            i = cuda.grid(1)
            sh = cuda.shared.array(32, float32)
            if i < n:
                sh[i] = float32(lengths[i])
            if i <= n:
                total = float32(0)
                for j in range(i):
                    total += sh[j]
                out[i] = total
        ''', "seq_offsets")
    assert text.startswith("race: shared-memory race"), text


# --- launches --------------------------------------------------------------------------------

SCALE = '''
@cuda.jit
def scale_blocks(x, out, scale, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = x[i] * scale
'''


# two launches through a buffer the launch function makes
PIPELINE = '''
@cuda.jit
def into(x, tmp, scale, n):
    i = cuda.grid(1)
    if i < n:
        tmp[i] = x[i] * scale

@cuda.jit
def copy_back(tmp, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = tmp[i]
'''


def test_surplus_blocks_that_only_read_are_idle_behind_a_second_launch():
    text = _grade("ramp.5", '''
        @cuda.jit
        def reader(x, out, scale, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = x[i] * scale
            else:
                s = x[0]

        def launch_scale(x, out, scale, n):
            reader[(n + 31) // 32 * 10 + 50, 32](x, out, scale, n)
            scale_blocks[1, 32](x, out, scale, 1)
        ''', "launch_scale", SCALE)
    assert "wrote nothing" in text and "blocks were wholly idle" in text, text


def test_a_block_whose_work_lands_in_a_scratch_buffer_it_made_is_not_idle():
    text = _grade("ramp.5", '''
        def launch_scale(x, out, scale, n):
            tmp = cuda.device_array(n, np.float32)
            threads = 64
            blocks = (n + threads - 1) // threads
            into[blocks, threads](x, tmp, scale, n)
            copy_back[blocks, threads](tmp, out, n)
        ''', "launch_scale", SCALE + PIPELINE)
    assert text.startswith("PASS"), text


def test_a_launch_of_ropelabs_own_kernel_is_refused():
    text = _grade("02.3", '''
        from ropelab.kernels.block2d import rope_block2d as theirs

        borrowed = cuda.jit(fastmath=True)(theirs)

        def launch_block2d(x, out, positions, n_pairs, base):
            threads = min((n_pairs + 31) // 32 * 32, 1024)
            borrowed[positions.size, threads](x, out, positions, uint64(n_pairs), float32(base))
        ''', "launch_block2d")
    assert "launched rope_block2d, ropelab's own kernel (from ropelab.kernels.block2d)" in text, \
        text


def test_a_kernel_that_claims_a_steps_module_is_still_the_learners():
    # ``__module__`` is a string anyone sets: the given kernels are known by their code
    text = _grade("ramp.5", '''
        scale_blocks.py_func.__module__ = "ropelab.grader.steps.nb08"

        def launch_scale(x, out, scale, n):
            scale_blocks[(n + 31) // 32 + 100, 32](x, out, scale, n)
        ''', "launch_scale", SCALE)
    assert "blocks were wholly idle" in text, text


def test_np_array_of_an_input_on_the_host_is_host_work():
    text = _grade("ramp.5", '''
        def launch_scale(x, out, scale, n):
            host = np.array(x) * np.float32(scale)
            scale_blocks[(n + 31) // 32, 32](cuda.to_device(host), out, np.float32(1.0), n)
        ''', "launch_scale", SCALE)
    assert text.startswith("wrong: launch_scale read x through NumPy"), text


# --- a launch step's ownership, a case's base ------------------------------------------------

FUSED_HEAD_STRIDED = '''
import math
from numba import int64

@cuda.jit(fastmath=True)
def rope_fused_head(qkv, out, q_weight, k_weight, positions, inv_freq, heads_q, heads_k,
                    heads_per_token, total_warps, eps):
    lane = cuda.threadIdx.x & 31
    w = int64((cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x) >> 5)
    warps = int64((cuda.gridDim.x * cuda.blockDim.x) >> 5)
    while w < total_warps:  # a warp-stride loop: right on any grid, one warp may do every head
        token = uint64(w) // heads_per_token
        head = uint64(w) - token * heads_per_token
        first = uint64(w) * uint64(64) + uint64(2 * lane)
        a = qkv[first]
        b = qkv[first + uint64(1)]
        if head < heads_q + heads_k:
            s = a * a + b * b
            for m in (16, 8, 4, 2, 1):
                s += cuda.shfl_xor_sync(0xFFFFFFFF, s, m)
            r = float32(1.0) / math.sqrt(s / float32(64.0) + eps)
            if head < heads_q:
                a = a * r * q_weight[2 * lane]
                b = b * r * q_weight[2 * lane + 1]
            else:
                a = a * r * k_weight[2 * lane]
                b = b * r * k_weight[2 * lane + 1]
            angle = float32(positions[token]) * inv_freq[lane]
            c = math.cos(angle)
            sn = math.sin(angle)
            a, b = a * c - b * sn, a * sn + b * c
        out[first] = a
        out[first + uint64(1)] = b
        w += warps
'''


@pytest.mark.parametrize("warps", ["one", "every"])
def test_the_fused_launch_gives_every_head_its_own_warp(warps):
    grid = "1, 32" if warps == "one" else \
        "(tokens * per_token + 3) // 4, 128"
    text = _grade("06.5", f'''
        def launch_fused(qkv, out, q_weight, k_weight, positions, inv_freq, tokens, heads_q,
                         heads_k, heads_v, eps):
            per_token = heads_q + heads_k + heads_v
            rope_fused_head[{grid}](qkv, out, q_weight, k_weight, positions, inv_freq,
                                   uint64(heads_q), uint64(heads_k), uint64(per_token),
                                   int64(tokens * per_token), float32(eps))
        ''', "launch_fused", FUSED_HEAD_STRIDED)
    if warps == "one":
        assert "which is thread 32 of block 0's to write: lane l of warp w" in text, text
    else:
        assert text.startswith("PASS"), text


@pytest.mark.parametrize("which", ["ignored", "used"])
def test_a_kernel_that_ignores_its_base_fails_on_the_fresh_case(which):
    power = "float32(10000.0)" if which == "ignored" else "base"
    text = _grade("01.3", f'''
        import math

        @cuda.jit(fastmath=True)
        def pair_frequencies(out, n_pairs, base):
            pair = cuda.grid(1)
            if pair < n_pairs:
                out[pair] = float32(1.0) / math.pow({power},
                                                    float32(2 * pair) / float32(2 * n_pairs))
        ''', "pair_frequencies")
    if which == "ignored":
        assert text.startswith("wrong: pair 1 [case 5 pairs, fresh random inputs]"), text
        assert "every argument included" in text, text
    else:
        assert text.startswith("PASS"), text


# --- the grading child's signals -------------------------------------------------------------

@pytest.mark.skipif(platform.machine() not in confine._ARCHES or sys.platform != "linux",
                    reason="the seccomp filter is written for Linux on x86_64 and aarch64")
def test_the_graded_code_cannot_signal_the_notebook():
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *args: received.append(args[0]))
    try:
        launch = _define('''
            import os, signal

            def launch_scale(x, out, scale, n):
                os.kill(os.getppid(), signal.SIGUSR1)  # the notebook (SIGINT, SIGSTOP alike)
                scale_blocks[(n + 31) // 32, 32](x, out, scale, n)
            ''', "launch_scale", SCALE)
        verdict = steps.check(launch, "ramp.5", quiet=True)  # graded in the forked child
        time.sleep(0.2)  # a signal that got through would have arrived by now
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == []
    assert verdict.status == "error" and "PermissionError" in str(verdict), str(verdict)


def test_the_filter_lets_the_child_signal_itself_and_its_group():
    done = child.in_child(lambda: (os.kill(os.getpid(), 0), os.kill(0, 0),
                                   os.kill(-os.getpid(), 0)) and "ok", 10)
    assert done == ("ok", "ok")


# --- round O (a red team of the rules above) -------------------------------------------------

def test_a_slice_store_into_out_is_an_access_like_any_other():
    text = _grade("ramp.5", '''
        def launch_scale(x, out, scale, n):
            scale_blocks[(n + 31) // 32, 32](x, out, scale, n)
        ''', "launch_scale", SCALE.replace("out[i] = x[i] * scale",
                                           "out[i:i + 1] = 0.0\n        out[i] = x[i] * scale"))
    assert text.startswith("PASS"), text


@pytest.mark.parametrize("stored", ["junk", "the same value"])
def test_two_unordered_stores_race_only_when_they_differ(stored):
    value = "float32(-12345.0)" if stored == "junk" else "x[i + 1] * scale"
    text = _grade("ramp.4", f'''
        @cuda.jit
        def scale_blocks(x, out, scale, n):
            i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            if i + 1 < n:
                out[i + 1] = {value}  # the neighbour's element, maybe in the next block
            if i < n:
                out[i] = x[i] * scale
        ''', "scale_blocks")
    if stored == "junk":
        assert text.startswith("race: the values are right here, but global-memory race on "
                               "out[1]") and "stored -12345.0" in text, text
    else:
        assert text.startswith("PASS"), text


def test_to_device_of_a_device_array_hands_it_back():
    text = _grade("ramp.5", '''
        def launch_scale(x, out, scale, n):
            xd = cuda.to_device(x)  # numba-cuda returns a device array as it is
            scale_blocks[(n + 127) // 128, 128](xd, out, scale, n)
        ''', "launch_scale", SCALE)
    assert text.startswith("PASS"), text


@pytest.mark.parametrize("read", ["x.copy()", "np.asarray(x[:])"])
def test_every_host_read_of_an_input_is_host_work(read):
    text = _grade("ramp.5", f'''
        def launch_scale(x, out, scale, n):
            host = {read} * np.float32(scale)
            scale_blocks[(n + 31) // 32, 32](cuda.to_device(host), out, np.float32(1.0), n)
        ''', "launch_scale", SCALE)
    assert text.startswith("wrong: launch_scale read x"), text


def test_a_numpy_scratch_array_handed_to_a_launch_records_its_stores():
    text = _grade("ramp.5", '''
        def launch_scale(x, out, scale, n):
            tmp = np.zeros(n, np.float32)  # numba copies it over and back
            blocks = (n + 63) // 64
            into[blocks, 64](x, tmp, scale, n)
            copy_back[blocks, 64](cuda.to_device(tmp), out, n)
        ''', "launch_scale", SCALE + PIPELINE)
    assert text.startswith("PASS"), text


def test_a_kernel_step_handed_ropelabs_kernel_is_refused():
    kernel = _define('''
        from ropelab.kernels import block2d

        theirs = cuda.jit(fastmath=True)(block2d.rope_block2d)
        ''', "theirs")
    text = str(grading.grade(steps.get("02.2"), kernel))
    assert text.startswith("wrong: rope_block2d is ropelab's own kernel"), text


@pytest.mark.skipif(platform.machine() not in confine._ARCHES or sys.platform != "linux",
                    reason="the seccomp filter is written for Linux on x86_64 and aarch64")
@pytest.mark.parametrize("how", ["F_SETOWN", "/proc/ppid/mem", "setsid"])
def test_the_graded_code_cannot_reach_the_notebook_another_way(how):
    reach = {"F_SETOWN": "r, w = os.pipe(); fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid())",
             "/proc/ppid/mem": "os.close(os.open(f'/proc/{os.getppid()}/mem', os.O_RDWR))",
             "setsid": "os.setsid()"}[how]
    launch = _define(f'''
        import fcntl, os

        def launch_scale(x, out, scale, n):
            {reach}
            scale_blocks[(n + 31) // 32, 32](x, out, scale, n)
        ''', "launch_scale", SCALE)
    verdict = steps.check(launch, "ramp.5", quiet=True)
    assert verdict.status == "error" and ("PermissionError" in str(verdict) or
                                          "Operation not permitted" in str(verdict)), str(verdict)


def test_threads_that_race_through_a_scratch_buffer_race():
    text = _grade("ramp.5", '''
        @cuda.jit
        def into(x, tmp, scale, n):
            i = cuda.grid(1)
            if i < n:
                tmp[i] = x[i] * scale
                if i > 0:
                    s = tmp[i - 1]  # the neighbour's store, unordered

        def launch_scale(x, out, scale, n):
            tmp = cuda.device_array(n, np.float32)
            into[(n + 63) // 64, 64](x, tmp, scale, n)
            scale_blocks[(n + 63) // 64, 64](x, out, scale, n)
        ''', "launch_scale", SCALE)
    assert text.startswith("race: global-memory race on element [0] of a device array your "
                           "launch function made"), text


# --- round P ---------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["every lane loads the row", "the butterfly"])
def test_the_shuffle_step_refuses_a_row_sum_from_loads(how):
    if how == "the butterfly":
        total = '''ss = a * a + b * b
    for m in (16, 8, 4, 2, 1):
        ss += cuda.shfl_xor_sync(0xFFFFFFFF, ss, m)'''
    else:
        total = '''ss = float32(0.0)
    for k in range(64):
        v = x[row * 64 + k]
        ss += v * v
    ss = cuda.shfl_sync(0xFFFFFFFF, ss, lane)  # a shuffle that moves nothing'''
    kernel = f'''
import math

@cuda.jit(fastmath=True)
def my_rms_norm_warp(x, out, weight, rows, eps):
    row = cuda.blockIdx.x * (cuda.blockDim.x // 32) + cuda.threadIdx.x // 32
    lane = cuda.threadIdx.x % 32
    if row >= rows:
        return
    a = x[row * 64 + 2 * lane]
    b = x[row * 64 + 2 * lane + 1]
    {total}
    r = float32(1.0) / math.sqrt(ss / float32(64.0) + eps)
    out[row * 64 + 2 * lane] = a * r * weight[2 * lane]
    out[row * 64 + 2 * lane + 1] = b * r * weight[2 * lane + 1]
'''
    text = str(grading.grade(steps.get("06.1"), _define("", "my_rms_norm_warp", kernel)))
    if how == "the butterfly":
        assert text.startswith("PASS"), text
    else:
        assert text.startswith("wrong: the values are right, but thread 1 of block 0 read "
                               "x[0]"), text


E4M3 = '''
from numba import uint32
from ropelab.grader.steps.nb10 import float_bits

@cuda.jit
def e4m3_codes(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    v = x[i] * inv_scale
    b = float_bits(v)
    sign = uint32(b >> 31) << 7
    mag = MAGNITUDE
    if mag > uint64(0x7F800000):
        out[i] = float32(sign | uint32(0x7F))
        return
    if mag >= uint64(0x43E00000):
        out[i] = float32(sign | uint32(0x7E))
        return
    if mag < uint64(0x3C800000):
        a = abs(v) * float32(512.0)
        q = uint32(a)
        r = a - float32(q)
        if r > float32(0.5) or (r == float32(0.5) and (q & uint32(1)) == uint32(1)):
            q = uint32(q + uint32(1))
        out[i] = float32(sign | q)
        return
    m = mag - uint64(0x3C000000)
    low = m & uint64(0xFFFFF)
    code = m >> uint64(20)
    if low > uint64(0x80000) or (low == uint64(0x80000) and (code & uint64(1)) == uint64(1)):
        code += uint64(1)
    if code > uint64(0x7E):
        code = uint64(0x7E)
    out[i] = float32(uint64(sign) | code)
'''


@pytest.mark.parametrize("clear", ["(b << 1) >> 1", "b & uint32(0x7FFFFFFF)"])
def test_a_shift_that_only_the_simulator_wraps_is_refused(clear):
    # NumPy keeps uint32 << 1 in 32 bits (the sign bit falls off, silently); numba widens it
    # to 64 bits, so on a GPU (b << 1) >> 1 keeps the sign in mag
    kernel = _define("", "e4m3_codes", E4M3.replace("MAGNITUDE", clear))
    text = str(steps.check(kernel, "10.2", quiet=True))
    if clear.startswith("(b << 1)"):
        assert "IntegerWrap" in text and "a left shift of a 32-bit" in text, text
    else:
        assert text.startswith("PASS"), text



# --- round Q ---------------------------------------------------------------------------------

@pytest.mark.parametrize("freq", ["math.pow(float32(10000.0), -float32(p) / float32(n_pairs))",
                                  "inv_freq[p]"])
def test_a_kernel_that_ignores_its_frequency_table_fails_on_the_fresh_case(freq):
    kernel = _define("", "rope_two_pairs", f'''
import math

@cuda.jit(fastmath=True)
def rope_two_pairs(x, out, positions, inv_freq, n_pairs):
    tok = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t + t < n_pairs:
        pos = float32(positions[tok])
        first = tok * (n_pairs + n_pairs) + 4 * t
        for k in range(2):
            p = t + t + k
            a = pos * {freq}
            c = math.cos(a)
            s = math.sin(a)
            i = first + 2 * k
            x0 = x[i]
            x1 = x[i + 1]
            out[i] = x0 * c - x1 * s
            out[i + 1] = x0 * s + x1 * c
''')
    text = str(grading.grade(steps.get("03.1"), kernel))
    if freq.startswith("math.pow"):
        assert "fresh random inputs" in text.splitlines()[0] and text.startswith("wrong"), text
    else:
        assert text.startswith("PASS"), text


def test_the_fresh_case_of_a_norm_step_draws_another_eps():
    step = steps.get("06.2")
    fresh = unseen.fresh_case(step, 7)
    fixed = next(c for c in step.cases() if fresh.label == f"{c.label}, {unseen.FRESH}")
    assert float(fixed.inputs["eps"]) == pytest.approx(1e-6)
    assert float(fresh.inputs["eps"]) == case_base.OTHER_EPS


@pytest.mark.skipif(platform.machine() not in confine._ARCHES or sys.platform != "linux",
                    reason="the seccomp filter is written for Linux on x86_64 and aarch64")
@pytest.mark.parametrize("how", ["pathlib.Path(PATH).write_text('{}')",
                                 "os.close(os.open(PATH, os.O_WRONLY | os.O_CREAT))",
                                 "os.rename(READ, PATH)", "os.symlink(READ, PATH)",
                                 "os.mkdir(PATH)"])
def test_the_graded_code_cannot_write_a_file(tmp_path, how):
    """A census row in the user cache is trusted by its key alone: a file written by the graded
    code would pass a later kernel that computes in float64.  The child writes no file at all."""
    target, existing = tmp_path / "forged.json", tmp_path / "read.json"
    existing.write_text("{}")
    launch = _define(f'''
        import os
        import pathlib

        def launch_scale(x, out, scale, n):
            {how.replace("PATH", repr(str(target))).replace("READ", repr(str(existing)))}
            scale_blocks[(n + 31) // 32, 32](x, out, scale, n)
        ''', "launch_scale", SCALE)
    verdict = steps.check(launch, "ramp.5", quiet=True)  # graded in the forked child
    assert verdict.status == "error" and "PermissionError" in str(verdict), str(verdict)
    assert not target.exists() and existing.read_text() == "{}"


@pytest.mark.skipif(platform.machine() not in confine._ARCHES or sys.platform != "linux",
                    reason="the seccomp filter is written for Linux on x86_64 and aarch64")
def test_the_graded_code_still_reads_files(tmp_path):
    readable = tmp_path / "scale.txt"
    readable.write_text("1")
    launch = _define(f'''
        import pathlib

        def launch_scale(x, out, scale, n):
            pathlib.Path({str(readable)!r}).read_text()
            scale_blocks[(n + 31) // 32, 32](x, out, scale, n)
        ''', "launch_scale", SCALE)
    verdict = steps.check(launch, "ramp.5", quiet=True)
    assert verdict.passed, str(verdict)
