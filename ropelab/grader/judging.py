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
* :func:`host_problem`: the step's arrays read or written on the host (a launch function
  that did the work in NumPy), or ``out`` holding values no thread stored;
* :func:`borrowed_problem`: a launch of one of ropelab's own kernels that the step does not
  give;
* :func:`idle_launch_problem`: a launch of the learner's kernel with blocks that wrote nothing,
  whatever other launches follow;
* :func:`whole_check_problem`: rules read from every case's records at once (a shared step
  whose threads never met in shared memory);
* :func:`launched_kernels`: the learner's kernels a launch step launched (as
  :class:`~.launch_records.KernelRef`), for their census (:mod:`.launched` finds them).
"""

from __future__ import annotations

import numpy as np

from .launch_records import KernelRef
from .trial import unwritten


def _thread_text(who) -> str:
    block, thread = who
    return f"thread {thread} of block {block}"


def _flat(index: tuple, shape: tuple) -> int:
    """The flat element number of a recorded ``index`` (a tuple) into an array of ``shape``."""
    return index[0] if len(index) == 1 else int(np.ravel_multi_index(index, shape))


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
    e = _flat(index, out.shape)
    return (f"{_thread_text(who)} wrote out[{e}], {case.locate(e)}, which is thread "
            f"{owner % tpb} of block {owner // tpb}'s to write: {step.ownership}")


def foreign_read_problem(step, case, trial) -> str | None:
    """The first read of an input the step says each thread reads only its own elements of,
    by another thread, in words."""
    for name in step.reads_own:
        w = trial.watched.get(name)
        if w is None or w.foreign_read is None:
            continue
        index, who, reader = w.foreign_read
        tpb = int(np.prod(case.block))
        e = _flat(index, w.shape)
        return (f"{_thread_text(who)} read {name}[{e}], {case.locate(e)}, which is thread "
                f"{reader % tpb} of block {reader // tpb}'s: {step.ownership}, and the others' "
                "values reach it through the shuffles, not through loads")
    return None


def shared_copy_problem(step, case, trial) -> str | None:
    """For an input the step copies into a shared table (``shared_copy``), in words: a block
    that read an element of it twice (the second read should be of the table), or one thread
    that did a block's whole copy alone.  A launch whose threads never met in shared memory
    gets the meeting's verdict instead (:func:`whole_check_problem`): it made no table."""
    if not trial.shared_meetings:
        return None
    for name in step.shared_copy:
        w = trial.watched.get(name)
        if w is None:
            continue
        if w.reread is not None:
            index, who = w.reread
            e = _flat(index, w.shape)
            return (f"{_thread_text(who)} read {name}[{e}], which its block had read before: "
                    f"a block reads {name} once, into its shared table, and every later read "
                    "is of the table")
        if w.size < 2:  # a one-entry table: one thread is all the copy needs
            continue
        readers: dict = {}
        for (block, thread), (reads, _) in w.access.per_thread.items():
            if reads:
                readers.setdefault(block, set()).add(thread)
        for block in sorted(readers):
            if len(readers[block]) == 1:
                (thread,) = readers[block]
                return (f"thread {thread} of block {block} copied all {w.size} entries of "
                        f"{name} alone: every thread helps with the copy (thread t copies "
                        "entries t, t + blockDim.x, ...)")
    return None


def written(trial, got: np.ndarray, idx: list) -> list[bool]:
    """For each flat index: did any thread store to it?  On the simulator the record says;
    on a GPU the never-written sentinel's bits do."""
    out = trial.watched.get("out") if trial is not None else None
    if out is not None:
        writers = out.access.writer_block.ravel()
        return [bool(writers[i] >= 0) for i in idx]
    return [not unwritten(got[i:i + 1])[0] for i in idx]


def stored_twice(trial, idx: list) -> int | None:
    """The lowest flat index of ``out`` that two threads stored to, when it is not past these
    indices (an element the schedule decides, at or before the first wrong one); else None.
    The record is the same whatever order the threads ran in."""
    out = trial.watched.get("out") if trial is not None else None
    if out is None or out.twice_written is None:
        return None
    first = int(np.ravel_multi_index(out.twice_written, out.shape))
    return first if idx and first <= max(idx) else None


def read_before_written(trial, idx: list) -> str | None:
    """The hint when ``out`` was read where no thread had written yet (``out[i] += ...``)."""
    out = trial.watched.get("out") if trial is not None else None
    if out is None or out.read_unwritten is None:
        return None
    index, who = out.read_unwritten
    e = _flat(index, out.shape)
    return (f"out is read before it is written: {_thread_text(who)} read out[{e}] before any "
            "thread had stored to it.  out starts uninitialised (the grader fills it with NaN; "
            "on a GPU it holds whatever was there), so `out[i] += ...` adds to garbage: store "
            "the result with `out[i] = ...`")


def host_problem(step, trial) -> tuple[str, str] | None:
    """(what is wrong, hint) when the learner's code touched the step's arrays other than from
    a kernel's threads: a launch function that read an input or wrote ``out`` on the host, or
    any ``out`` element holding a value no thread stored (written through ``out.data``)."""
    if step.kind == "launch":
        for w in trial.watched.values():
            if w.host_access:
                return (f"{step.kernel_name} {w.host_access} on the host",
                        "a launch function computes grid and block from the shapes and "
                        "launches the kernel; the kernel's threads read the inputs and write "
                        "out (NumPy on the host is not a kernel)")
    out = trial.watched.get("out")
    if out is None:
        return None
    stored = out.access.writer_block.ravel() >= 0
    values = np.asarray(trial.out).ravel()[:stored.size]
    bypassed = np.flatnonzero(~stored & ~unwritten(values))
    if bypassed.size:
        return (f"out[{int(bypassed[0])}] holds a value no kernel thread stored there "
                f"({bypassed.size} element{'s' if bypassed.size > 1 else ''} written around "
                "the index, through out.data or a copy)",
                "write out element by element from the kernel's threads: out[i] = ...")
    return None


def borrowed_problem(step, trial) -> tuple[str, str] | None:
    """(what is wrong, hint) for a launch of one of ropelab's own kernels that the step does
    not give (``ropelab.kernels``' answer, launched by the learner's function)."""
    for launch in trial.launches:
        ref = launch.fn
        if getattr(ref, "borrowed", False):
            return (f"{step.kernel_name} launched {ref.name}, ropelab's own kernel (from "
                    f"{ref.module or ref.filename}), which the step does not give: the work "
                    "must be your kernel's",
                    f"launch the kernel you wrote for this step; {KernelRef.BORROWED_HINT}")
    return None


def idle_launch_problem(step, trial) -> tuple[str, str] | None:
    """(what is wrong, hint) for the first launch of the learner's kernel some of whose blocks
    wrote nothing (no element of the step's arrays, none of a device array the learner made)."""
    for launch in trial.launches:
        if launch.learners and launch.idle_blocks:
            return (f"block {launch.first_idle} of {launch.kernel}[{launch.text()}] wrote "
                    f"nothing: {launch.idle_blocks} of {launch.blocks} "
                    "blocks were wholly idle",
                    "launch only the blocks the work needs: blocks = (work + threads - 1) // "
                    "threads, and no launch that does nothing")
    return None


def shared_reads_problem(step, trial) -> str | None:
    """For a step whose every thread reads ``count`` shared elements itself
    (``shared_reads_each``), in words: a block where some thread read fewer."""
    if not step.shared_reads_each or not trial.shared_meetings:
        return None
    count, what, _ = step.shared_reads_each
    fewest = trial.shared_reads_fewest
    if fewest >= count:
        return None
    read = "no shared element" if fewest == 0 else f"only {fewest} shared element" + (
        "s" if fewest > 1 else "")
    return (f"a thread of a block read {read}: the step asks every thread to read {what} "
            f"itself ({count} shared elements), not a total another thread made for it")


def whole_check_problem(step, trials: list) -> tuple[str, str] | None:
    """(what is wrong, hint) for a rule only every case's records together can judge."""
    from ..target import SIMULATED

    if step.shared and SIMULATED and trials and not any(t.shared_meetings for t in trials):
        return ("no thread read a shared element that another thread of its block wrote: the "
                "step's point is that the block's threads share their work through shared "
                "memory",
                "stage the data in a cuda.shared.array, cuda.syncthreads(), then let each "
                "thread read what the others wrote")
    return None


def launched_kernels(trial) -> list:
    """The learner's distinct kernels among the launches (:class:`~.launch_records.KernelRef`), in
    launch order."""
    found, seen = [], set()
    for launch in trial.launches if trial is not None else ():
        ref = launch.fn
        key = (ref.filename, ref.line, ref.name)
        if launch.learners and key not in seen:
            seen.add(key)
            found.append(ref)
    return found
