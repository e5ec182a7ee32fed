"""The grader cannot be fooled: each exploit from the public catalogues of grader hacks (GPU
MODE's reference-kernels issues, KernelBench's reward-hacking reports) that applies to a
Python/Numba learner, each refused with a verdict that says what happened.

An exploit is one entry of :data:`EXPLOITS`: a notebook cell (source text) that defines the
graded function, the step it is checked against, and the words its verdict must contain.  The
cells run as a learner's would: ``steps.check`` on the simulator, in the forked child.  Cells
that need the grader's pipe find it as a cheater reading the grader's source would (the
child's frame that holds it); none writes to any other descriptor (the test runner's own pipes
are among them).  Budget: about 15 s (three deliberate 1-second timeouts).
"""

import linecache
import math
import os
import platform
import sys
import textwrap
import time
from dataclasses import dataclass, replace

import numpy as np
import pytest

import ropelab
from ropelab.grader import (carried, child, confine, grading, learner_time, runner, steps,
                            tamper, unseen, wire)

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's grader")


@pytest.fixture(autouse=True)
def behind_the_first_rule(monkeypatch):
    """Nearly every exploit here imports, walks frames or reads an argument's records, which
    the grader refuses before anything runs (:func:`ropelab.grader.intake.reaching_out`, tested
    in tests/test_grader_loopholes.py).  These tests are of the defences behind that rule, so
    it is lifted here (in this process, where the intake runs)."""
    from ropelab.grader import intake

    monkeypatch.setattr(intake, "_reaching_problem", lambda *args: None)

LAUNCH = "00.4"  # a launch step: the learner's host code runs, so every host trick applies
KERNEL = "00.3"  # the kernel step it launches (its census catches Python-only kernels)

HEADER = '''
import gc, math, os, pickle, signal, struct, sys, time, types
import numpy as np
from numba import cuda, float32

@cuda.jit
def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < n_pairs:
        c = cos_t[p]
        s = sin_t[p]
        x0 = x[2 * p]
        x1 = x[2 * p + 1]
        out[2 * p] = x0 * c - x1 * s
        out[2 * p + 1] = x0 * s + x1 * c

@cuda.jit
def empty_kernel(x, out, cos_t, sin_t, n_pairs):
    p = cuda.grid(1)
    if p < 0:
        out[0] = x[0]

@cuda.jit
def copy_kernel(src, out, cos_t, sin_t, n_pairs):  # the contract's arguments, src for x
    i = cuda.grid(1)
    if i < out.size:
        out[i] = src[i]

@cuda.jit
def pair_copy_kernel(src, out, cos_t, sin_t, n_pairs):  # thread p writes pair p, as 00.3 asks
    p = cuda.grid(1)
    if p < n_pairs:
        out[2 * p] = src[2 * p]
        out[2 * p + 1] = src[2 * p + 1]

def honest_launch(x, out, cos_t, sin_t, n_pairs):
    rotate_pairs[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)

def launch_empty(x, out, cos_t, sin_t, n_pairs):
    empty_kernel[(n_pairs + 63) // 64, 64](x, out, cos_t, sin_t, n_pairs)

def data(a):
    """The host array behind a simulator argument (a WatchedArray, or a plain array)."""
    return getattr(a, "data", a)

def answer(x, cos_t, sin_t):
    """The right output, computed from the inputs (float64)."""
    x0, x1 = data(x)[0::2].astype(np.float64), data(x)[1::2].astype(np.float64)
    c, s = data(cos_t).astype(np.float64), data(sin_t).astype(np.float64)
    out = np.empty(x0.size * 2)
    out[0::2], out[1::2] = x0 * c - x1 * s, x0 * s + x1 * c
    return out

def grader_pipe():
    """The grading child's write end of its result pipe, found in the child's frames."""
    for frame in sys._current_frames().values():
        while frame is not None:
            if frame.f_code.co_name == "_child_main":
                return frame.f_locals["up"]
            frame = frame.f_back
    return None

def frame_of(payload):
    return b"RLG1" + struct.pack("<Q", len(payload)) + payload

def is_the_answer(value, want):
    return (want is not None and value is not want and type(value) is np.ndarray
            and value.dtype == np.float64 and value.size == want.size
            and np.allclose(value.ravel(), want, rtol=1e-4, atol=1e-4))

import ropelab as _ropelab
GRADER = os.path.dirname(_ropelab.__file__)  # frames of the grader's own code
from ropelab.grader import steps as _steps
PUBLIC_X = [c.inputs["x"].copy() for c in _steps.get("00.4").cases()]  # inputs, no answers

def is_public(x):
    """One of the step's fixed cases (whose answers anyone can compute beforehand)."""
    return any(np.array_equal(data(x), p) for p in PUBLIC_X)

def find_answer(want, roots, grader=False):
    """Raise FOUND for the answer ``want`` among ``roots`` and one level inside them, or (in
    the grader's frames, ``grader``) for anything holding an ``.expected`` array."""
    for value in roots:
        inner = ()
        try:
            if isinstance(value, dict):
                inner = list(value.values())
            elif isinstance(value, (list, tuple)):
                inner = list(value)
            elif hasattr(value, "__dict__"):
                inner = list(vars(value).values())
        except Exception:
            continue
        for v in [value, *inner]:
            if is_the_answer(v, want):
                raise RuntimeError(f"FOUND the answer in a {type(value).__name__}")
            try:
                expected = vars(v).get("expected") if hasattr(v, "__dict__") else None
            except Exception:
                expected = None
            if grader and isinstance(expected, np.ndarray):
                raise RuntimeError(f"FOUND an .expected on a {type(v).__name__} in the grader")
'''


CONFINED = "PermissionError"  # refused by the child's seccomp filter (grader/confine.py)


@dataclass
class Exploit:
    """One trick.  To add one (a red-teamer's, say), append
    ``Exploit("what it does", CELL_SOURCE, step="01.2", name="the_function")`` to
    :data:`EXPLOITS`; ``says`` (words the verdict must contain) may stay empty, and the test
    then asks only that it is refused, in time, with no answer found and the caller unharmed."""

    what: str  # the catalogue's name for the trick
    source: str  # the cell: defines `name` (the HEADER's helpers are in scope)
    says: tuple = ()  # the verdict contains one of these (empty: any refusal)
    step: str = LAUNCH
    name: str = "launch_rotate_pairs"
    timeout_s: float = 10.0


EXPLOITS = [
    Exploit("frame walking: the grader's locals and any frame, from sys._getframe().f_back", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            # on a fixed case only the grader's own frames are searched (anyone can compute
            # the public answers beforehand); on the fresh case every frame is
            want = None if is_public(x) else answer(x, cos_t, sin_t)
            frame = sys._getframe()
            for start in [frame, *sys._current_frames().values()]:
                frame = start
                while frame is not None:
                    find_answer(want, list(frame.f_locals.values()),
                                grader=frame.f_code.co_filename.startswith(GRADER))
                    frame = frame.f_back
            (honest_launch if want is None else launch_empty)(x, out, cos_t, sin_t, n_pairs)
        ''', ("never written",)),
    Exploit("scanning the garbage collector's objects for the answer", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            if is_public(x):  # a fixed case: pass it, to reach the fresh one
                return honest_launch(x, out, cos_t, sin_t, n_pairs)
            want = answer(x, cos_t, sin_t)
            for obj in gc.get_objects():  # every array any tracked object refers to
                for value in gc.get_referents(obj):
                    if is_the_answer(value, want):
                        raise RuntimeError(f"FOUND the answer in a {type(obj).__name__}")
            launch_empty(x, out, cos_t, sin_t, n_pairs)
        ''', ("never written",), timeout_s=60.0),  # a test runner's heap takes a while
    Exploit("a pickled PASS verdict written to the result pipe, then os._exit(0)", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader.grade_types import Verdict
            forged = pickle.dumps(("ok", (Verdict("00.4", "PASS", ["PASS 00.4"]), {})))
            os.write(grader_pipe(), forged)
            os._exit(0)
        ''', ("bytes that are not a frame",)),
    Exploit("a well-formed frame that carries a PASS verdict", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import wire
            message = ("failed", 0, "PASS", ["PASS 00.4: launch_rotate_pairs matches"])
            os.write(grader_pipe(), frame_of(wire.encode(message)))
            os._exit(0)
        ''', ("sent a verdict",)),
    Exploit("a well-formed frame with a failure that reads as a pass", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import wire
            message = ("failed", 0, "error", ["error: none", "PASS 00.4: all right"])
            os.write(grader_pipe(), frame_of(wire.encode(message)))
            os._exit(0)
        ''', ("sent a verdict",)),
    Exploit("a well-formed frame about another case than the one asked", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import wire
            message = ("failed", np.int64(0), "error", ["error: none"])
            os.write(grader_pipe(), frame_of(wire.encode(message)))
            os._exit(0)
        ''', ("something that is not an answer",)),
    Exploit("a well-formed frame with made-up results, sent before the real ones", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import wire
            from ropelab.grader.trial import Trial
            size = data(out).size
            fake = Trial(np.zeros(size, np.float32), {}, [], {})
            os.write(grader_pipe(), frame_of(wire.encode(("ran", 0, fake))))
            honest_launch(x, out, cos_t, sin_t, n_pairs)
        ''', ("did not fit case",)),
    Exploit("os._exit(0) before the results are sent", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            honest_launch(x, out, cos_t, sin_t, n_pairs)
            os._exit(0)
        ''', ("ended before launch_rotate_pairs handed back case 1x2 (exit status 0)",)),
    Exploit("killing its own process", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            os.kill(os.getpid(), signal.SIGKILL)
        ''', ("killed by signal 9",)),
    Exploit("garbage bytes on the result pipe", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            os.write(grader_pipe(), bytes(range(256)) * 4)
            honest_launch(x, out, cos_t, sin_t, n_pairs)
        ''', ("bytes that are not a frame",)),
    Exploit("a frame that claims a terabyte (oversized output)", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            os.write(grader_pipe(), b"RLG1" + struct.pack("<Q", 1 << 40))
            while True:
                os.write(grader_pipe(), b"\\0" * 65536)
        ''', ("the limit is",)),
    Exploit("flooding the result pipe", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            while True:
                os.write(grader_pipe(), b"\\0" * 65536)
        ''', ("bytes that are not a frame",)),
    Exploit("a frame that does not decode (a record the format does not carry)", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            payload = b"r" + struct.pack("<Q", 8) + b"os.popen" + struct.pack("<Q", 0)
            os.write(grader_pipe(), frame_of(payload))
            os._exit(0)
        ''', ("does not decode",)),
    Exploit("monkeypatching numpy and the grader's judging from inside the function", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import carried, grading, runner
            np.abs = lambda a: np.zeros(np.shape(a))
            np.argmax = lambda a: 0
            grading._compare = lambda *args: None
            grading.first_wrong = lambda *args: None
            grading.judge_case = runner.judge_case = lambda *args: None
            carried.trial_problem = lambda *args: None
            launch_empty(x, out, cos_t, sin_t, n_pairs)
        ''', ("never written",)),
    Exploit("patching the clock so that the time limit never comes", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            time.monotonic = time.perf_counter = time.time = lambda: 0.0
            from ropelab.grader import child
            child.Child._spend = lambda self, since: 1e9
            while True:
                pass
        ''', ("stopped after 1 s",), timeout_s=1.0),
    Exploit("patching numba's launch machinery to launch nothing", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from numba.cuda.simulator.kernel import FakeCUDAKernel
            FakeCUDAKernel.__getitem__ = lambda self, config: (lambda *args: None)
            FakeCUDAKernel.__call__ = lambda self, *args: None
            honest_launch(x, out, cos_t, sin_t, n_pairs)
        ''', ("never written", "launched no kernel")),
    Exploit("stored answers: a table built from the step's public cases", '''
        from ropelab.grader import steps as _steps
        TABLE = {c.out_size: c.expected.ravel().astype(np.float32)
                 for c in _steps.get("00.4").cases()}

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            size = data(out).size
            pair_copy_kernel[(n_pairs + 63) // 64, 64](TABLE[size], out, cos_t, sin_t, n_pairs)
        ''', ("fresh random inputs",)),
    Exploit("caching outputs from one call to the next", '''
        CACHE = {}

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            size = data(out).size
            if size not in CACHE:
                honest_launch(x, out, cos_t, sin_t, n_pairs)
                CACHE[size] = data(out).copy()
            else:
                pair_copy_kernel[(n_pairs + 63) // 64, 64](CACHE[size], out, cos_t, sin_t,
                                                           n_pairs)
        ''', ("fresh random inputs",)),
    Exploit("a kernel that returns answers from a table in its globals", '''
        from ropelab.grader import steps as _steps
        _CASES = _steps.get("00.3").cases()
        OFFSETS = {}
        _at = 0
        for _c in _CASES:
            OFFSETS[_c.out_size // 2] = _at
            _at += _c.out_size
        TABLE = np.concatenate([c.expected.ravel() for c in _CASES]).astype(np.float32)
        START = np.array([OFFSETS.get(n, 0) for n in range(400)], np.int64)
        del _CASES, _c

        @cuda.jit
        def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                at = START[n_pairs] + 2 * p
                out[2 * p] = TABLE[at]
                out[2 * p + 1] = TABLE[at + 1]
        ''', ("fresh random inputs",), step=KERNEL, name="rotate_pairs"),
    Exploit("an output that aliases an input", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            out.data = x.data
            launch_empty(x, out, cos_t, sin_t, n_pairs)
        ''', ("wrong:",)),
    Exploit("an output replaced by an ndarray subclass whose comparisons lie", '''
        class Liar(np.ndarray):
            def __sub__(self, other):
                return np.zeros(np.shape(other))
            __rsub__ = __sub__
            def astype(self, *args, **kwargs):
                return self
            def __le__(self, other):
                return np.ones(np.shape(self), bool)

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            out.data = np.zeros(data(out).size, np.float32).view(Liar)
            launch_empty(x, out, cos_t, sin_t, n_pairs)
        ''', ("cannot carry",)),
    Exploit("rewriting an input so that a wrong output looks right", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            data(x)[:] = 0.0
            zeros = np.zeros(data(out).size, np.float32)
            copy_kernel[(zeros.size + 63) // 64, 64](zeros, out, cos_t, sin_t, n_pairs)
        ''', ("wrote into its input x",)),
    Exploit("SystemExit from the function", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            raise SystemExit(0)
        ''', ("raised SystemExit",)),
    Exploit("KeyboardInterrupt from the function", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            raise KeyboardInterrupt
        ''', ("raised KeyboardInterrupt",)),
    Exploit("a BaseException subclass of its own", '''
        class Escape(BaseException):
            pass

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            raise Escape("out")
        ''', ("raised Escape",)),
    Exploit("SystemExit inside a simulated kernel thread", '''
        @cuda.jit
        def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            raise SystemExit(0)
        ''', ("SystemExit",), step=KERNEL, name="rotate_pairs"),
    Exploit("an exception whose message cannot be read", '''
        class Unreadable(Exception):
            def __str__(self):
                raise RuntimeError("no message")

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            raise Unreadable()
        ''', ("its message could not be read",)),
    Exploit("returning an odd object (equal to everything, false to nothing)", '''
        class Odd:
            def __eq__(self, other):
                return True
            def __bool__(self):
                raise RuntimeError("no truth")
            def __repr__(self):
                raise RuntimeError("no repr")

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            launch_empty(x, out, cos_t, sin_t, n_pairs)
            return Odd()
        ''', ("never written",)),
    Exploit("sleeping past the time limit", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            time.sleep(3600)
        ''', ("stopped after 1 s",), timeout_s=1.0),
    Exploit("leaving its process group, then sleeping past the time limit", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            os.setpgid(0, os.getpgid(os.getppid()))
            time.sleep(3600)
        ''', ("stopped after 1 s", CONFINED), timeout_s=1.0),
    Exploit("a grandchild that keeps the result pipe open after the child exits", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
            os._exit(0)
        ''', ("ended before",)),
    Exploit("a grandchild outside the process group that forges an answer later", '''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import wire
            pipe = grader_pipe()
            if os.fork() == 0:
                os.setsid()
                time.sleep(0.3)
                try:
                    os.write(pipe, frame_of(wire.encode(("failed", 0, "PASS", ["PASS"]))))
                finally:
                    os._exit(0)
            os._exit(0)
        ''', ("ended before", "sent a verdict", CONFINED)),
    Exploit("Python in a simulated kernel: the answer computed on the host from its thread", '''
        @cuda.jit
        def rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            p = cuda.grid(1)
            if p < n_pairs:
                want = answer(x, cos_t, sin_t)
                out[2 * p] = want[2 * p]
                out[2 * p + 1] = want[2 * p + 1]
        ''', ("does not compile for a GPU", "census failed"), step=KERNEL, name="rotate_pairs"),
]

_count = [0]
_UNTOUCHED = (np.abs, np.argmax, grading._compare, time.monotonic)


def _exploit(what: str) -> Exploit:
    (found,) = [e for e in EXPLOITS if e.what.startswith(what)]
    return found


def _define(source: str, name: str):
    """Define ``name`` from a cell's source as a notebook does (its source in linecache)."""
    _count[0] += 1
    filename = f"<integrity cell {_count[0]}>"
    text = textwrap.dedent(HEADER) + "\n" + textwrap.dedent(source)
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace = {"__name__": "__main__"}
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]


@pytest.fixture(scope="module")
def honest():
    return _define("launch_rotate_pairs = honest_launch\n", "launch_rotate_pairs")


def test_the_honest_function_the_exploits_start_from_passes(honest):
    assert steps.check(honest, LAUNCH).passed


@pytest.mark.parametrize("exploit", EXPLOITS, ids=[e.what for e in EXPLOITS])
def test_an_exploit_is_refused_with_a_verdict_that_says_what_happened(exploit, capsys):
    if CONFINED in exploit.says and confine._ARCHES.get(platform.machine()) is not None \
            and sys.platform.startswith("linux"):  # the filter refuses leaving the group
        exploit = replace(exploit, says=(CONFINED,))
    fn = _define(exploit.source, exploit.name)
    start = time.monotonic()
    verdict = steps.check(fn, exploit.step, timeout_s=exploit.timeout_s)
    took = time.monotonic() - start
    text = str(verdict)
    assert not verdict.passed, text
    assert verdict.status != "PASS" and not text.startswith("PASS"), text
    assert "FOUND" not in text, text  # the answer was nowhere the learner's code could look
    assert not exploit.says or any(fragment in text for fragment in exploit.says), text
    assert took < exploit.timeout_s + 8, took
    # the caller's process is untouched: NumPy and the grader still judge
    assert (np.abs, np.argmax, grading._compare, time.monotonic) == _UNTOUCHED
    verdict.time()  # never raises, on any verdict
    assert "nothing timed" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["tampered", "ended", "stopped"])
def test_show_never_raises_on_a_refused_verdict(kind, capsys):
    import matplotlib
    matplotlib.use("Agg")
    source = _exploit({"tampered": "a well-formed frame that carries", "ended": "os._exit(0)",
                       "stopped": "sleeping"}[kind])
    verdict = steps.check(_define(source.source, source.name), source.step, timeout_s=1)
    capsys.readouterr()
    figure = verdict.show()
    said = capsys.readouterr().out
    assert figure is None and said.startswith("nothing to show: "), said


def test_show_never_raises_on_any_verdict_shape(capsys):
    import matplotlib
    matplotlib.use("Agg")
    for odd in (None, (), ("step",), (None, None), "x", (steps.get(LAUNCH), None)):
        verdict = grading.Verdict(LAUNCH, "wrong", ["wrong: planted"], subject=odd)
        verdict.timeout_s = "soon"  # a limit show() cannot use: it takes its own
        figure = verdict.show()  # (step, None) runs None: drawn as far as it got, or said
        said = capsys.readouterr().out
        assert figure is not None or said.startswith("nothing to show: "), (odd, said)
    verdict = grading.Verdict(LAUNCH, "PASS", ["PASS"], timer=lambda r: 1 / 0)
    verdict.time()
    assert "nothing timed" in capsys.readouterr().out


# --- in the grader's own process (a GPU, Windows): grading.grade --------------------------

def test_in_one_process_the_answer_exists_only_after_the_run(honest):
    hunt = _define(_exploit("frame walking").source, "launch_rotate_pairs")
    text = str(grading.grade(steps.get(LAUNCH), hunt))
    assert "FOUND" not in text and "never written" in text, text
    scan = _define(_exploit("scanning the garbage").source, "launch_rotate_pairs")
    text = str(grading.grade(steps.get(LAUNCH), scan))
    assert "FOUND" not in text and "never written" in text, text
    assert grading.grade(steps.get(LAUNCH), honest).passed


def test_the_parent_builds_the_cases_only_after_the_fork(honest, monkeypatch):
    forked = []
    real_fork = os.fork

    def fork():
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    step = steps.get(LAUNCH)
    built = []

    def make_cases(big):
        built.append(len(forked))  # how many children existed when a case was built
        return step.make_cases(big)

    monkeypatch.setattr(os, "fork", fork)
    verdict = runner.grade_safely(replace(step, make_cases=make_cases), honest)
    assert verdict.passed and len(forked) == 1
    assert built and all(n == 1 for n in built), built


def test_in_one_process_replacing_the_grader_or_numpy_is_caught_and_undone():
    original = (grading._compare, np.abs, time.perf_counter, steps.get(LAUNCH).make_cases)
    patches = _define('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            from ropelab.grader import grading, steps as _steps
            grading._compare = lambda *args: None
            np.abs = lambda a: np.zeros(np.shape(a))
            time.perf_counter = lambda: 0.0
            object.__setattr__(_steps.get("00.4"), "make_cases", lambda big: [])
            honest_launch(x, out, cos_t, sin_t, n_pairs)
        ''', "launch_rotate_pairs")
    verdict = grading.grade(steps.get(LAUNCH), patches)
    text = str(verdict)
    assert verdict.status == "error" and "could not trust this run" in text, text
    for name in ("ropelab.grader.grading._compare", "numpy.abs", "time.perf_counter",
                 "the step.make_cases"):
        assert name in text or "more" in text, text
    assert (grading._compare, np.abs, time.perf_counter,
            steps.get(LAUNCH).make_cases) == original


# --- the arguments of check() ------------------------------------------------------------

@pytest.mark.parametrize("timeout_s, error", [
    (0, ValueError), (-1, ValueError), (math.nan, ValueError), (math.inf, ValueError),
    (-math.inf, ValueError), ("5", TypeError), (True, TypeError), (None, TypeError),
    (b"5", TypeError), (1j, TypeError)])
def test_a_bad_time_limit_is_refused_before_anything_runs(timeout_s, error, honest,
                                                          monkeypatch):
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("a child was forked"))
    with pytest.raises(error, match="timeout_s"):
        steps.check(honest, LAUNCH, timeout_s=timeout_s)
    with pytest.raises(error, match="timeout_s"):
        steps.get(LAUNCH).check(honest, timeout_s=timeout_s)


@pytest.mark.parametrize("fn", [None, 42, "launch_rotate_pairs", [], b"", np.zeros(3)])
def test_a_non_callable_is_refused_before_anything_runs(fn, monkeypatch):
    monkeypatch.setattr(os, "fork", lambda: pytest.fail("a child was forked"))
    with pytest.raises(TypeError, match="grades a function"):
        steps.check(fn, LAUNCH)


def test_what_was_handed_in_is_read_without_running_any_of_its_code(monkeypatch):
    ran = []

    class Sneaky:  # a callable whose attribute reads, repr and truth would all run code
        def __call__(self, *args):
            ran.append("call")

        def __getattr__(self, name):
            ran.append(name)
            raise AttributeError(name)

        def __repr__(self):
            ran.append("repr")
            return "sneaky"

        py_func = property(lambda self: ran.append("py_func"))

    monkeypatch.setattr(os, "fork", lambda: pytest.fail("a child was forked"))
    for step in (LAUNCH, KERNEL):
        verdict = steps.check(Sneaky(), step)
        assert verdict.status == "error" and "a Sneaky object" in str(verdict), str(verdict)
    assert ran == []


def test_an_unknown_step_is_a_clear_error(honest):
    with pytest.raises(ValueError, match="no step '99.9'") as raised:
        steps.check(honest, "99.9")
    assert isinstance(raised.value, KeyError)  # as before: a lookup that found nothing
    assert str(raised.value).startswith("no step")
    with pytest.raises(TypeError, match="a step id is a string"):
        steps.check(honest, 4.1)
    assert runner.checked_timeout(np.float32(2.5)) == 2.5
    assert runner.checked_timeout(3) == 3.0


# --- the pieces ----------------------------------------------------------------------------

def test_the_wire_format_refuses_pickles_junk_unknown_records_and_oversize():
    import pickle

    value = ("ran", 0, {"a": np.arange(6, dtype=np.int64).reshape(2, 3), "b": [1.5, None, "s"]})
    back = wire.decode(wire.encode(value), 1 << 20)
    assert back[:2] == ("ran", 0) and back[2]["b"] == [1.5, None, "s"]
    assert type(back[2]["a"]) is np.ndarray and back[2]["a"].tolist() == [[0, 1, 2], [3, 4, 5]]
    for junk in (pickle.dumps(value), b"", b"x", wire.encode(value) + b"\0",
                 wire.encode(value)[:-1], b"a" + b"\xff" * 40):
        with pytest.raises(wire.WireError):
            wire.decode(junk, 1 << 20)
    with pytest.raises(wire.WireError, match="over the limit"):
        wire.decode(wire.encode(list(range(100))), 64)
    with pytest.raises(wire.WireError, match="not one this format carries"):
        wire.decode(b"r" + (8).to_bytes(8, "little") + b"os.popen" + bytes(8), 100)
    with pytest.raises(wire.WireError, match="cannot carry"):
        wire.encode(np.zeros(2).view(type("Sub", (np.ndarray,), {})))
    with pytest.raises(wire.WireError, match="cannot carry"):
        wire.encode(np.array([object()]))
    with pytest.raises(wire.WireError, match="nested deeper"):
        nested = []
        for _ in range(wire.MAX_DEPTH + 2):
            nested = [nested]
        wire.encode(nested)
    trial = carried.sanitized(grading.run(steps.get(KERNEL), steps.get(KERNEL).cases()[0],
                                          _define(HEADER, "rotate_pairs")))
    assert type(trial.watched["out"].data) is np.ndarray and trial.watched["x"].size == 2


# Steps whose inputs are drawn from no seed, so there is nothing fresh to draw: 01.3's are
# n_pairs and base only.  A new step lands here only by a decision, written down.
# 01.3's inputs are a size and the base: no seed, but the fresh case takes another base
NOTHING_TO_DRAW: set = set()


def test_every_step_has_a_fresh_case_that_differs_and_is_reproducible():
    for step in steps.STEPS.values():
        fixed = step.cases()
        fresh = unseen.fresh_case(step, 12345, fixed)
        if step.id in NOTHING_TO_DRAW:
            assert fresh is None, step.id
            continue
        assert fresh is not None, step.id
        again = unseen.fresh_case(step, 12345)
        assert fresh.label == again.label and unseen.is_fresh(fresh)
        assert np.array_equal(fresh.expected, again.expected, equal_nan=True)
        counterpart = next(c for c in fixed if fresh.label == f"{c.label}, {unseen.FRESH}")
        # equal_nan: a NaN is an element left untouched (notebook 10)
        assert not np.array_equal(fresh.expected, counterpart.expected, equal_nan=True)
        if "base" in step.arguments:  # drawn with another rope base too
            assert fresh.inputs["base"] != counterpart.inputs["base"], step.id
    assert np.random.default_rng(5).random() == np.random.default_rng(5).random()


def test_the_child_says_how_it_ended():
    assert child.in_child(lambda: 7, 10) == ("ok", 7)
    how, detail = child.in_child(lambda: os._exit(3), 10)
    assert how == "exited" and "exit status 3" in detail
    how, _ = child.in_child(lambda: time.sleep(60), 0.5)
    assert how == "stopped"
    how, detail = child.in_child(lambda: object(), 10)
    assert how == "raised" and "cannot carry" in detail  # an answer that cannot be sent


def test_a_guard_names_and_undoes_what_changed():
    guard = tamper.Guard()
    saved = np.isnan
    np.isnan = lambda a: a
    try:
        assert "numpy.isnan" in guard.changed()
    finally:
        assert "numpy.isnan" in guard.restore()
    assert np.isnan is saved and guard.changed() == []


# --- verdict.time() on a GPU, exercised on the simulator with a stand-in timer ---------------

class _StandInTimer:
    """What time_on_gpu needs of the Timer: flush() before each timed launch, time()."""

    def __init__(self, repeats):
        self.repeats = repeats
        self.last_host_us = []  # the Timer's host-side launch costs (none measured here)

    def flush(self):
        pass

    def time(self, launch, repeats=None):
        launch()  # the warm-up call
        out = []
        for _ in range(self.repeats):
            self.flush()
            start = time.perf_counter()
            launch()
            out.append((time.perf_counter() - start) * 1e6)
        return out


def _small_timing_step():
    step = steps.get(LAUNCH)
    small = step.make_cases
    return replace(step, make_cases=lambda big: small(False)[1:2] if big else small(False))


@pytest.mark.parametrize("cell, says", [
    ("launch_rotate_pairs = honest_launch\n", "your kernel"),
    ('''
        CALLS = []

        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            CALLS.append(1)
            if len(CALLS) == 1:  # computed once; later calls count on out still holding it
                honest_launch(x, out, cos_t, sin_t, n_pairs)
        ''', "never written by the last timed run"),
    ('''
        def launch_rotate_pairs(x, out, cos_t, sin_t, n_pairs):
            time.perf_counter = lambda: 0.0
            honest_launch(x, out, cos_t, sin_t, n_pairs)
        ''', "replaced time.perf_counter"),
])
def test_timing_refuses_cached_results_and_a_patched_clock(cell, says, monkeypatch):
    monkeypatch.setattr(learner_time, "timer_class", lambda: _StandInTimer)
    step = _small_timing_step()
    fn = _define(cell, "launch_rotate_pairs")
    text = grading.verdict_timer(step, fn)(3)
    assert says in text, text
    assert time.perf_counter.__module__ == "time" or "perf_counter" in repr(time.perf_counter)


def test_timing_refuses_a_time_far_below_a_copy_of_the_same_bytes(honest, monkeypatch):
    class Unbracketed(_StandInTimer):  # as if the work ran on a stream the events miss
        calls = 0

        def time(self, launch, repeats=None):
            times = super().time(launch, repeats)
            Unbracketed.calls += 1
            return [0.5] * len(times) if Unbracketed.calls == 1 else [20.0] * len(times)

    monkeypatch.setattr(learner_time, "timer_class", lambda: Unbracketed)
    text = grading.verdict_timer(_small_timing_step(), honest)(3)
    assert text.startswith("not timed: 0.50 us is over 3x faster than a device copy"), text


def test_quiet_returns_the_verdict_and_prints_nothing(honest, capsys):
    capsys.readouterr()
    quiet = steps.check(honest, LAUNCH, quiet=True)
    assert capsys.readouterr().out == ""
    loud = steps.check(honest, LAUNCH)
    assert capsys.readouterr().out.strip() == str(loud).strip()
    assert quiet.passed and loud.passed and str(quiet) == str(loud)
    with pytest.raises(TypeError, match="quiet"):
        steps.check(honest, LAUNCH, quiet="yes")
