"""The held-out sets: kernels written by learners who never saw ``notebooks/solutions/``.

``data/heldout/probes_a/probes_NN.py`` hold probes, ``PROBES = [(step, label, function,
"pass" or "fail", the cause in words)]``: plausible mistakes and a few right but unusual
kernels.  ``data/heldout/set_a/learner_NN.py`` hold kernels their learner handed in as passing,
``ENTRIES = [(step, label, function)]``.  They are evidence and stay as written: loaded by path
(:func:`entries`), never edited.

``python -m ropelab exercises --heldout`` (:func:`run`) grades every one as a notebook does and
says where a verdict differs from what the learner expected, or from :data:`OVERRULED`, where
the project judges otherwise (with the reason).  With ``--save-census`` it writes the census
rows they used to ``data/census/heldout.json``, which the grader reads beside
``exercises.json`` (:mod:`.kernel_census`), so that ``tests/test_heldout_grader.py`` grades
them without a compile.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import resources
from ..target import SIMULATED

SETS = {"probes_a": ("probes_*.py", "PROBES"), "set_a": ("learner_*.py", "ENTRIES")}

# (set, step, label) -> why the grader refuses what the learner handed in as passing: the
# notebook text the learner worked from states the rule these break.
OVERRULED = {
    ("set_a", "02.2", "block2d_chunked"): (
        "a contiguous chunk of pairs per thread: the step's text gives thread t the pairs t, "
        "t + blockDim.x, ... (neighbouring threads on neighbouring pairs)"),
    ("set_a", "02.3", "launch_block2d_512_signed"): (
        "blocks of a multiple of 64 capped at 512: the step's text asks for the row's pairs "
        "rounded up to whole warps, capped at 1024"),
    ("set_a", "06.2", "rms256_warp0_final"): (
        "warp 0 adds the four warp sums and hands the total out through shared memory: the "
        "step's text has every thread add the 4 sums itself after one barrier"),
}


@dataclass(frozen=True)
class Entry:
    """One held-out function and the verdict expected of it."""

    set: str  # "probes_a" or "set_a"
    step: str
    label: str
    fn: object
    expected: str  # "pass" or "fail"
    cause: str = ""  # the learner's words (probes), or the reason it is overruled

    @property
    def id(self) -> str:
        return f"{self.set}:{self.step}:{self.label}"


def directory() -> Path:
    return resources.data_dir() / "heldout"


def _load(path: Path):
    name = f"ropelab_heldout_{path.parent.name}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its kernels' source is found through the module
    spec.loader.exec_module(module)
    return module


def entries() -> list[Entry]:
    """Every probe and every passing entry, in file order."""
    found = []
    for set_name, (pattern, table) in SETS.items():
        for path in sorted((directory() / set_name).glob(pattern)):
            for row in getattr(_load(path), table):
                step, label, fn, *rest = row
                expected, cause = (rest[0], rest[1]) if rest else ("pass", "")
                overruled = OVERRULED.get((set_name, step, label))
                if overruled:
                    expected, cause = "fail", overruled
                found.append(Entry(set_name, step, label, fn, expected, cause))
    return found


def run(*, save_census: bool = False, stream=None, grade_fn=None) -> bool:
    """Grade every entry, one line each; True when every verdict is the one expected."""
    from . import kernel_census, steps
    from .runner import grade_safely

    if not SIMULATED and stream is None and grade_fn is None:
        print("on the simulator (it checks every index; the expected verdicts are its own):",
              flush=True)
        env = dict(os.environ, ROPELAB_TARGET="simulator", ROPELAB_QUIET="1")
        env.pop("NUMBA_ENABLE_CUDASIM", None)
        cmd = [sys.executable, "-m", "ropelab", "exercises", "--heldout"]
        return subprocess.run(cmd + (["--save-census"] if save_census else []), env=env,
                              check=False).returncode == 0
    stream = stream or sys.stdout
    grade_fn = grade_fn or (lambda step, fn: grade_safely(step, fn, timeout_s=120))
    wrong = 0
    listed = entries()
    for entry in listed:
        verdict = grade_fn(steps.get(entry.step), entry.fn)
        got = "pass" if verdict.passed else "fail"
        wrong += got != entry.expected
        first = str(verdict).splitlines()[0] if str(verdict) else verdict.status
        print(f"{'ok  ' if got == entry.expected else 'FAIL'} {entry.step:<6} "
              f"{entry.set}:{entry.label:<34} expected {entry.expected}: {first[:100]}",
              file=stream)
    print(f"{len(listed)} held-out functions, {wrong} with another verdict than expected",
          file=stream)
    if save_census:
        path = kernel_census.save_used(kernel_census.HELDOUT_FILE,
                                       leave_out=kernel_census.DATA_FILE)
        print(f"census cache: written to {path.relative_to(path.parents[2])}", file=stream)
    return wrong == 0
