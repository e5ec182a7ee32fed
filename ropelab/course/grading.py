"""Grading a learner's kernel: run it, compare it, explain the first mistake, count its cost.

Nothing here knows a particular exercise; :mod:`.exercises` declares them.  The steps of
:func:`grade`, each of which can end with a verdict:

1. *not solved yet*: the kernel's source still has a blank (``...``) to fill in;
2. *error*: it is not a ``@cuda.jit`` kernel, takes other arguments than the launch contract,
   or fails to compile or run;
3. *out of bounds*: the simulator raised ``IndexError`` (on a GPU: it wrote into the slack
   after ``out``), reported with the thread that did it;
4. *wrong*: the first element, in memory order, farther from the float64 reference than the
   tolerance, as (token, pair) with expected and obtained values, and a hint that names the
   typical mistake whose output matches the learner's there;
5. *not solved yet*, again: the values are right but the PTX census misses the exercise's
   point (a float64 instruction, a second division, a load after a store ...);
6. *PASS*, with the learner's census next to ropelab's kernel's.

A verdict is returned and printed, never raised: a wrong kernel must not stop a notebook.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numba import cuda

from ..measure.bench.timer import Timer
from ..target import SIMULATED
from ..tolerance import rope_atol
from . import kernel_census

# Floats written after ``out`` on a GPU, where an out-of-bounds store raises nothing: a store
# that lands there is caught by comparing them afterwards.
SLACK = 64
# The value ``out`` holds before the launch: an element still NaN was never written.
UNWRITTEN = np.nan


def tolerance(max_abs: float, max_angle: float) -> float:
    """How far a learner's float32 output may be from the float64 reference.

    The one place the grader asks :mod:`ropelab.tolerance`: the fast-math bound, since learners'
    kernels are compiled with ``fastmath=True`` on a GPU as ropelab's are.
    """
    return rope_atol(max_abs, max_angle, fastmath=True)


# --------------------------------------------------------------------------------------------
# Test cases and census gates
# --------------------------------------------------------------------------------------------

@dataclass
class Case:
    """One launch of the learner's kernel and what it must produce.

    ``inputs`` maps each argument name of the launch contract to a host array or a NumPy
    scalar of the contract's type; ``out`` (the argument named so) is created by the grader.
    ``expected`` is the float64 reference output, ``alternatives`` are ``(hint, output)`` of
    typical mistakes, ``locate`` turns a flat index into words ("token 2, pair 17") and
    ``unit`` lists the flat indices shown together (a pair's two floats); ``diagnose``, if
    given, explains a wrong element in the exercise's own terms before the alternatives are
    tried.
    """

    label: str
    inputs: dict
    grid: tuple
    block: tuple
    expected: np.ndarray
    tol: float
    locate: Callable[[int], str]
    unit: Callable[[int], list]
    alternatives: list = field(default_factory=list)
    bytes_moved: int = 0
    diagnose: Callable[[np.ndarray, int], str | None] | None = None  # tried before alternatives


@dataclass(frozen=True)
class Gate:
    """A census requirement: ``counter`` must satisfy ``op`` against ``limit`` (``<=``/``>=``)."""

    counter: str
    op: str
    limit: int
    message: str  # what is wrong, with {got} and {limit}; said after "the values are right, but"

    def holds(self, row: dict) -> bool:
        got = counter_value(row, self.counter)
        return got <= self.limit if self.op == "<=" else got >= self.limit


COUNTER_LABELS = {
    "instructions": "PTX instructions",
    "int_divrem": "integer div/rem",
    "f64": "float64 instructions",
    "sincos": "sin/cos (sin.approx, cos.approx)",
    "pow": "pow (one lg2.approx each)",
    "ld_global": "global loads by width (bits:count)",
    "st_global": "global stores by width (bits:count)",
    "ld_global_128": "128-bit global loads",
    "loads_after_store": "global loads after the first store",
    "shfl": "warp shuffles",
    "pow_in_loop": "pow inside a loop (ex2.approx)",
    "local_bytes": "local memory (bytes per thread)",
}


def counter_value(row: dict, name: str):
    """One census counter of a census row; width tables stay tables, the rest are ints."""
    if name == "pow":
        return row["sfu"].get("lg2", 0)
    if name == "ld_global_128":
        return row["ld_global"].get("128", 0)
    return row[name]


def _fmt_counter(value) -> str:
    if isinstance(value, dict):
        by_width = sorted(value.items(), key=lambda kv: int(kv[0]))
        return " ".join(f"{k}:{v}" for k, v in by_width) or "-"
    return str(value)


# --------------------------------------------------------------------------------------------
# The verdict
# --------------------------------------------------------------------------------------------

@dataclass
class Verdict:
    """What :func:`grade` found; ``str(verdict)`` is the text the notebook shows."""

    exercise: str
    status: str  # "PASS", "not solved yet", "wrong", "out of bounds", "error"
    lines: list
    timer: Callable[[int], str] | None = None  # set on PASS: times the kernel on a GPU

    @property
    def passed(self) -> bool:
        return self.status == "PASS"

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def __repr__(self) -> str:
        return f"<Verdict {self.exercise}: {self.status}>"

    def time(self, repeats: int = 20) -> None:
        """On a GPU, time the passing kernel against a device copy of the same bytes.

        Prints one sentence instead on the simulator or when the kernel has not passed: a
        simulated launch has no meaningful time.  Notebooks call this in a cell whose output
        nbval ignores.
        """
        if not self.passed or self.timer is None:
            print("nothing timed: the kernel has not passed the check yet")
        elif SIMULATED:
            print("nothing timed: no GPU in this process (the simulator's times would describe "
                  "Python threads, not a GPU)")
        else:
            print(self.timer(repeats))


def _verdict(exercise: str, status: str, first: str, *more: str) -> Verdict:
    head = (first if status == "PASS" else f"{status} {first}" if first.startswith("at thread")
            else f"{status}: {first}")
    return Verdict(exercise, status, [head, *[m for m in more if m]])


# --------------------------------------------------------------------------------------------
# Step 1-2: blanks and the argument list, read from the source
# --------------------------------------------------------------------------------------------

def blanks(source: str) -> list[str]:
    """The source lines that still hold a ``...`` placeholder, stripped."""
    tree = ast.parse(source)
    lines = source.splitlines()
    rows = sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and node.value is Ellipsis})
    return [lines[r - 1].strip() for r in rows]


def _parameters(fn) -> list[str]:
    code = fn.__code__
    return list(code.co_varnames[:code.co_argcount])


# --------------------------------------------------------------------------------------------
# Step 3-4: run and compare
# --------------------------------------------------------------------------------------------

_THREAD = re.compile(r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]: ?(.*)")


def _coords(values) -> str:
    x, y, z = (int(v) for v in values)
    return str(x) if y == z == 0 else f"({x}, {y}, {z})" if z else f"({x}, {y})"


def out_of_bounds_text(message: str) -> str:
    """"at thread (block B, thread T): <what numpy said>" from a simulator IndexError."""
    m = _THREAD.search(message)
    if not m:
        return f"({message.strip()})"
    tid, cta, what = m.groups()[:3], m.groups()[3:6], m.group(7)
    what = re.sub(r"\s*\(lane \d+ failed; its warp-mates stopped waiting for it\)", "", what)
    return f"at thread (block {_coords(cta)}, thread {_coords(tid)}): {what.strip()}"


def launch(kernel, case: Case, arguments: tuple) -> np.ndarray:
    """Launch ``kernel`` on ``case`` by the contract ``arguments``; return ``out`` on the host
    with the :data:`SLACK` floats after it (IndexError propagates from the simulator)."""
    expected_size = case.expected.size
    out_buf = cuda.to_device(np.full(expected_size + SLACK, UNWRITTEN, dtype=np.float32))
    args = []
    for name in arguments:
        if name == "out":
            args.append(out_buf[:expected_size])
        else:
            value = case.inputs[name]
            args.append(cuda.to_device(value) if isinstance(value, np.ndarray) else value)
    kernel[case.grid, case.block](*args)
    return out_buf.copy_to_host()


def first_wrong(case: Case, got: np.ndarray) -> int | None:
    """Flat index of the first element outside the tolerance (NaN counts as wrong), or None."""
    err = np.abs(got.astype(np.float64) - case.expected.ravel())
    bad = ~(err <= case.tol)
    return int(np.argmax(bad)) if bad.any() else None


def _values(a: np.ndarray, idx: list) -> str:
    vals = [f"{float(a[i]):.6g}" for i in idx]
    return vals[0] if len(vals) == 1 else "(" + ", ".join(vals) + ")"


def diagnose(case: Case, got: np.ndarray, e: int, fallback: str) -> str:
    """The hint for the first wrong element: a typical mistake whose output matches there.

    Only the wrong floats of the element's unit (its pair) are compared with each mistake's
    output: a kernel may get one float of a pair right and the other wrong.
    """
    expected = case.expected.ravel()
    wrong = [i for i in case.unit(e) if not abs(float(got[i]) - expected[i]) <= case.tol]
    if all(np.isnan(got[i]) for i in wrong):
        return ("this element was never written: no thread stored to it (a guard that stops "
                "too early, or a loop that does not reach every element?)")
    if case.diagnose is not None:
        found = case.diagnose(got, e)
        if found:
            return found
    for hint, alt in case.alternatives:
        flat = alt.ravel()
        if all(abs(float(got[i]) - float(flat[i])) <= case.tol for i in wrong):
            return hint
    x = case.inputs.get("x")
    if x is not None and x.size == expected.size and all(
            abs(float(got[i]) - float(x.ravel()[i])) <= case.tol for i in wrong):
        return "out holds x unchanged here: the rotation was not applied to this element"
    return fallback


# --------------------------------------------------------------------------------------------
# Step 5-6: census
# --------------------------------------------------------------------------------------------

def census_lines(mine: dict, ref: dict | None, counters: tuple, ref_label: str) -> list[str]:
    """The learner's counts next to the reference kernel's, one counter a line."""
    width = max(len(COUNTER_LABELS[c]) for c in counters) + 2
    head = f"  {'PTX census (fast-math, cc 9.0)':<{width}} {'yours':>12}   {ref_label}"
    lines = [head]
    for c in counters:
        theirs = "?" if ref is None or ref.get("error") else _fmt_counter(counter_value(ref, c))
        lines.append(f"  {COUNTER_LABELS[c]:<{width}} {_fmt_counter(counter_value(mine, c)):>12}"
                     f"   {theirs}")
    return lines


# --------------------------------------------------------------------------------------------
# The whole check
# --------------------------------------------------------------------------------------------

def grade(exercise, kernel) -> Verdict:
    """Every step of the module docstring, for one :class:`~.exercises.Exercise`."""
    ex = exercise
    fn = kernel_census.python_function(kernel)
    if fn is None or fn is kernel:
        return _verdict(ex.id, "error", f"{kernel!r} is not a @cuda.jit kernel; write "
                        f"@cuda.jit(fastmath=True) on the line above `def {ex.kernel_name}(...)`")
    name = fn.__name__
    try:
        source = kernel_census.function_source(fn)
    except (OSError, TypeError):
        source = None
    if source is not None:
        left = blanks(source)
        if left:
            shown = "; ".join(f"`{line}`" for line in left[:4]) + (" ..." if len(left) > 4 else "")
            return _verdict(ex.id, "not solved yet", f"{name} still has {len(left)} blank"
                            f"{'s' if len(left) > 1 else ''} (...) to fill in: {shown}",
                            f"task: {ex.task}")
    params = _parameters(fn)
    if len(params) != len(ex.arguments):
        return _verdict(ex.id, "error", f"{name} takes ({', '.join(params)}), but the exercise "
                        f"launches it with ({', '.join(ex.arguments)})")

    cases = ex.cases()
    for case in cases:
        try:
            got = launch(kernel, case, ex.arguments)
        except IndexError as exc:
            if "out of bounds" not in str(exc):  # an invalid index, not a missing guard
                return _verdict(ex.id, "error", f"{name} did not run [case {case.label}]: "
                                f"IndexError: {str(exc).strip().splitlines()[0][:300]}")
            return _verdict(ex.id, "out of bounds", f"{out_of_bounds_text(str(exc))} "
                            f"[case {case.label}]", f"hint: {ex.bounds_hint}")
        except Exception as exc:  # a typing error, a crash: a verdict, never an exception
            first = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:300]
            return _verdict(ex.id, "error", f"{name} did not run [case {case.label}]: {first}",
                            "" if SIMULATED else "hint: a GPU does not check indices; run the "
                            "check on the simulator (ROPELAB_TARGET=simulator), which does")
        size = case.expected.size
        slack = got[size:]
        if not np.all(np.isnan(slack)):
            return _verdict(ex.id, "out of bounds", f"a thread wrote past the end of out "
                            f"[case {case.label}]", f"hint: {ex.bounds_hint}")
        got = got[:size]
        e = first_wrong(case, got)
        if e is not None:
            idx = case.unit(e)
            return _verdict(ex.id, "wrong", f"{case.locate(e)} [case {case.label}]: expected "
                            f"{_values(case.expected.ravel(), idx)}, got {_values(got, idx)} "
                            f"(tolerance {case.tol:.1e})",
                            f"hint: {diagnose(case, got, e, ex.hint)}")
    shapes = ", ".join(c.label for c in cases) + (
        ", random positions" if "positions" in ex.arguments else "")
    if source is None:
        return _verdict(ex.id, "PASS", f"PASS {ex.id}: {name} matches the float64 reference on "
                        f"{shapes}", "census: not available (Python kept no source for this "
                        "kernel; define it in a notebook cell or a file)")
    try:
        mine, ref = kernel_census.census([(kernel_census.ship_kernel(kernel), ex.signature),
                                          (ex.reference_job(), ex.reference_signature)])
    except kernel_census.CensusError as exc:
        return _verdict(ex.id, "PASS", f"PASS {ex.id}: {name} matches the float64 reference on "
                        f"{shapes}", f"census: not available ({exc}); the cost requirements "
                        "of this exercise are unchecked")
    if mine.get("error"):
        return _verdict(ex.id, "error", f"{name} is right on the simulator but does not compile "
                        f"for a GPU: {mine['error']}")
    for gate in ex.gates:
        if not gate.holds(mine):
            got_value = _fmt_counter(counter_value(mine, gate.counter))
            verdict = _verdict(ex.id, "not solved yet", "the values are right, but "
                               + gate.message.format(got=got_value, limit=gate.limit),
                               *census_lines(mine, ref, ex.counters, ex.reference_label))
            return verdict
    verdict = _verdict(ex.id, "PASS", f"PASS {ex.id}: {name} matches the float64 reference on "
                       f"{shapes}",
                       *census_lines(mine, ref, ex.counters, ex.reference_label))
    verdict.timer = lambda repeats: time_on_gpu(kernel, ex.timing_case(), ex.arguments, repeats)
    return verdict


# --------------------------------------------------------------------------------------------
# GPU timing
# --------------------------------------------------------------------------------------------

def time_on_gpu(kernel, case: Case, arguments: tuple, repeats: int) -> str:
    """Median time of ``kernel`` on ``case`` and of a device-to-device copy of the bytes it
    moves, both cold (L2 evicted before each launch) with :class:`ropelab.measure.bench.Timer`."""
    timer = Timer(repeats=repeats)
    args = []
    size = case.expected.size
    out = cuda.device_array(size, dtype=np.float32)
    for name in arguments:
        value = out if name == "out" else case.inputs[name]
        args.append(cuda.to_device(value) if isinstance(value, np.ndarray) else value)
    src = cuda.to_device(np.zeros(case.bytes_moved // 8, dtype=np.float32))
    dst = cuda.device_array_like(src)

    def run():
        kernel[case.grid, case.block](*args)

    def copy():
        dst.copy_to_device(src)

    mine = np.percentile(timer.time(run), [20, 50, 80])
    base = np.percentile(timer.time(copy), [20, 50, 80])
    return (f"{case.label}: your kernel {mine[1]:.1f} us median (p20-p80 {mine[0]:.1f}-"
            f"{mine[2]:.1f}); a device copy moving the same {case.bytes_moved / 1e6:.0f} MB "
            f"{base[1]:.1f} us; yours runs at {100 * base[1] / mine[1]:.0f}% of the copy's speed")
