"""What the learner's code must leave alone when it runs in the grader's own process.

On the simulator the learner's function runs in a forked child (:mod:`.runner`), and nothing
it changes there reaches the parent that judges.  Where grading cannot fork (on a GPU a CUDA
context does not survive a fork; Windows has no fork) it runs in this process, and so does
``verdict.time()`` on a GPU: a function that replaced one of the grader's functions, NumPy's
comparisons or the timer's clock would then judge or time itself.

:class:`Guard` takes an inventory of what such code would have to replace (the namespaces of
the grader's own modules, the attributes of the grader's classes, the NumPy, math, time,
builtins and numba.cuda names the judging and timing use, on a GPU the CUDA driver calls the
timer's events go through, the step record, and which module ``sys.modules`` answers for each
of those names) and, after the run, names what changed and
puts the originals back.  Third-party modules are watched name by name, not whole: a module
that fills its namespace lazily must not read as tampering.
"""

from __future__ import annotations

import sys

_MISSING = object()

# Whole namespaces: ropelab's grading and timing modules never rebind their globals at run time.
WHOLE_MODULES = (
    "ropelab.reference", "ropelab.tolerance", "ropelab.grader.grading",
    "ropelab.grader.grade_types", "ropelab.grader.trial", "ropelab.grader.recording",
    "ropelab.grader.launch_records",
    "ropelab.grader.intake", "ropelab.grader.kernel_census", "ropelab.grader.carried",
    "ropelab.grader.census_gates", "ropelab.grader.judging", "ropelab.grader.launched",
    "ropelab.grader.widening", "ropelab.grader.steps.contracts",
    "ropelab.grader.wire", "ropelab.grader.unseen", "ropelab.grader.learner_time",
    "ropelab.grader.timed",
    "ropelab.grader.tamper", "ropelab.grader.runner", "ropelab.grader.child",
    "ropelab.grader.steps", "ropelab.grader.steps.base", "ropelab.grader.steps.cases",
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
    "numba.cuda.cudadrv.driver": ("event_elapsed_time", "device_to_device", "driver"),
}


# The CUDA driver calls the timer's events and copies end in, watched on a GPU only (the
# driver object binds them lazily: they are looked up once before the inventory is taken).
DRIVER_CALLS = ("cuEventCreate", "cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime",
                "cuLaunchKernel", "cuMemcpyDtoD", "cuMemcpyDtoDAsync", "cuCtxSynchronize")


def _classes() -> list:
    """The grader's classes (their methods judge) and the launchers' (they record)."""
    found = []
    for module, names in (("ropelab.grader.grade_types", ("Case", "CaseInputs", "Verdict")),
                          ("ropelab.grader.trial", ("Trial",)),
                          ("ropelab.grader.recording", ("WatchedArray", "Access")),
                          ("ropelab.grader.launch_records", ("Launch", "KernelRef", "ArgRef")),
                          ("ropelab.measure.bench.timer", ("Timer",)),
                          ("numba.cuda.simulator.kernel", ("FakeCUDAKernel",)),
                          ("numba.cuda.dispatcher", ("CUDADispatcher",)),
                          ("numba.cuda.cudadrv.driver", ("Event", "Stream"))):
        mod = sys.modules.get(module)
        for name in names:
            cls = getattr(mod, name, None) if mod is not None else None
            if isinstance(cls, type):
                found.append((f"{module}.{name}", cls))
    return found


def _driver():
    """numba-cuda's driver object with :data:`DRIVER_CALLS` bound, or None (the simulator)."""
    from ..target import SIMULATED

    module = sys.modules.get("numba.cuda.cudadrv.driver")
    if SIMULATED or module is None:
        return None
    driver = getattr(module, "driver", None)
    for name in DRIVER_CALLS:
        try:
            getattr(driver, name)
        except Exception:  # noqa: BLE001  (a call this driver does not have)
            pass
    return driver


class Guard:
    """An inventory taken now (see the module docstring); :meth:`changed` compares, and
    :meth:`restore` undoes every change it finds.  ``extra`` adds ``(label, object)`` pairs
    whose instance attributes are watched too (a step record)."""

    def __init__(self, extra=()):
        # (label, target, saved attributes, whether attributes added later count)
        self.watches = []
        self.modules = {}
        for name in WHOLE_MODULES:
            module = sys.modules.get(name)
            if module is not None:
                self.modules[name] = module
                self.watches.append((name, module, dict(vars(module)), False))
        for name, attrs in NAMED.items():
            module = sys.modules.get(name)
            if module is not None:
                present = vars(module)  # a name a module adds later (lazily) is not tracked
                self.modules[name] = module
                self.watches.append((name, module, {a: present[a] for a in attrs
                                                    if a in present}, False))
        driver = _driver()
        if driver is not None and hasattr(driver, "__dict__"):
            present = vars(driver)
            self.watches.append(("the CUDA driver", driver,
                                 {a: present[a] for a in DRIVER_CALLS if a in present}, False))
        for label, cls in _classes():
            self.watches.append((label, cls, dict(vars(cls)), True))
        for label, obj in extra:
            if hasattr(obj, "__dict__"):
                self.watches.append((label, obj, dict(vars(obj)), True))

    def changes(self) -> list:
        """``(name, undo)`` of everything that differs from the inventory."""
        found = []
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                found.append((f"sys.modules[{name!r}]",
                              lambda n=name, m=module: sys.modules.__setitem__(n, m)))
        for label, target, saved, added_counts in self.watches:
            now = vars(target)
            keys = set(saved) | (set(now) - {"__dict__", "__weakref__"} if added_counts
                                 else set())
            for key in sorted(keys):
                if now.get(key, _MISSING) is not saved.get(key, _MISSING):
                    found.append((f"{label}.{key}", _setter(target, key,
                                                            saved.get(key, _MISSING))))
        return found

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
