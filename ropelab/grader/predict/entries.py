"""The kernels the model is trained and judged on, as ``(step, label, function)`` entries.

Every set is a directory of modules ``learner_*.py``, each ending with::

    ENTRIES = [(step_id, label, function), ...]

where ``function`` is what ``steps.check(function, step_id)`` takes (a ``@cuda.jit`` kernel, or
a launch function for a launch step).  The held-out sets written by independent learners have
that form, and so does the training set this project writes (``data/predict/training/``):
learner-style kernels for every timed step.  :func:`solution_entries` adds ropelab's own
solutions (``notebooks/solutions/``) to the training set.

A module that does not import, or an entry that is not a triple naming a known step, becomes
an :class:`Entry` with its ``error`` set, never an exception: one broken file must not stop a
run that times hundreds of kernels.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from ...measure import records

TRAINING_DIR = records.DATA_DIR / "predict" / "training"


@dataclass
class Entry:
    set: str  # "training", "set_a" ... (the directory's name)
    module: str  # the module file's stem, or "solutions"
    index: int  # place in the module's ENTRIES
    step_id: str
    label: str
    fn: object = None
    error: str | None = None

    @property
    def key(self) -> str:
        return f"{self.set}/{self.module}/{self.index}"


def _import(path: Path, set_name: str):
    name = f"ropelab_entries_{set_name}_{path.stem}".replace("-", "_").replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a kernel's source is found through its module
    spec.loader.exec_module(module)
    return module


def _short(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" ({Path(last[0].filename).name}:{last[0].lineno})" if last else ""
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{where}"


def load_set(directory, set_name: str | None = None) -> list[Entry]:
    """Every entry of every ``learner_*.py`` in ``directory`` (sorted by file name)."""
    from .. import steps

    directory = Path(directory)
    set_name = set_name or directory.name.lstrip(".")
    out = []
    for path in sorted(directory.glob("learner_*.py")):
        try:
            module = _import(path, set_name)
            listed = list(getattr(module, "ENTRIES"))
        except BaseException as exc:  # noqa: BLE001  (a learner's file: report, go on)
            if isinstance(exc, KeyboardInterrupt):
                raise
            out.append(Entry(set_name, path.stem, -1, "?", "(module)", error=f"import: "
                             f"{_short(exc)}"))
            continue
        for k, item in enumerate(listed):
            try:
                step_id, label, fn = item
                steps.get(step_id)
                out.append(Entry(set_name, path.stem, k, step_id, str(label), fn))
            except Exception as exc:  # noqa: BLE001
                out.append(Entry(set_name, path.stem, k, "?", repr(item)[:80],
                                 error=f"entry: {_short(exc)}"))
    return out


def solution_entries() -> list[Entry]:
    """ropelab's solution of every step (``SOLUTIONS`` of ``notebooks/solutions/NN_*.py``)."""
    from .. import steps
    from ..verify import load_solution, solution_path

    out, modules = [], {}
    for k, step in enumerate(steps.STEPS.values()):
        path = solution_path(step)
        try:
            module = modules.get(path) or modules.setdefault(path, load_solution(path))
            fn = module.SOLUTIONS[step.id]
            out.append(Entry("training", "solutions", k, step.id, "solution", fn))
        except Exception as exc:  # noqa: BLE001
            out.append(Entry("training", "solutions", k, step.id, "solution",
                             error=f"solution: {_short(exc)}"))
    return out


def training_entries() -> list[Entry]:
    """The training set: the solutions, then the modules of ``data/predict/training/``."""
    return solution_entries() + load_set(TRAINING_DIR, "training")
