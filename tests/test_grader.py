"""The grader cannot hang, does not misjudge, and draws and times the learner's kernel.

One test per grader defect found in review (and the launch, race and show checks).
Kernels are defined from source text as a notebook cell defines them (source in linecache).
Budget: about 20 s on the simulator (two deliberate 2-second timeouts).
"""

import inspect
import linecache
import re
import textwrap
import time
from dataclasses import replace

import numpy as np
import pytest

import ropelab
from ropelab.grader import grading, intake, kernel_census, learner_time, steps, verify
from ropelab.grader.recording import launch_problem
from ropelab.grader.steps.cases import NO_SIGNED_DIVISION

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="simulator grader")

STEP00 = steps.get("00-first-kernel")
STEP01 = steps.get("01-flat-index")
_count = [0]


def _define(source: str, name: str):
    """Define ``name`` from source text as a notebook cell does (source kept in linecache)."""
    _count[0] += 1
    filename = f"<test cell {_count[0]}>"
    source = "from numba import cuda, float32, int64, uint64\nimport math\n" + \
        textwrap.dedent(source)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


GOOD_00 = """
@cuda.jit
def rotate(x, out, cos_t, sin_t, n):
    i = cuda.grid(1)
    if i < n:
        c = cos_t[i // 2]
        s = sin_t[i // 2]
        if i % 2 == 0:
            out[i] = x[i] * c - x[i + 1] * s
        else:
            out[i] = x[i - 1] * s + x[i] * c
"""


def _launch_step(**changes):
    """A launch step over notebook 00's cases: the learner's host function launches rotate."""
    base = replace(STEP00, id="99.1", kind="launch", kernel_name="launch_rotate",
                   signature=None, gates=(), counters=())
    return replace(base, **changes)


# --- cannot hang ------------------------------------------------------------------------------

def test_a_kernel_that_never_ends_is_stopped_and_the_caller_goes_on():
    spins = _define("""
        @cuda.jit
        def spins(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            while True:
                i += 1
        """, "spins")
    start = time.monotonic()
    verdict = STEP00.check(spins, timeout_s=2)
    took = time.monotonic() - start
    assert verdict.status == "stopped" and not verdict.passed
    assert str(verdict).startswith("stopped after 2 s: does a loop never end?")
    assert took < 2 + 5
    # the caller's process, and the kernel objects it holds, still work
    good = _define(GOOD_00, "rotate")
    assert STEP00.check(good).passed
    assert spins.py_func.__name__ == "spins"


def test_a_launch_function_that_never_ends_is_stopped():
    def launch_rotate(x, out, cos_t, sin_t, n):
        while True:
            pass

    start = time.monotonic()
    verdict = _launch_step().check(launch_rotate, timeout_s=2)
    assert verdict.status == "stopped" and time.monotonic() - start < 7


def test_learner_code_that_exits_the_process_is_a_verdict():
    def launch_rotate(x, out, cos_t, sin_t, n):
        raise SystemExit(3)

    verdict = _launch_step().check(launch_rotate)
    assert verdict.status == "error" and "SystemExit" in str(verdict)


# --- no misjudging ----------------------------------------------------------------------------

def test_a_kernel_that_writes_its_input_fails_and_the_verdict_names_it():
    writes_cos = _define("""
        @cuda.jit
        def writes_cos(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                c = cos_t[i // 2]
                s = sin_t[i // 2]
                if i % 2 == 0:
                    out[i] = x[i] * c - x[i + 1] * s
                else:
                    out[i] = x[i - 1] * s + x[i] * c
                    cos_t[i // 2] = 0.0  # after both floats of the pair read it
        """, "writes_cos")
    verdict = grading.grade(STEP00, writes_cos)
    assert verdict.status == "wrong"
    assert "wrote into its input cos_t" in str(verdict)


def test_a_kernel_that_writes_nan_is_wrong_not_unwritten():
    writes_nan = _define("""
        @cuda.jit
        def writes_nan(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = math.nan
        """, "writes_nan")
    verdict = grading.grade(STEP00, writes_nan)
    assert verdict.status == "wrong"
    assert "never written" not in str(verdict) and "got (nan, nan)" in str(verdict)
    stops_early = _define("""
        @cuda.jit
        def stops_early(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n - 2:
                out[i] = x[i]
        """, "stops_early")
    assert "never written" in str(grading.grade(STEP00, stops_early))


def test_out_of_bounds_names_the_array_and_index_with_a_hint_for_that_array():
    step = replace(STEP00, bounds_hints={"cos_t": "cos_t has one entry per pair: index i // 2"})
    reads_cos_at_i = _define("""
        @cuda.jit
        def reads_cos_at_i(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = x[i] * cos_t[i]
        """, "reads_cos_at_i")
    verdict = grading.grade(step, reads_cos_at_i)
    assert verdict.status == "out of bounds"
    assert "is out of bounds for cos_t (size 1)" in str(verdict)
    assert "hint: cos_t has one entry per pair" in str(verdict)
    negative = _define("""
        @cuda.jit
        def negative(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                out[i] = x[i - 1]
        """, "negative")  # NumPy would wrap x[-1] around; a GPU reads before the buffer
    text = str(grading.grade(step, negative))
    assert "index -1 is out of bounds for x" in text and "hint: " + STEP00.bounds_hint in text


def test_hints_never_name_an_array_the_step_does_not_have():
    case = STEP00.cases()[1]
    alternatives = dict((hint, out) for hint, out in case.alternatives)
    row_hint = next(h for h in alternatives if "positions[" in h)
    got = np.asarray(alternatives[row_hint], dtype=np.float32).ravel()
    e = grading.first_wrong(case, got)
    assert e is not None
    assert "positions" not in grading.diagnose(case, got, e, "fallback", STEP00.arguments)
    assert grading.diagnose(case, got, e, "fallback") == row_hint  # without the filter


def test_compile_errors_are_shown_whole():
    message = ("TypingError: Failed in cuda mode pipeline (step: nopython frontend)\n"
               "Unknown attribute 'zeros' of type Module(numpy)\n\n"
               'File "<cell>", line 5:\ndef k(x):\n    <source elided>\n    a = np.zeros(3)\n'
               "    ^\n\nDuring: typing of get attribute at <cell> (5)\n" + "noise\n" * 50)
    shown = kernel_census.useful_lines(message)
    assert "Unknown attribute 'zeros'" in shown and "a = np.zeros(3)" in shown
    assert "During:" not in shown and "noise" not in shown


def test_np_zeros_in_a_kernel_reads_as_what_it_is():
    uses_zeros = _define("""
        import numpy as np

        @cuda.jit
        def uses_zeros(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                tmp = np.zeros(2, dtype=np.float32)
                c = cos_t[i // 2]
                s = sin_t[i // 2]
                if i % 2 == 0:
                    tmp[0] = x[i] * c - x[i + 1] * s
                else:
                    tmp[0] = x[i - 1] * s + x[i] * c
                out[i] = tmp[0]
        """, "uses_zeros")
    text = str(grading.grade(STEP00, uses_zeros))
    assert text.startswith("error: uses_zeros is right on the simulator") and "np.zeros" in text
    assert "driver init" not in text and "cuda.local.array" in text


def test_a_kernel_calling_a_device_helper_is_counted_without_a_driver():
    # numba-cuda links a helper compiled apart through the driver; the census inlines it
    with_helper = _define("""
        @cuda.jit(device=True)
        def rotate(a, b, c, s):
            return a * c - b * s

        @cuda.jit
        def with_helper(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                c = cos_t[i // 2]
                s = sin_t[i // 2]
                if i % 2 == 0:
                    out[i] = rotate(x[i], x[i + 1], c, s)
                else:
                    out[i] = rotate(x[i], -x[i - 1], c, s)
        """, "with_helper")
    verdict = grading.grade(STEP00, with_helper)
    assert verdict.passed, str(verdict)


def test_float64_from_inside_a_call_names_the_call():
    # round() of a float32 compiles to float64 code, with no float64 operand to blame
    rounds = _define("""
        @cuda.jit
        def rounds(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n:
                c = cos_t[i // 2]
                s = sin_t[i // 2]
                zero = float32(round(x[i] * float32(0.0)))
                if i % 2 == 0:
                    out[i] = x[i] * c - x[i + 1] * s + zero
                else:
                    out[i] = x[i - 1] * s + x[i] * c + zero
        """, "rounds")
    text = str(grading.grade(STEP00, rounds))
    assert "float64" in text and "inside a call" in text and "round(...)" in text, text
    assert "bare literal" not in text


def test_one_division_repeated_by_an_unrolled_loop_is_one_division_a_pass():
    # the compiler unrolls the loop over a signed index (12 div/rem in the PTX text), but one
    # pass runs one division: the step's rule holds, over signed and uint64 values alike (the
    # signed loop is notebook 01's recorded other right kernel, ALSO_RIGHT)
    step = steps.get("01.1")
    signed = verify.load_solution(verify.solution_path(step)).angles_grid_stride
    verdict = grading.grade(step, signed)
    assert verdict.passed, str(verdict)
    source = inspect.getsource(signed.py_func)
    unsigned = _define(source.replace("idx = cuda.grid(1)", "idx = uint64(cuda.grid(1))")
                       .replace("stride = cuda.gridsize(1)", "stride = uint64(cuda.gridsize(1))")
                       .replace("while idx < total_pairs", "while idx < uint64(total_pairs)"),
                       "angles_grid_stride")
    assert grading.grade(step, unsigned).passed
    # a second division on the path is refused
    twice = _define(source.replace("token = i // n_pairs",
                                   "token = i // (uint64(total_pairs) // uint64(positions.shape[0]))"),
                    "angles_grid_stride")
    text = str(grading.grade(step, twice))
    runs = re.search(r"your kernel divides (\d+) times on one path through its code", text)
    assert runs and int(runs.group(1)) >= 2, text


def test_an_unreadable_source_is_a_verdict_not_a_pass():
    namespace = {}
    exec(compile(GOOD_00, "<string>", "exec"), {"cuda": __import__("numba").cuda}, namespace)
    verdict = grading.grade(STEP00, namespace["rotate"])
    assert verdict.status == "error" and "no source" in str(verdict)


def test_a_source_that_does_not_parse_alone_is_a_verdict(monkeypatch):
    good = _define(GOOD_00, "rotate")
    monkeypatch.setattr(kernel_census, "function_source", lambda fn: "k1 = 1; def (:\n")
    verdict = grading.grade(STEP00, good)
    assert verdict.status == "error" and "does not parse" in str(verdict)


ODD_SOURCES = {
    "two kernels on one line": ("a = cuda.jit(lambda x, out, cos_t, sin_t, n: None); "
                                "b = cuda.jit(lambda x, out, cos_t, sin_t, n: None)\n", "a"),
    "a device function": ("@cuda.jit(device=True)\ndef dev(x, out, cos_t, sin_t, n):\n"
                          "    return 1\n", "dev"),
    "a class": ("class K:\n    def __call__(self, *a):\n        pass\n", "K"),
    "a plain function": ("def plain(x, out, cos_t, sin_t, n):\n    out[0] = 1\n", "plain"),
}


@pytest.mark.parametrize("odd", [None, "rotate", 42, 3.5, [], {}, object(), print, np.zeros,
                                 lambda x: x, type, b"\x00"])
def test_odd_objects_get_a_verdict_never_an_exception(odd):
    for step in (STEP00, _launch_step()):
        verdict = grading.grade(step, odd)
        assert verdict.status == "error" and not verdict.passed
        assert str(verdict).startswith("error: not a ")


@pytest.mark.parametrize("what", sorted(ODD_SOURCES))
def test_odd_definitions_get_a_verdict_never_an_exception(what):
    source, name = ODD_SOURCES[what]
    obj = _define(source, name)
    verdict = grading.grade(STEP00, obj)
    assert verdict.status == "error" and "not a kernel" in str(verdict), str(verdict)
    if what == "a device function":
        assert "device function" in str(verdict)
    assert not grading.grade(_launch_step(), obj).passed


def test_01_forbids_percent_and_signed_division():
    solutions = verify.load_solution(verify.solution_path(STEP01))
    percent = solutions.signed_index_math
    verdict = grading.grade(STEP01, percent)
    assert verdict.status == "not solved yet" and "`%` is not allowed" in str(verdict)
    signed = _define("""
        @cuda.jit(fastmath=True)
        def signed_division(x, out, positions, n_pairs, total_pairs, base):
            idx = cuda.grid(1)
            if idx < total_pairs:
                n = int64(n_pairs)
                token = idx // n
                pair = idx - token * n
                e = idx + idx
                x0 = x[e]
                x1 = x[e + 1]
                exponent = float32(pair + pair) / float32(n + n)
                inv_freq = float32(1.0) / math.pow(base, exponent)
                angle = float32(positions[token]) * inv_freq
                c = math.cos(angle)
                s = math.sin(angle)
                out[e] = x0 * c - x1 * s
                out[e + 1] = x0 * s + x1 * c
        """, "signed_division")
    gated = replace(STEP01, gates=STEP01.gates + (NO_SIGNED_DIVISION,))
    verdict = grading.grade(gated, signed)
    assert verdict.status == "not solved yet", str(verdict)
    assert "signed integer div/rem" in str(verdict)
    assert grading.grade(gated, solutions.SOLUTIONS[STEP01.id]).passed


def test_an_empty_starter_body_is_not_solved_yet():
    starter = _define('''
        @cuda.jit
        def rotate(x, out, cos_t, sin_t, n):
            """Write out[i] for every float i < n."""
            pass
        ''', "rotate")
    verdict = grading.grade(STEP00, starter)
    assert verdict.status == "not solved yet" and "empty body" in str(verdict)


# --- launch steps -----------------------------------------------------------------------------

def _launcher(source: str):
    rotate = _define(GOOD_00, "rotate")
    fn = _define(source, "launch_rotate")
    fn.__globals__["rotate"] = rotate
    return fn


def test_a_right_launch_function_passes():
    fn = _launcher("""
        def launch_rotate(x, out, cos_t, sin_t, n):
            threads = 64
            rotate[(n + threads - 1) // threads, threads](x, out, cos_t, sin_t, n)
        """)
    assert grading.grade(_launch_step(), fn).passed


@pytest.mark.parametrize("body, fragment", [
    ("rotate[1, 2048](x, out, cos_t, sin_t, n)", "block of 2048 threads: the limit is 1024"),
    ("rotate[(n + 31) // 32, (32, 32, 2)](x, out, cos_t, sin_t, n)",
     "block of 2048 threads: the limit is 1024"),
    ("rotate[0, 64](x, out, cos_t, sin_t, n)", "must be at least 1"),
    ("rotate[n // 64 + 3, 64](x, out, cos_t, sin_t, n)", "wholly idle"),
    ("rotate[max(1, n // 64), 64](x, out, cos_t, sin_t, n)", "never written"),
    ("threads = 64", "launched no kernel"),
])
def test_launch_rules_each_say_which_rule_failed(body, fragment):
    fn = _launcher(f"""
        def launch_rotate(x, out, cos_t, sin_t, n):
            {body}
        """)
    verdict = grading.grade(_launch_step(), fn)
    assert not verdict.passed and fragment in str(verdict), str(verdict)


def test_launch_problem_limits():
    assert launch_problem(1, 1024) is None
    assert launch_problem((2**31, 1), 32) == ("grid dimension x = 2147483648 blocks: the limit "
                                              "is 2147483647")
    assert launch_problem((1, 70000), 32).startswith("grid dimension y = 70000")
    assert launch_problem(1, (1, 1, 65)) == "block dimension z = 65: the limit is 64"
    assert "dynamic shared memory" in launch_problem(1, 32, 300 * 1024)


# --- shared-memory races ----------------------------------------------------------------------

REDUCE = """
@cuda.jit
def rotate(x, out, cos_t, sin_t, n):
    # every block sums its 64 floats of x through shared memory, then rotates as usual
    sh = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < n else float32(0.0)
    {sync}
    step = 32
    while step > 0:
        if t < step:
            sh[t] += sh[t + step]
        {sync}
        step //= 2
    if i < n:
        c = cos_t[i // 2]
        s = sin_t[i // 2]
        if i % 2 == 0:
            out[i] = x[i] * c - x[i + 1] * s + sh[0] * float32(0.0)
        else:
            out[i] = x[i - 1] * s + x[i] * c
"""


def test_a_reduction_missing_its_syncthreads_is_a_race():
    step = replace(STEP00, shared=True, signature=None, gates=())
    racy = _define(REDUCE.format(sync="pass"), "rotate")
    verdict = grading.grade(step, racy)
    assert verdict.status == "race", str(verdict)
    assert "shared-memory race on" in str(verdict) and "no cuda.syncthreads() between" in str(
        verdict)
    synced = _define(REDUCE.format(sync="cuda.syncthreads()"), "rotate")
    assert grading.grade(step, synced).passed


# --- show and time ----------------------------------------------------------------------------

def test_show_draws_a_failing_kernel_with_its_wrong_cells_marked():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.patches as patches

    flips = _define("""
        @cuda.jit
        def flips(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            if i < n - 2:
                c = cos_t[i // 2]
                s = sin_t[i // 2]
                if i % 2 == 0:
                    out[i] = x[i] * c - x[i + 1] * s
                else:
                    out[i] = x[i] * c - x[i - 1] * s
        """, "flips")
    verdict = STEP00.check(flips)
    fig = verdict.show()
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("who wrote out") and titles[1] == "who last read x"
    assert titles[2] == "reference (float64)" and titles[4].startswith("global-memory accesses")
    # case 3x10 (the largest of at most 64 elements): floats 0..27 written, the odd ones wrong
    marked = [p for p in fig.axes[3].patches if isinstance(p, patches.Rectangle)]
    assert len(marked) == 14 + 2  # 14 wrong values and the 2 floats never written
    assert "2 never written" in titles[3]
    assert fig.axes[0].get_images()[0].get_array().shape == (3, 10)


def test_show_draws_a_passing_kernel_too():
    import matplotlib
    matplotlib.use("Agg")
    verdict = STEP00.check(_define(GOOD_00, "rotate"))
    fig = verdict.show()
    assert fig.axes[3].get_title().startswith("yours: 0 wrong")


def test_time_without_a_gpu_says_it_predicts_or_that_no_model_is_installed(monkeypatch, capsys):
    verdict = STEP00.check(_define(GOOD_00, "rotate"))
    capsys.readouterr()
    monkeypatch.setattr(learner_time, "prediction_model", lambda: None)
    verdict.time()
    assert "no prediction model is installed" in capsys.readouterr().out
    seen = {}

    class FakeModel:  # ropelab.grader.predict's interface, answering 12.5 us
        @staticmethod
        def explain_step(step, fn, progress=None):
            seen.update(step=step, fn=fn)
            f = {"blocks": 4.0, "threads_per_block": 64.0, "waves": 1.0}
            return {"us": 12.5, "low": 11.0, "high": 14.0, "copy_us": 10.0, "case": "c",
                    "bytes_moved": 2e6, "launches": [{"us": 12.5, "binding": "memory",
                                                      "features": f}]}

        @staticmethod
        def figure(why):
            return f"{why['us']:.1f} us (80% range {why['low']:.1f}-{why['high']:.1f} us)"

    monkeypatch.setattr(learner_time, "prediction_model", lambda: FakeModel)
    verdict.time()
    text = capsys.readouterr().out
    assert "Predicted H200 time" in text and "12.5 us (80% range 11.0-14.0 us)" in text
    assert seen["step"].id == verdict.exercise and seen["fn"] is verdict.subject[1]


def test_identify_refuses_a_kernel_as_a_launch_function():
    good = _define(GOOD_00, "rotate")
    fn, why = intake.identify(_launch_step(), good)
    assert fn is None and why.startswith("not a launch function")


def test_a_launch_steps_starter_is_not_solved_yet():
    step = _launch_step(starter='''
        def launch_rotate(x, out, cos_t, sin_t, n):
            """Launch rotate with one thread per float of x: compute grid and block from n."""
            pass
        ''')
    starter = verify.starter_kernel(step)
    verdict = grading.grade(step, starter)
    assert verdict.status == "not solved yet" and "empty body" in str(verdict)


WARP_EXCHANGE = """
@cuda.jit
def exchange(x, out):
    sh = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncwarp()
    out[t] = sh[{partner}]
"""


def test_syncwarp_orders_lanes_of_one_warp_but_not_two_warps():
    from ropelab.sim import shared_race

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, dtype=np.float32)
    within = _define(WARP_EXCHANGE.format(partner="t ^ 1"), "exchange")
    with shared_race.watching():
        within[1, 64](x, out)
    assert np.array_equal(out, x.reshape(32, 2)[:, ::-1].ravel())
    across = _define(WARP_EXCHANGE.format(partner="(t + 32) % 64"), "exchange")
    with shared_race.watching(), pytest.raises(shared_race.SharedMemoryRace,
                                               match="no cuda.syncthreads"):
        across[1, 64](x, out)


def test_an_interrupt_while_waiting_kills_the_child(monkeypatch):
    import os

    from ropelab.grader import child

    started = []
    real_fork = os.fork

    def fork():
        pid = real_fork()
        if pid:
            started.append(pid)
        return pid

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(child.Child, "_frame", interrupted)  # the first thing a wait does
    with pytest.raises(KeyboardInterrupt):
        child.in_child(lambda: time.sleep(60), 30)
    assert len(started) == 1
    with pytest.raises(ChildProcessError):  # already reaped: killed and waited for
        os.waitpid(started[0], os.WNOHANG)


def test_ladder_rules_apply_once_a_notebook_has_a_ladder():
    (one,) = verify.ladder_outcomes("00", [STEP00])
    assert one.ok and "not a ladder yet" in one.verdict
    empty_starter = '''
        def launch_rotate(x, out, cos_t, sin_t, n):
            """Launch rotate."""
            pass
        '''
    launch = _launch_step(starter=empty_starter)
    skeleton = replace(STEP00, starter='''
        @cuda.jit(fastmath=True)
        def rotate_elements(x, out, cos_t, sin_t, n):
            i = cuda.grid(1)
            ...
        ''')  # a starter with code to complete: not an empty body
    outcomes = verify.ladder_outcomes("99", [launch, skeleton])
    assert [o.ok for o in outcomes] == [False, False, True]  # 2 steps, 1 empty body, 1 launch
    outcomes = verify.ladder_outcomes("99", [launch, replace(launch, id="99.2"), STEP00])
    assert all(o.ok for o in outcomes), outcomes


def test_launch_steps_hand_the_learner_plain_python_ints():
    # numba-cuda on a GPU refuses a NumPy integer as a grid size, so a launch function must get
    # the sizes as a shape computation would give them; kernel steps keep their NumPy types.
    from ropelab.grader.trial import host_scalar

    launch_step, kernel_step = steps.get("00.4"), steps.get("01.4")
    assert launch_step.kind == "launch" and kernel_step.kind == "kernel"
    got = host_scalar(launch_step, np.int64(7))
    assert got == 7 and type(got) is int
    assert type(host_scalar(kernel_step, np.uint64(7))) is np.uint64


def test_time_never_raises_and_only_times_kernels_as_the_reference(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no device")

    monkeypatch.setattr(learner_time, "time_on_gpu", broken)
    text = grading.verdict_timer(steps.get("00.1"), None)(3)
    assert text.startswith("not timed: RuntimeError")
    # a reference name that resolves to a host function is not launched as a kernel
    for step_id in steps.STEPS:
        ref = learner_time._reference_kernel(steps.get(step_id))
        assert ref is None or callable(getattr(ref, "__getitem__", None)), step_id
