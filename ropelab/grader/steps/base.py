"""The record of one graded step of a notebook's ladder, and the rules it may carry.

A notebook's ladder is a list of :class:`Step`, from an empty body to the notebook's whole
variant.  A step says what the learner writes (``kind``), what it is launched with (the
contract and the :class:`~ropelab.grader.grading.Case` list), what it must produce, and what it
must not do (``forbid``: source rules; ``gates``: census rules).  :mod:`..grading` does the
checking; nothing here runs a kernel.

Two kinds:

``"kernel"``
    the learner writes a ``@cuda.jit`` kernel; the grader launches it with each case's
    ``grid`` and ``block`` and the arguments named in ``arguments``.
``"launch"``
    the learner writes a plain host function taking the same ``arguments`` (device arrays and
    scalars) that computes grid and block from the shapes and launches a kernel itself.  The
    grader intercepts every launch: each element covered, no wholly idle block, a legal
    configuration (at most 1024 threads per block, grid limits), the kernel's arguments of the
    contract's types, the grid and block rules the step states (``launch_rules``), and the
    census gates of the kernel step whose kernel it launches (:meth:`Step.launching`).
    ``Case.grid``/``Case.block`` are not used for it.

A launch step, in outline (the cases are those of a kernel step over the same arrays)::

    Step(id="01.3", notebook="01_flat_divmod", kind="launch", kernel_name="launch_flat",
         title=..., task=..., arguments=("x", "out", "positions", "n_pairs", "total_pairs",
         "base"), contract=..., launch_text="grid and block from total_pairs",
         make_cases=_cases_01, hint=..., bounds_hint=...,
         starter='''
             def launch_flat(x, out, positions, n_pairs, total_pairs, base):
                 "Launch my_rope_flat, one thread per pair; round the grid up to whole blocks."
                 pass
             ''')

Its solution (``SOLUTIONS["01.3"]``) is a plain function that launches a kernel defined in the
same solution file.  ``shared=True`` makes the grader run the step with the shared-memory race
detector of :mod:`ropelab.sim.shared_race`; ``bounds_hints={"positions": ...}`` gives the hint
for an out-of-bounds index into one argument.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass, field
from typing import Callable

from ... import resources
from .. import kernel_census
from ..grading import Case, Gate

__all__ = ["Case", "Gate", "Forbid", "Step", "KINDS", "NOTEBOOK_SOURCES", "SOLUTIONS"]

KINDS = ("kernel", "launch")
NOTEBOOK_SOURCES = resources.notebook_sources()  # a checkout's scripts/notebooks/src, else the package's copy
SOLUTIONS = resources.solutions_dir()

# Python operators a Forbid rule can name, by the text a learner writes.
_OPERATORS = {"%": ast.Mod, "//": ast.FloorDiv, "/": ast.Div, "**": ast.Pow}
# The same operations written as calls: a rule against % or // is one against these too.
_SPELLED_OTHERWISE = {
    "%": ("divmod", "operator.mod", "operator.imod", "__mod__", "__rmod__", "__divmod__"),
    "//": ("divmod", "operator.floordiv", "operator.ifloordiv", "__floordiv__",
           "__rfloordiv__", "__divmod__"),
}


@dataclass(frozen=True)
class Forbid:
    """A source rule: the learner's function must not use ``what``.

    ``what`` is an operator (``"%"``, ``"//"``, ``"/"``, ``"**"``) or a dotted name called or
    read (``"math.pow"``, ``"np.zeros"``).  Rules that need types (signed vs unsigned
    division, float64) are census :class:`Gate` s instead, since the source cannot tell them.
    """

    what: str
    message: str  # why, said after "<what> is not allowed in this step: "

    def found_in(self, source: str) -> list[int]:
        """Line numbers (1-based, in ``source``) where the rule is broken."""
        tree = ast.parse(textwrap.dedent(source))
        op = _OPERATORS.get(self.what)
        spelled = _SPELLED_OTHERWISE.get(self.what, ())
        rows = set()
        for node in ast.walk(tree):
            if op is not None and isinstance(node, (ast.BinOp, ast.AugAssign)) \
                    and isinstance(node.op, op):
                rows.add(node.lineno)
            elif spelled and isinstance(node, (ast.Attribute, ast.Name)) and (
                    _dotted(node) in spelled or getattr(node, "attr", None) in spelled):
                rows.add(node.lineno)
            elif op is None and isinstance(node, (ast.Attribute, ast.Name)) \
                    and _dotted(node) == self.what:
                rows.add(node.lineno)
        return sorted(rows)


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


@dataclass(frozen=True)
class Step:
    """One graded step; see the module docstring.

    ``make_cases(big)`` returns the graded cases (``big=False``: small shapes that fill no
    block evenly) or one timing case (``big=True``).  ``signature``/``reference`` are for the
    census (the learner's kernel compiled for a GPU next to ropelab's); a step without a
    ``signature`` has no census and no gates.  ``bounds_hints`` maps an argument name to
    what an out-of-bounds index into it usually means; ``bounds_hint`` is said otherwise.
    """

    id: str  # "01.3": notebook, then the place in its ladder
    notebook: str  # file stem under notebooks/, e.g. "01_flat_divmod"
    title: str
    kind: str  # "kernel" or "launch"
    kernel_name: str  # the starter's function name (a kernel, or the host function)
    task: str  # one sentence: what to write
    arguments: tuple  # the launch contract: argument names in order
    contract: str  # argument types and meaning, in words
    launch_text: str  # grid and block in words ("kernel"), or what the launch must do
    make_cases: Callable[[bool], list]
    # The hints stay out of the step's printed form: a learner who prints steps.get("00.1") to
    # read its task must not see them (steps.hint hands them out a level at a time).
    hint: str = field(repr=False)  # when no typical mistake matches the wrong element
    bounds_hint: str = field(repr=False)
    starter: str = ""  # the starter cell; "" = read it from the notebook's source
    forbid: tuple = ()  # Forbid rules on the source
    shared: bool = False  # check shared-memory races (simulator)
    # inputs each thread may read only its own elements of (the case's owner of out, element
    # for element): where the step's point is that threads share through shuffles, not loads
    reads_own: tuple = ()
    # inputs each block copies into a shared table: read once per block, by more than one of
    # its threads (the others read the table)
    shared_copy: tuple = ()
    # (argument, why) pairs: arguments the kernel must read, where the step hands it a value so
    # that it need not compute it (05.4's stride_ratio); checked once the values are right
    must_read: tuple = ()
    # (count, what, hint) where every thread of a block must read ``count`` shared elements
    # itself (06.2: each thread adds the 4 warp sums), not a total one thread made for it
    shared_reads_each: tuple = ()
    signature: str | None = None  # the contract as a PTX signature, for the census
    reference: tuple | None = None  # (module, qualname, factory args or None)
    reference_signature: str | None = None
    counters: tuple = ()  # census counters shown next to the reference's
    gates: tuple = ()  # census requirements (Gate)
    bounds_hints: dict = field(default_factory=dict, repr=False)  # argument name -> hint
    alias: str = ""  # the exercise id this step had before the ladders ("01-flat-index")
    # Kernel steps: the stated rule of which thread writes which element of out, in words (the
    # cases' ``owner`` arrays check it).  Said after "each thread writes its own elements:".
    # A launch step sets it where its text gives every item a thread of its own ("one thread
    # per pair", "every pair has a thread"): the launched kernel's writes must then follow it
    # on the learner's grid (a grid-stride kernel on a few blocks breaks it).
    ownership: str = ""
    # Launch steps: the learner's kernels they launch.  Their arguments must have the types of
    # ``launches_signature`` (the kernel step's contract), their sources obey
    # ``launched_forbid``, their census ``gates`` (``counters``, ``reference`` as for a kernel
    # step); ``launch_rules`` (:mod:`.contracts`) are the grid and block rules the step states.
    launches_signature: str | None = None
    launched_forbid: tuple = ()
    launch_rules: tuple = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"step {self.id}: kind {self.kind!r} is not one of {KINDS}")

    def launching(self, owned: bool = False) -> dict:
        """The fields a launch step of this kernel step takes from it: the contract's types,
        the source rules, the census gates and the reference (``Step(..., **k.launching())``);
        with ``owned`` (the launch step's text gives every item a thread of its own), the
        ownership rule too."""
        return dict(launches_signature=self.signature, launched_forbid=self.forbid,
                    gates=self.gates, counters=self.counters, reference=self.reference,
                    reference_signature=self.reference_signature,
                    **({"ownership": self.ownership} if owned else {}))

    @property
    def number(self) -> str:
        """The notebook number, "01"."""
        return self.id.split(".", 1)[0]

    @property
    def reference_label(self) -> str:
        if self.reference is None:
            return "no reference"
        module, name, factory_args = self.reference
        if factory_args is None:
            return f"ropelab's {name}"
        return f"ropelab's {module.rsplit('.', 1)[-1]}({', '.join(map(repr, factory_args))})"

    def reference_job(self) -> dict:
        return kernel_census.ship_reference(*self.reference)

    def cases(self) -> list:
        return self.make_cases(False)

    def timing_case(self):
        return self.make_cases(True)[0]

    def check(self, fn, *, timeout_s: float = 30.0, quiet: bool = False):
        """Grade ``fn`` against this step; print the verdict (unless ``quiet``) and return it
        (never raises)."""
        from ..runner import grade_safely  # late: the runner imports the grader

        verdict = grade_safely(self, fn, timeout_s=timeout_s)
        if not quiet:
            print(verdict)
        return verdict

    def hint_for(self, array: str | None) -> str:
        """The out-of-bounds hint for an index into ``array``."""
        return self.bounds_hints.get(array or "", self.bounds_hint)

    def starter_source(self) -> str | None:
        """The starter cell: ``starter``, or the notebook source's cell that defines
        ``kernel_name`` (None outside a source checkout)."""
        if self.starter:
            return textwrap.dedent(self.starter).strip("\n") + "\n"
        path = NOTEBOOK_SOURCES / f"{self.notebook}.py"
        if not path.is_file():
            return None
        cells, current = [], []
        for line in path.read_text().splitlines(keepends=True):
            if line.startswith("# %%"):  # a cell starts (percent format)
                cells.append("".join(current))
                current = []
            else:
                current.append(line)
        cells.append("".join(current))
        found = [c for c in cells if f"def {self.kernel_name}(" in c]
        return found[0].strip("\n") + "\n" if len(found) == 1 else None
