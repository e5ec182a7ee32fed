"""A passing kernel's cost: its PTX census against the step's gates (steps 5 and 6 of
:func:`.grading.grade`).

A :class:`Gate` is one census requirement of a step ("no float64 instruction", "one pow").
:func:`judge` takes the census of what a step judges (a kernel step's kernel, or the learner's
kernels a launch step launched, with the contract's signature), checks the launched kernels'
source rules and every gate, and returns an :class:`Outcome`: the status and the lines of the
verdict, which :mod:`.grading` turns into one.  A float64 gate names the operations that made
the float64 (:mod:`.widening`) where they can be found.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

from . import judging, kernel_census, launched
from .intake import numpy_calls, read_source, source_is_code


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
    "divrem_source": "integer divisions the source runs (one path, a loop body once)",
    "signed_divrem": "signed integer div/rem (div.s, rem.s)",
    "f64": "float64 instructions",
    "sincos": "sin/cos (sin.approx, cos.approx)",
    "pow": "pow (one lg2.approx each)",
    "ld_global": "global loads by width (bits:count)",
    "st_global": "global stores by width (bits:count)",
    "ld_global_128": "128-bit global loads",
    "loads_after_store": "global loads after the first store",
    "shfl": "warp shuffles",
    "pow_in_loop": "pow inside a loop (ex2.approx)",
    # per pass (ropelab.measure.census.passes): what one trip through a loop body (or the code outside loops) runs
    "sincos_pass": "sin/cos on one pass (a loop body once)",
    "pow_pass": "pow on one pass (one lg2.approx each)",
    "pow_per_slot": "pow in the loop that rotates (ex2.approx)",
    "local_bytes": "local memory (bytes per thread)",
    # read from the tables above (no counter of their own in the census rows)
    "shfl_not_xor": "warp shuffles other than the butterfly's (shfl_down, shfl_idx ...)",
    "atomics_shared": "atomics on shared memory",
    "sin": "sin (sin.approx)",
    "cos": "cos (cos.approx)",
}


def counter_value(row: dict, name: str):
    """One census counter of a census row; width tables stay tables, the rest are ints."""
    if name == "pow":
        return row["sfu"].get("lg2", 0)
    if name == "signed_divrem":  # div.s64, rem.s32 ...: Python's // and % on signed ints
        ops = row.get("int_divrem_ops", {})
        return sum(n for op, n in ops.items() if op.split(".")[-1].startswith("s"))
    if name == "ld_global_128":
        return row["ld_global"].get("128", 0)
    if name == "shfl_not_xor":  # a shfl_down tree and its broadcast (shfl_idx) are not a butterfly
        return sum(n for mode, n in row["shfl_ops"].items() if mode != "bfly")
    if name == "atomics_shared":
        return sum(n for space, n in row["atomics"].items() if space.startswith("shared"))
    if name in ("sin", "cos"):  # 05.1's cos written as a shifted sin has no cos
        return row["sfu"].get(name, 0)
    return row[name]


def _fmt_counter(value) -> str:
    if isinstance(value, dict):
        by_width = sorted(value.items(), key=lambda kv: int(kv[0]))
        return " ".join(f"{k}:{v}" for k, v in by_width) or "-"
    return str(value)


@dataclass
class Outcome:
    """What the census part of grading found: ``status`` ("PASS", "not solved yet", "error")
    and the verdict's lines after the first (``first`` replaces the first when given)."""

    status: str
    lines: tuple = ()
    first: str | None = None
    census: dict | None = None


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


def _census_subjects(ex, kernel, trial):
    """``(subjects, None)``: the (kernel, signature) pairs the census judges, a kernel step's
    kernel or the learner's kernels a launch step launched (simulator only: only there are
    launches recorded), found in this process by :mod:`.launched`; or ``(None, outcome)``
    when they cannot be."""
    if ex.kind == "kernel":
        return ([(kernel, ex.signature)] if ex.signature else []), None
    if not ex.launches_signature or not (ex.gates or ex.counters) or trial is None:
        return [], None
    refs = judging.launched_kernels(trial)
    if not refs:
        if not trial.launches:
            return [], None  # on a GPU nothing is recorded
        return None, Outcome("not solved yet", (
            "hint: write the kernel yourself (the kernel step's) and launch it; ropelab's "
            "kernels are the reference, not the answer",), first=(
                f"the values are right, but {_name_of(kernel)} launched only ropelab's "
                "kernels, none of yours"))
    found, why = launched.resolve(kernel, refs, ex.launches_signature)
    if why is not None:
        return None, Outcome("error", (
            "hint: define the kernel at the top level of a cell (or inside the launch "
            "function) and launch it by its name",), first=(
                f"{_name_of(kernel)} is right on the simulator, but the census of the kernel "
                f"it launched cannot be taken: {why}; a step's cost rules are never left "
                "unchecked"))
    return [(k, ex.launches_signature) for k in found], None


def judge(ex, kernel, trial) -> Outcome:
    """The census part of grading, once every case has the right values (see the module
    docstring); ``trial``: the last case's records, whose launches name the launched
    kernels."""
    subjects, refused = _census_subjects(ex, kernel, trial)
    if refused is not None:
        return refused
    if not subjects:
        return Outcome("PASS")
    for launched_fn, _ in subjects if ex.kind == "launch" else ():
        refused = _forbidden(ex, launched_fn)
        if refused is not None:
            return refused
    jobs = []
    try:
        for k, sig in subjects:
            _same_code(k)
            jobs.append((kernel_census.ship_kernel(k), sig))
    except kernel_census.CensusError as exc:
        name = _name_of(subjects[len(jobs)][0])
        return Outcome("error", (
            "hint: a kernel the census can read is a top-level def under @cuda.jit that uses "
            "its arguments, modules (math, numba's types) and plain numbers; pass arrays in "
            "as arguments",), first=(
                f"{name} is right on the simulator, but its census cannot be taken: {exc}; a "
                "step's cost rules are never left unchecked"))
    except Exception as exc:  # noqa: BLE001  (shipping a kernel with odd globals)
        name = _name_of(subjects[len(jobs)][0] if len(jobs) < len(subjects) else kernel)
        text = kernel_census.useful_lines(f"{type(exc).__name__}: {exc}")
        return Outcome("error", first=f"{name} is right on the simulator, but its census "
                                      f"failed: {text}")
    try:
        *rows, ref = kernel_census.census(jobs + [(ex.reference_job(), ex.reference_signature)])
    except kernel_census.CensusError as exc:
        return Outcome("error", first=(
            f"{_name_of(subjects[0][0])} is right on the simulator, but the census compiler "
            f"could not run here ({exc}): this step's cost rules cannot be checked on this "
            "machine, so it cannot pass here"))
    for (judged, signature), mine in zip(subjects, rows):
        name = _name_of(judged)
        if mine.get("error"):
            source = read_source(kernel_census.python_function(judged) or judged)[0]
            first, *more = _compile_error(name, mine["error"], source or "")
            return Outcome("error", tuple(more), first=first)
        whose = "" if ex.kind == "kernel" else f"in {name}, the kernel you launch, "
        for gate in ex.gates:
            if not gate.holds(mine):
                got_value = _fmt_counter(counter_value(mine, gate.counter))
                return Outcome("not solved yet", tuple(census_lines(
                    mine, ref, ex.counters, ex.reference_label)), first=(
                        f"the values are right, but {whose}"
                        + _gate_text(gate, got_value, judged, signature)))
        # After the gates: a kernel that ignores a handed-over value computes it some other
        # way, and a gate names that way more precisely (a pow in the loop) where one does.
        unread = _unread_argument(ex, judged)
        if unread is not None:
            return Outcome("not solved yet", tuple(census_lines(
                mine, ref, ex.counters, ex.reference_label)), first=(
                    f"the values are right, but {whose}{name} never reads `{unread[0]}`: "
                    f"{unread[1]}"))
    mine = rows[0]
    return Outcome("PASS", tuple(census_lines(mine, ref, ex.counters, ex.reference_label)),
                   census=mine)


def _unread_argument(ex, kernel) -> tuple | None:
    """The first ``(argument, why)`` of ``ex.must_read`` that the kernel's source never reads
    (a parameter of that name that no expression loads), or None."""
    if not ex.must_read:
        return None
    source, _ = read_source(kernel_census.python_function(kernel) or kernel)
    if source is None:
        return None
    loaded = {node.id for node in ast.walk(ast.parse(textwrap.dedent(source)))
              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return next(((arg, why) for arg, why in ex.must_read if arg not in loaded), None)


def _same_code(kernel) -> None:
    """CensusError unless the text the census will compile is the code that ran (read again
    now: in one process the learner's code ran since intake read it)."""
    fn = kernel_census.python_function(kernel)
    try:
        source = kernel_census.function_source(fn)
    except (OSError, TypeError):
        return  # shipping says so
    if not source_is_code(fn, source):
        raise kernel_census.CensusError(
            f"the source Python shows for {fn.__name__} is not the code that ran (its cell or "
            "file changed after it ran, or its source was rewritten): run it again")


def _gate_text(gate: Gate, got_value: str, judged, signature: str) -> str:
    """A failed gate in words; for float64, the operations of the kernel that made it
    (:mod:`.widening`), where they can be found, instead of the gate's general guess; for a
    division, the ``range()`` that hides one."""
    text = gate.message.format(got=got_value, limit=gate.limit)
    if gate.counter in ("int_divrem", "divrem_source", "signed_divrem"):
        return _hidden_division_text(gate, got_value, judged) or text
    if gate.counter != "f64":
        return text
    from . import widening

    found = widening.lookup(judged, signature)
    if found == []:  # typed, and no operation of the kernel's own widens: a call's insides do
        return _f64_in_calls_text(gate, got_value, judged) or text
    if not found:
        return text
    return (f"the fast-math build has {got_value} float64 instructions (the goal: "
            f"{gate.limit}); Numba computes these operations in float64:\n"
            + "\n".join(widening.lines_for(judged, found)))


# Calls that compile to float32 code on float32 operands (a float64 operand of one of them is
# an operation's widening, which the typed IR names); every other call is a suspect.
_PLAIN_CALLS = {"float32", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "int", "range", "len", "abs", "min", "max", "bool"}


def calls_in(source: str) -> list[tuple[int, str]]:
    """(line, name) of the calls in ``source`` whose insides may compute in float64: not a
    cast, not ``cuda.*`` or ``math.*``, not a plain builtin (``round``, a device helper)."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id not in _PLAIN_CALLS:
            out.append((node.lineno, func.id))
        elif isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and
                                                      func.value.id in ("cuda", "math")):
            out.append((node.lineno, ast.unparse(func)))
    return sorted(set(out))


def _f64_in_calls_text(gate: Gate, got_value: str, judged) -> str | None:
    """A float64 gate failed although no operation of the kernel has a float64 operand: name
    the calls whose implementation computes in float64 (``round(x)`` of a float32 does)."""
    fn = kernel_census.python_function(judged)
    try:
        source = kernel_census.function_source(fn)
        first = fn.__code__.co_firstlineno
    except (OSError, TypeError, AttributeError):
        return None

    def ours(name):  # ropelab's own helpers (float_bits) compute in float32
        value = fn.__globals__.get(name.split(".")[0])
        return (getattr(value, "__module__", "") or "").split(".")[0] == "ropelab"

    calls = [(line, name) for line, name in calls_in(source) if not ours(name)]
    if not calls:
        return None
    lines = source.splitlines()
    shown = [f"  line {first + line - 1} `{lines[line - 1].strip()}`: {name}(...)"
             for line, name in calls[:3]]
    return (f"the fast-math build has {got_value} float64 instructions (the goal: "
            f"{gate.limit}); no operation of yours has a float64 operand, so they come from "
            "inside a call, whose implementation in Numba computes in float64 even on float32 "
            "arguments: write what it does with float32 arithmetic\n" + "\n".join(shown))


def divisions_in(source: str) -> tuple[list[str], bool]:
    """(the ``range(start, stop, step)`` calls of ``source`` whose step is not a constant, as
    written; whether it writes ``//``, ``%`` or ``divmod``).  Numba computes such a range's
    trip count with an integer division by the step."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return [], False
    ranges, written = [], False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "range" and len(node.args) == 3 \
                and not isinstance(node.args[2], ast.Constant):
            ranges.append(ast.unparse(node))
        written |= _is_division(node)
    return ranges, written


def _is_division(node) -> bool:
    """A ``//``, ``%`` (or their augmented forms) or a ``divmod`` call."""
    return (isinstance(node, (ast.BinOp, ast.AugAssign))
            and isinstance(node.op, (ast.FloorDiv, ast.Mod))) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        and node.func.id == "divmod")


def _hidden_division_text(gate: Gate, got_value: str, judged) -> str | None:
    """A division gate's words when a ``range()`` with a run-time step makes (some of) the
    divisions: the learner may have written none."""
    source = read_source(kernel_census.python_function(judged) or judged)[0] or ""
    ranges, written = divisions_in(source)
    return _range_division_text(gate, got_value, ranges, written) if ranges else None


def _range_division_text(gate: Gate, got_value: str, ranges: list, written: bool) -> str:
    why = (f"`{ranges[0]}`: with a step known only at run time, Numba computes the loop's trip "
           "count with an integer division by the step.  Write the stride loop as a while loop "
           "(i = start; while i < stop: ...; i += step), which divides nothing")
    if written and gate.counter == "signed_divrem":
        # Numba computes such a trip count in signed int64 whatever the range's types: blaming
        # the learner's // (often unsigned already) would send them to the wrong line
        return (f"the PTX has {got_value} signed integer div/rem instructions (the goal: "
                f"{gate.limit}); at least one comes from {why} (and any // or % of yours on a "
                "signed value is another: make its operands unsigned)")
    if written:
        return (gate.message.format(got=got_value, limit=gate.limit)
                + f"; and besides the // and % you wrote, so does {why}")
    return (f"the PTX has {got_value} integer div/rem instructions (the goal: {gate.limit}), "
            f"although your code writes no // or %: they come from {why}")


def _name_of(fn) -> str:
    inner = kernel_census.python_function(fn)
    return getattr(inner or fn, "__name__", repr(fn))


def _forbidden(ex, launched) -> Outcome | None:
    """A launch step's source rules (``launched_forbid``) on a kernel it launched."""
    if not ex.launched_forbid:
        return None
    source, _ = read_source(kernel_census.python_function(launched) or launched)
    if source is None:
        return None
    for rule in ex.launched_forbid:
        rows = rule.found_in(source)
        if rows:
            return Outcome("not solved yet", (
                f"  line {rows[0]}: `{source.splitlines()[rows[0] - 1].strip()}`",), first=(
                    f"`{rule.what}` is not allowed in {_name_of(launched)}, the kernel you "
                    f"launch: {rule.message}"))
    return None


def _compile_error(name: str, error: str, source: str) -> tuple:
    """The lines of a census compile failure.  Without a GPU the census compiles with no
    driver; a call that numba-cuda compiles as a driver-bound helper (NumPy allocations such
    as np.zeros are) fails there with "Error at driver init", which says nothing about the
    kernel: name the call instead."""
    if "Error at driver init" in error:
        calls = numpy_calls(source)
        what = ", ".join(calls) if calls else "a call"
        return (f"{name} is right on the simulator, but the census cannot compile it here: "
                f"numba-cuda compiles {what} inside a kernel as a helper that needs a CUDA "
                "driver, and this machine has none",
                "hint: for a small per-thread scratch array write cuda.local.array(n, float32) "
                "(a per-block one: cuda.shared.array), which compiles anywhere")
    return (f"{name} is right on the simulator but does not compile for a GPU:\n{error}",)
