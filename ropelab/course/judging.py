"""What the grader reads from a simulated run beyond the values: whose writes, which reads came
first, and the launch rules a step states.

:mod:`.grading` compares values and makes the verdicts; the judgements here return words (or
None when all is well) from a :class:`~.trial.Trial`'s records (:mod:`.recording`):

* :func:`launch_rule_problem`: the first of a launch step's ``launch_rules``
  (:mod:`.steps.contracts`) that its recorded launches break;
* :func:`ownership_problem`: a kernel step that states which thread writes which element
  (``Step.ownership``, ``Case.owner``): the first write by another thread;
* :func:`written` and :func:`read_before_written`: on the simulator an element counts as never
  written only when no thread stored to it (an ``out[i] += x`` keeps the never-written NaN's
  bits, but a thread did write it, after reading it uninitialised);
* :func:`launched_kernels`: the learner's kernels a launch step launched, for their census.
"""

from __future__ import annotations

import numpy as np

from .trial import unwritten


def _thread_text(who) -> str:
    block, thread = who
    return f"thread {thread} of block {block}"


def launch_rule_problem(step, case, trial) -> tuple[str, str] | None:
    """(what is wrong, hint) for the first ``launch_rules`` entry the launches break."""
    for rule in getattr(step, "launch_rules", ()):
        found = rule.problem(case, trial.launches)
        if found:
            return found, rule.hint or f"the step's rule: {rule.rule}"
    return None


def ownership_problem(step, case, trial) -> str | None:
    """The first write into ``out`` by a thread that does not own the element, in words."""
    out = trial.watched.get("out")
    if out is None or out.foreign_write is None:
        return None
    index, who, owner = out.foreign_write
    tpb = int(np.prod(case.block))
    e = index[0] if len(index) == 1 else int(np.ravel_multi_index(index, out.shape))
    return (f"{_thread_text(who)} wrote out[{e}], {case.locate(e)}, which is thread "
            f"{owner % tpb} of block {owner // tpb}'s to write: {step.ownership}")


def written(trial, got: np.ndarray, idx: list) -> list[bool]:
    """For each flat index: did any thread store to it?  On the simulator the record says;
    on a GPU the never-written sentinel's bits do."""
    out = trial.watched.get("out") if trial is not None else None
    if out is not None:
        writers = out.access.writer_block.ravel()
        return [bool(writers[i] >= 0) for i in idx]
    return [not unwritten(got[i:i + 1])[0] for i in idx]


def read_before_written(trial, idx: list) -> str | None:
    """The hint when ``out`` was read where no thread had written yet (``out[i] += ...``)."""
    out = trial.watched.get("out") if trial is not None else None
    if out is None or out.read_unwritten is None:
        return None
    index, who = out.read_unwritten
    e = index[0] if len(index) == 1 else int(np.ravel_multi_index(index, out.shape))
    return (f"out is read before it is written: {_thread_text(who)} read out[{e}] before any "
            "thread had stored to it.  out starts uninitialised (the grader fills it with NaN; "
            "on a GPU it holds whatever was there), so `out[i] += ...` adds to garbage: store "
            "the result with `out[i] = ...`")


def launched_kernels(trial) -> list:
    """The learner's distinct kernels among the launches, in launch order."""
    from .kernel_census import python_function

    found, seen = [], set()
    for launch in trial.launches:
        fn = python_function(launch.fn)
        if launch.learners and fn is not None and id(fn) not in seen:
            seen.add(id(fn))
            found.append(launch.fn)
    return found
