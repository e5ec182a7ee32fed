"""What the learner's code must leave alone when it runs in the grader's own process.

On the simulator the learner's function runs in a forked child (:mod:`.runner`), and nothing
it changes there reaches the parent that judges.  Where grading cannot fork (on a GPU a CUDA
context does not survive a fork; Windows has no fork) it runs in this process, and so does
``verdict.time()`` on a GPU: a function that replaced one of the grader's functions, NumPy's
comparisons or the timer's clock would then judge or time itself.

:class:`Guard` takes an inventory of what such code would have to replace (the namespaces of
the grader's own modules, the attributes of the grader's classes, the NumPy, math, time,
builtins and numba.cuda names the judging and timing use, the step record, and which module
``sys.modules`` answers for each of those names) and, after the run, names what changed and
puts the originals back.  Third-party modules are watched name by name, not whole: a module
that fills its namespace lazily must not read as tampering.
"""

from __future__ import annotations

import sys

_MISSING = object()

# Whole namespaces: ropelab's grading and timing modules never rebind their globals at run time.
WHOLE_MODULES = (
    "ropelab.reference", "ropelab.tolerance", "ropelab.course.grading",
    "ropelab.course.grade_types", "ropelab.course.trial", "ropelab.course.recording",
    "ropelab.course.intake", "ropelab.course.kernel_census", "ropelab.course.carried",
    "ropelab.course.wire", "ropelab.course.unseen", "ropelab.course.learner_time",
    "ropelab.course.tamper", "ropelab.course.runner", "ropelab.course.child",
    "ropelab.course.steps", "ropelab.course.steps.base", "ropelab.course.steps.cases",
    "ropelab.measure.bench.timer", "ropelab.measure.bench.stats",
)
# Third-party names the judging and the timing call.
NAMED = {
    "numpy": ("abs", "argmax", "array", "asarray", "ascontiguousarray", "full", "isnan",
              "isfinite", "flatnonzero", "frombuffer", "percentile", "unique", "prod",
              "zeros", "empty", "float32", "float64", "uint32", "ndarray", "allclose",
              "array_equal"),
    "numpy.random": ("default_rng", "Generator", "SeedSequence"),
    "math": ("isfinite", "isnan", "inf"),
    "time": ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time",
             "time_ns", "sleep"),
    "builtins": ("abs", "all", "any", "float", "int", "isinstance", "len", "max", "min",
                 "range", "sum", "type", "getattr", "hasattr", "repr", "str", "print",
                 "sorted", "zip", "enumerate", "__import__"),
    "numba.cuda": ("event", "event_elapsed_time", "synchronize", "to_device", "device_array",
                   "device_array_like", "get_current_device", "jit", "grid"),
}


def _classes() -> list:
    """The grader's classes (their methods judge) and the launchers' (they record)."""
    found = []
    for module, names in (("ropelab.course.grade_types", ("Case", "CaseInputs", "Verdict")),
                          ("ropelab.course.trial", ("Trial",)),
                          ("ropelab.course.recording", ("WatchedArray", "Access", "Launch")),
                          ("ropelab.measure.bench.timer", ("Timer",)),
                          ("numba.cuda.simulator.kernel", ("FakeCUDAKernel",)),
                          ("numba.cuda.dispatcher", ("CUDADispatcher",))):
        mod = sys.modules.get(module)
        for name in names:
            cls = getattr(mod, name, None) if mod is not None else None
            if isinstance(cls, type):
                found.append((f"{module}.{name}", cls))
    return found


class Guard:
    """An inventory taken now (see the module docstring); :meth:`changed` compares, and
    :meth:`restore` undoes every change it finds.  ``extra`` adds ``(label, object)`` pairs
    whose instance attributes are watched too (a step record)."""

    def __init__(self, extra=()):
        self.modules = {}
        for name in WHOLE_MODULES:
            module = sys.modules.get(name)
            if module is not None:
                self.modules[name] = (module, dict(vars(module)), None)
        for name, attrs in NAMED.items():
            module = sys.modules.get(name)
            if module is not None:
                self.modules[name] = (module, {a: getattr(module, a, _MISSING) for a in attrs},
                                      attrs)
        self.classes = [(label, cls, dict(vars(cls))) for label, cls in _classes()]
        self.objects = [(label, obj, dict(vars(obj))) for label, obj in extra
                        if hasattr(obj, "__dict__")]

    def _module_changes(self):
        for name, (module, saved, attrs) in self.modules.items():
            if sys.modules.get(name) is not module:
                yield f"sys.modules[{name!r}]", lambda n=name, m=module: sys.modules.__setitem__(
                    n, m)
            now = vars(module)
            for key, value in saved.items():
                if now.get(key, _MISSING) is not value:
                    yield f"{name}.{key}", _setter(module, key, value)

    def _attr_changes(self):
        for label, obj, saved in self.classes + self.objects:
            now = dict(vars(obj))
            for key in set(saved) | set(now):
                if key in ("__dict__", "__weakref__"):
                    continue
                if now.get(key, _MISSING) is not saved.get(key, _MISSING):
                    yield f"{label}.{key}", _setter(obj, key, saved.get(key, _MISSING))

    def changes(self) -> list:
        """``(name, undo)`` of everything that differs from the inventory."""
        return list(self._module_changes()) + list(self._attr_changes())

    def changed(self) -> list[str]:
        return [name for name, _ in self.changes()]

    def restore(self) -> list[str]:
        """Put every changed name back; the names that had changed."""
        names = []
        for name, undo in self.changes():
            names.append(name)
            try:
                undo()
            except Exception:  # noqa: BLE001  (a read-only attribute: reported all the same)
                pass
        return names


def _setter(obj, key, value):
    def undo():
        if value is _MISSING:
            try:
                delattr(obj, key)
            except AttributeError:
                pass
        else:
            try:
                setattr(obj, key, value)
            except AttributeError:  # a frozen dataclass (a Step)
                object.__setattr__(obj, key, value)
    return undo


def said(names: list[str], limit: int = 4) -> str:
    """"a, b, c and 2 more"."""
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")
