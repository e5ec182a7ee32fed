"""The loopholes an independent red-teamer's report found (data/heldout/REPORT_exploits_b.md),
each closed, each tested on a variant that reaches the rule that closes it.

The red-teamer's own attempts are graded in tests/test_exploits_b.py; several of them are
refused there by an earlier rule (a launch of a one-argument ``touch`` kernel breaks the
contract's types), so here every variant launches kernels of the contract's arguments and
gets as far as the rule under test.  Right variants pass, so each rule is tested both ways.
Graded in this process (:func:`.grading.grade`: the same records cross the same encoding as
from the forked child).  Budget: a few seconds, two census compiles with a cold cache.
"""

import linecache
import textwrap

import numpy as np
import pytest

import ropelab
from ropelab.grader import grading, intake, kernel_census, launched, steps
from ropelab.grader.steps.base import Forbid
from ropelab.sim import shared_race

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's records")

HEADER = '''
import math
import numpy as np
from numba import cuda, float32, uint64

@cuda.jit(fastmath=True)
def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c

@cuda.jit(fastmath=True)
def touch(x, out, cos_t, sin_t, n_pairs):
    if cuda.grid(1) == 0:
        out[0] = out[0]

def answer(x, cos_t, sin_t):
    x0, x1 = x[0::2].astype(np.float64), x[1::2].astype(np.float64)
    res = np.empty(x.size)
    res[0::2], res[1::2] = x0 * cos_t - x1 * sin_t, x0 * sin_t + x1 * cos_t
    return res.astype(np.float32)
'''
_COUNT = [0]


def _define(cell: str, name: str):
    """A notebook cell: HEADER and ``cell`` run with their source kept, as Jupyter keeps it."""
    _COUNT[0] += 1
    filename = f"<loophole cell {_COUNT[0]}>"
    source = HEADER + textwrap.dedent(cell)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


LAUNCH = steps.get("00.4")


@pytest.fixture
def behind_the_first_rule(monkeypatch):
    """The variants that read an argument's ``.data`` or build a kernel with ``exec`` are
    refused before anything runs (:func:`.intake.reaching_out`); a test of the rule behind that
    one lifts it."""
    monkeypatch.setattr(intake, "_reaching_problem", lambda *args: None)


def _grade(cell: str, name: str = "launch_rotate_pairs", step=LAUNCH) -> str:
    verdict = grading.grade(step, _define(cell, name))
    text = str(verdict)
    assert verdict.passed == text.startswith("PASS"), text
    return text


# --- a launch function doing the work on the host ---------------------------------------------

def test_a_launch_function_that_reads_an_input_on_the_host_is_refused():
    text = _grade('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            res = answer(x.copy_to_host(), cos_t.copy_to_host(), sin_t.copy_to_host())
            rotate_pairs[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)
            out[0] = res[0]
        ''')
    assert text.startswith("wrong: launch_rotate_pairs read x (x.copy_to_host()) on the host")


def test_out_written_around_the_index_is_refused(behind_the_first_rule):
    text = _grade('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            out.data[:] = answer(x.data, cos_t.data, sin_t.data)
            touch[1, 32](x, out, cos_t, sin_t, n_pairs)
        ''')
    assert "holds a value no kernel thread stored there" in text, text


def test_a_kernel_writing_through_a_slice_is_still_a_kernel_writing():
    text = _grade('''
        @cuda.jit(fastmath=True)
        def rotate_by_slice(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                c = cos_t[p]
                s = sin_t[p]
                x0 = x[2 * p]
                x1 = x[2 * p + 1]
                pair = out[2 * p:2 * p + 2]
                pair[0] = x0 * c - x1 * s
                pair[1] = x0 * s + x1 * c

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            rotate_by_slice[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)
        ''')
    # a slice of a watched array is a watched view: its writes are the threads' own
    assert text.startswith("PASS"), text


# --- idle blocks behind a second launch ------------------------------------------------------

def test_idle_blocks_are_refused_whatever_launch_follows():
    text = _grade('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            rotate_pairs[(n_pairs + 31) // 32 + 1000, 32](x, out, cos_t, sin_t, n_pairs)
            touch[1, 32](x, out, cos_t, sin_t, n_pairs)
        ''')
    assert "of rotate_pairs[grid 1001 x block 32] wrote nothing" in text, text
    assert "1000 of 1001 blocks were wholly idle" in text


def test_two_launches_that_both_work_pass():
    text = _grade('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            half = (n_pairs + 1) // 2
            rotate_pairs[(n_pairs + 31) // 32, 32](x, out, cos_t, sin_t, n_pairs)
            rotate_pairs[(half + 31) // 32, 32](x, out, cos_t, sin_t, half)
        ''')
    assert text.startswith("PASS"), text


# --- the launched kernel's census, found without running the learner's code -------------------

def test_a_kernel_defined_inside_the_launch_function_gets_its_census():
    text = _grade('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            @cuda.jit(fastmath=True)
            def rot(x, out, c_, s_, n):
                p = cuda.grid(1)
                if p < n:
                    a = x[2 * p]
                    b = x[2 * p + 1]
                    out[2 * p] = a * c_[p] - b * s_[p]
                    out[2 * p + 1] = a * s_[p] + b * c_[p]
            rot[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)
        ''')
    assert text.startswith("PASS") and "float64 instructions" in text, text


F64_KERNEL = '''
        @cuda.jit(fastmath=True)
        def rotate_wide(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                scale = n_pairs * cos_t[p] / n_pairs  # int64 x float32: float64
                out[2 * p] = x[2 * p] * scale - x[2 * p + 1] * sin_t[p]
                out[2 * p + 1] = x[2 * p] * sin_t[p] + x[2 * p + 1] * scale
'''


def test_a_float64_kernel_reached_by_a_helper_is_judged():
    text = _grade(F64_KERNEL + '''
        def blocks_for(n):
            return (n + 63) // 64

        def go(x, out, cos_t, sin_t, n_pairs):
            rotate_wide[blocks_for(n_pairs), 64](x, out, cos_t, sin_t, n_pairs)

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            go(x, out, cos_t, sin_t, n_pairs)
        ''')
    assert text.startswith("not solved yet: the values are right, but in rotate_wide, the "
                           "kernel you launch,"), text


def test_every_reachable_kernel_of_the_contract_is_judged_not_only_the_one_named():
    # the child's record names rotate_pairs; rotate_wide, which the function could have run,
    # is judged too (a record rewritten in the child could otherwise point at a clean decoy)
    text = _grade(F64_KERNEL + '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            kernel = rotate_pairs if n_pairs > 0 else rotate_wide
            kernel[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)
        ''')
    assert "in rotate_wide, the kernel you launch" in text, text


EXEC_LAUNCH = '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            namespace = {"cuda": cuda}
            exec("def rot(x, out, c, s, n):\\n"
                 "    p = cuda.grid(1)\\n"
                 "    if p < n:\\n"
                 "        out[2 * p] = x[2 * p] * c[p] - x[2 * p + 1] * s[p]\\n"
                 "        out[2 * p + 1] = x[2 * p] * s[p] + x[2 * p + 1] * c[p]\\n", namespace)
            cuda.jit(namespace["rot"])[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)
        '''


def test_a_kernel_built_by_exec_is_refused_before_it_runs():
    text = _grade(EXEC_LAUNCH)
    assert text.startswith("error: launch_rotate_pairs reaches past its arguments: `exec`"), text


def test_a_kernel_the_grader_cannot_find_fails_instead_of_skipping_its_census(
        behind_the_first_rule):
    text = _grade(EXEC_LAUNCH)
    assert text.startswith("error: launch_rotate_pairs is right on the simulator, but the census "
                           "of the kernel it launched cannot be taken: rot"), text


def test_reachable_reads_names_cells_and_nested_code_without_calling_anything():
    class Trap:
        """An object whose every attribute lookup would run code."""

        def __getattr__(self, name):
            raise AssertionError(f"the grader ran the learner's __getattr__ ({name})")

    launch = _define('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            trap.anything
            @cuda.jit
            def inner(a):
                a[0] = 0
            rotate_pairs[1, 1](x, out, cos_t, sin_t, n_pairs)
        ''', "launch_rotate_pairs")
    launch.__globals__["trap"] = Trap()
    found = {key[2]: kernel is not None for key, (_, kernel) in launched.reachable(launch).items()}
    assert found == {"inner": False, "rotate_pairs": True}


# --- census not available, and the text the census compiles -----------------------------------

def test_census_not_available_fails():
    text = _grade('''
        def make():
            scale = 1.0

            @cuda.jit(fastmath=True)
            def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
                p = cuda.grid(1)
                if p < n_pairs:
                    out[2 * p] = x[2 * p] * cos_t[p] * scale - x[2 * p + 1] * sin_t[p]
                    out[2 * p + 1] = x[2 * p] * sin_t[p] + x[2 * p + 1] * cos_t[p]
            return rotate_pairs

        closure = make()
        ''', "closure", steps.get("00.3"))
    assert text.startswith("error: rotate_pairs is right on the simulator, but its census cannot "
                           "be taken: rotate_pairs is a closure"), text


def test_a_source_that_is_not_the_code_that_runs_is_refused():
    kernel = _define('''
        @cuda.jit(fastmath=True)
        def swapped(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                out[2 * p] = x[2 * p] * cos_t[p] - x[2 * p + 1] * sin_t[p]
                out[2 * p + 1] = x[2 * p] * sin_t[p] + x[2 * p + 1] * cos_t[p]
        ''', "swapped")
    fn = kernel_census.python_function(kernel)
    filename = fn.__code__.co_filename
    size, mtime, lines, name = linecache.cache[filename]
    assert intake.source_is_code(fn, kernel_census.function_source(fn))
    edited = [line.replace("cos_t[p] - x", "cos_t[p] + x") for line in lines]
    linecache.cache[filename] = (size, mtime, edited, name)
    verdict = grading.grade(steps.get("00.3"), kernel)
    assert str(verdict).startswith("error: cannot grade swapped: the source Python shows for it "
                                   "is not the code that runs"), str(verdict)


def test_a_cell_that_imports_beside_its_kernel_is_graded_as_ipython_compiled_it():
    """IPython compiles each top-level statement of a cell on its own: a kernel defined beside
    ``from numba import cuda`` then calls ``cuda.grid`` as a method (compiled with the cell
    whole, as an import-bound name, it would not).  Its source is its code all the same; an
    edit of the cell after it ran is still refused."""
    import ast

    source = textwrap.dedent('''
        import math

        from numba import cuda


        @cuda.jit(fastmath=True)
        def beside_imports(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                out[2 * p] = x[2 * p] * cos_t[p] - x[2 * p + 1] * sin_t[p]
                out[2 * p + 1] = x[2 * p] * sin_t[p] + x[2 * p + 1] * cos_t[p] + 0 * math.pi
        ''')
    filename = "<ipython-input-beside-imports>"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    namespace = {"__name__": "__main__"}
    for node in ast.parse(source).body:  # one statement at a time, as IPython runs a cell
        exec(compile(ast.Module([node], type_ignores=[]), filename, "exec"), namespace)
    fn = kernel_census.python_function(namespace["beside_imports"])
    whole = compile(source, filename, "exec", dont_inherit=True)
    as_whole = next(c for c in whole.co_consts if getattr(c, "co_name", "") == "beside_imports")
    assert as_whole.co_code != fn.__code__.co_code  # the two compilations really differ
    assert intake.source_is_code(fn, kernel_census.function_source(fn))
    edited = [line.replace("cos_t[p] - x", "cos_t[p] + x") for line in lines]
    linecache.cache[filename] = (len(source), None, edited, filename)
    assert not intake.source_is_code(fn, kernel_census.function_source(fn))


def test_an_object_that_only_looks_like_a_kernel_is_refused():
    honest = _define('''
        @cuda.jit(fastmath=True)
        def copy(x, out):
            i = cuda.grid(1)
            out[i] = x[i]
        ''', "copy")

    class LooksLikeOne:
        py_func = honest.py_func if hasattr(honest, "py_func") else honest.fn
        __name__ = "copy"

        def __call__(self, *args):
            pass

        def __getitem__(self, config):
            return lambda x, out: out.data.__setitem__(slice(None), x.data)

    text = str(grading.grade(steps.get("00.1"), LooksLikeOne()))
    assert text.startswith("error: not a kernel: a LooksLikeOne object, not what @cuda.jit "
                           "makes"), text


# --- reaching past the arguments --------------------------------------------------------------

def test_a_function_that_imports_or_reaches_into_frames_is_refused_before_it_runs():
    assert intake.reaching_out("def k(x):\n    import sys\n    f = sys._getframe()\n") == (
        2, "import sys")
    assert intake.reaching_out("def k(x, out):\n    out[0] = getattr(x, 'data')[0]\n") == (
        2, "getattr")
    assert intake.reaching_out("def k(f):\n    return f.f_back.f_locals\n")[1] == ".f_back"
    assert intake.reaching_out("def k(x, out):\n    out[0] = x.shape[0] + x.size\n") is None
    assert intake.reaching_out("def k(out):\n    from numba import cuda\n    import math\n") \
        is None
    assert intake.reaching_out("def k(out):\n    out.data[:] = 0\n") == (2, ".data")
    text = _grade('''
        def grid_for(n):
            import gc
            return (n + 63) // 64

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            rotate_pairs[grid_for(n_pairs), 64](x, out, cos_t, sin_t, n_pairs)
        ''')
    assert text.startswith("error: grid_for reaches past its arguments: `import gc`"), text


# --- source rules and shared memory ---------------------------------------------------------

def test_a_rule_against_percent_also_refuses_divmod_and_operator_mod():
    rule = Forbid("%", "no remainder")
    assert rule.found_in("def k(i, n):\n    t, p = divmod(i, n)\n") == [2]
    assert rule.found_in("import operator\ndef k(i, n):\n    return operator.mod(i, n)\n") == [3]
    assert rule.found_in("def k(i, n):\n    return i - (i // n) * n\n") == []
    assert Forbid("//", "no division").found_in("def k(i, n):\n    return divmod(i, n)[0]\n")


def test_a_slice_of_a_shared_array_hides_no_race_and_counts_meetings():
    import threading
    from types import SimpleNamespace

    watch = shared_race.Watch()
    table = shared_race.RaceArray(np.zeros(8, np.float32), "the test's table", watch)

    def as_thread(x, epoch, access):
        """``access()`` in a thread of its own, dressed as simulated thread ``x`` of block 0
        having passed ``epoch`` barriers; what it raised, or None."""
        raised = []

        def body():
            me = threading.current_thread()
            me.threadIdx, me.blockIdx, me.thread_id = SimpleNamespace(x=x, y=0, z=0), (0, 0, 0), x
            me._race_epoch = epoch
            try:
                access()
            except Exception as exc:  # noqa: BLE001
                raised.append(exc)
        thread = threading.Thread(target=body)
        thread.start()
        thread.join()
        return raised[0] if raised else None

    def write():
        table[2:3][0] = 1.0  # element 2 through a one-element view

    assert as_thread(0, 0, write) is None
    race = as_thread(1, 0, lambda: table[1:4][1])  # element 2 through another view
    assert isinstance(race, shared_race.SharedMemoryRace), race
    assert "element 2 of the test's table: thread 0 wrote it and thread 1 read it" in str(race)
    assert watch.meetings == 0
    assert as_thread(1, 1, lambda: table[1:4][1]) is None  # after a barrier: a meeting
    assert watch.meetings == 1


def test_a_shared_step_whose_threads_never_meet_in_shared_memory_is_not_solved():
    text = _grade('''
        @cuda.jit(fastmath=True)
        def table_kernel(x, out, positions, inv_freq, n_pairs, total_pairs):
            idx = cuda.grid(1)
            if idx < total_pairs:
                i = uint64(idx)
                token = i // n_pairs
                pair = i - token * n_pairs
                angle = float32(positions[token]) * inv_freq[pair]
                x0 = x[i + i]
                x1 = x[i + i + uint64(1)]
                out[i + i] = x0 * math.cos(angle) - x1 * math.sin(angle)
                out[i + i + uint64(1)] = x0 * math.sin(angle) + x1 * math.cos(angle)
        ''', "table_kernel", steps.get("04.2"))
    assert text.startswith("not solved yet: the values are right, but no thread read a shared "
                           "element that another thread of its block wrote"), text


def test_a_value_two_threads_stored_gets_the_same_hint_whatever_the_schedule():
    """Thread 0 also stores to out[2], thread 1's: which store lands last is the simulator's
    schedule, so the value there, and which typical mistake pair 1 resembles, could change
    from run to run (thread 1 also gets out[3] wrong, so pair 1 is always the first wrong one).
    The hint is the step's own, with the element named, on every run."""
    overlapping = _define('''
        @cuda.jit(fastmath=True)
        def overlapping(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                out[2 * p] = x[2 * p] * cos_t[p] - x[2 * p + 1] * sin_t[p]
                second = x[2 * p] * sin_t[p] + x[2 * p + 1] * cos_t[p]
                out[2 * p + 1] = -second if p == 1 else second
                if p == 0 and n_pairs > 1:
                    out[2] = x[0]
        ''', "overlapping")
    step = steps.get("00.3")
    hints = {str(grading.grade(step, overlapping, fresh=False)).splitlines()[-1] for _ in range(4)}
    assert len(hints) == 1, hints
    (hint,) = hints
    assert "two threads stored to out[2]" in hint and step.hint in hint, hint


# ---- a 32-bit sum that wraps on the simulator and not on a GPU ------------------------------

from numba import cuda, float32  # noqa: E402
from numba import uint32 as _u32  # noqa: E402


@cuda.jit
def _rebias_by_wrapping(x, out):
    i = cuda.grid(1)
    if i < x.size:
        a = _u32(x[i])
        a += _u32(0xC4000000)  # counts on the carry past bit 31 vanishing: NumPy's, not Numba's
        out[i] = a >> _u32(20)


@cuda.jit
def _rebias_wrapped_on_purpose(x, out):
    i = cuda.grid(1)
    if i < x.size:
        a = _u32(x[i])
        out[i] = _u32(a + _u32(0xC4000000)) >> _u32(20)  # truncated on both


@cuda.jit
def _float_overflow(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * float32(1e38)  # inf on both: not an integer wrap


def test_an_integer_sum_that_only_the_simulator_wraps_is_refused_and_one_wrapped_on_purpose_is_not():
    import warnings

    from ropelab.sim.intwrap import IntegerWrap, refusing

    x = np.full(4, 0x40000000, dtype=np.uint32)
    out = np.zeros(4, dtype=np.uint32)
    with refusing(), pytest.raises(IntegerWrap, match=r"a \+= _u32\(0xC4000000\).*64 bits"):
        _rebias_by_wrapping[1, 32](x, out)
    with refusing():
        _rebias_wrapped_on_purpose[1, 32](x, out)
    assert (out == 0x40000000 + 0xC4000000 - 2**32 >> 20).all()
    f = np.full(4, 1e3, dtype=np.float32)
    with refusing(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _float_overflow[1, 32](f, np.zeros_like(f))
