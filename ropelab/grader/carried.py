"""What crosses the grader's process boundary, and the parent's check of what comes back.

The grading parent sends the child one :class:`~.grade_types.CaseInputs` at a time; the child
runs the learner's function on it and answers with data, never a verdict that could pass:

* ``("ran", k, trial)``: the :class:`~.trial.Trial` of case ``k`` (``out`` and the inputs as
  the run left them, the launches, every access recorded), which the parent judges;
* ``("failed", k, status, lines)``: the run raised and the child worded it (out of bounds, a
  race, an illegal launch...); any status but PASS is taken as it comes, since a forged
  failure fails only its forger;
* ``("crashed", text)``: the child itself could not go on.

:func:`.runner.reply` turns an answer into ``(trial, None)`` or ``(None, verdict)``; a trial
is used only after :func:`trial_problem` found it shaped as the parent's own case says it must
be (an ``out`` of the case's size, every input array back with its dtype and shape).  In one process
(no fork) :func:`sanitized` passes a trial through the same encoding, so that what the judging
reads is plain NumPy arrays either way: no subclass with rigged comparisons, no lazy value, no
alias of an input.
"""

from __future__ import annotations

import numpy as np

import dataclasses

from . import wire
from .recording import Access, ArgRef, KernelRef, Launch, WatchedArray
from .trial import Trial

MESSAGE_LIMIT = 32 << 20  # bytes of one answer; the graded cases need well under 1 MB
_DERIVED = ("shape", "size", "ndim", "dtype")  # a WatchedArray's, recomputed from its data
LINES, LINE_CHARS, STATUS_CHARS = 60, 5000, 40  # what a child's worded failure may hold


def _watched_fields() -> list[str]:
    sample = WatchedArray("x", np.zeros(1, np.float32))
    # the ordering check's records of a running launch, and the reads a shared-copy input's
    # blocks made, stay in the child (recording._ordering, _note_block_read: their verdicts,
    # such as ``reread``, cross)
    return [k for k in vars(sample) if k not in _DERIVED
            and not k.startswith(("_order", "_block_reads"))]


for _cls in (Trial, Launch, Access, KernelRef, ArgRef):
    wire.register(_cls)
wire.register(WatchedArray, _watched_fields())


def _rebuilt(watched: dict) -> None:
    """A decoded WatchedArray's derived attributes, from its data."""
    for w in watched.values():
        data = w.__dict__["data"]
        w.__dict__.update(shape=data.shape, size=data.size, ndim=data.ndim, dtype=data.dtype)


def _ints(value, n: int | None = None) -> bool:
    return (type(value) is tuple and (n is None or len(value) == n)
            and all(type(v) is int and v >= 0 for v in value))


def trial_problem(step, case, trial, slack: int = 0) -> str | None:
    """What is wrong with the shape of ``trial`` for the parent's ``case``, or None."""
    if type(trial) is not Trial:
        return f"a {type(trial).__name__} where a trial was due"
    out = trial.out
    if type(out) is not np.ndarray or out.dtype != np.float32 or out.ndim != 1 \
            or out.size != case.out_size + slack:
        what = (f"{out.dtype}[{out.size}]" if type(out) is np.ndarray
                else type(out).__name__)
        return f"out came back as {what}, not float32[{case.out_size + slack}]"
    arrays = {n for n in step.arguments if n != "out"
              and isinstance(case.inputs.get(n), np.ndarray)}
    after = trial.inputs_after
    if type(after) is not dict or set(after) != arrays:
        return (f"the inputs came back as {sorted(after) if type(after) is dict else after!r}, "
                f"not {sorted(arrays)}")
    for name in arrays:
        got, mine = after[name], case.inputs[name]
        if type(got) is not np.ndarray or got.dtype != mine.dtype or got.shape != mine.shape:
            return f"input {name} came back with another type or shape"
    if type(trial.launches) is not list or not all(map(_launch_ok, trial.launches)):
        return "the launches came back malformed"
    if type(trial.shared_meetings) is not int or type(trial.shared_reads_fewest) is not int:
        return "the shared-memory record came back malformed"
    watched = trial.watched
    if type(watched) is not dict:
        return "the recorded accesses came back malformed"
    if watched and set(watched) != arrays | {"out"}:
        return f"accesses came back for {sorted(watched)}, not {sorted(arrays | {'out'})}"
    for name, w in watched.items():
        data = w.__dict__.get("data") if type(w) is WatchedArray else None
        access = w.__dict__.get("access") if type(w) is WatchedArray else None
        if type(data) is not np.ndarray or type(access) is not Access:
            return f"the accesses of {name} came back malformed"
        for field in ("writer_block", "writer_thread", "reader_block", "reader_thread"):
            a = getattr(access, field)
            if type(a) is not np.ndarray or a.dtype != np.int64 or a.shape != data.shape:
                return f"the accesses of {name} came back malformed ({field})"
        if type(access.per_thread) is not dict:
            return f"the accesses of {name} came back malformed (per thread)"
        if not _records_ok(w.__dict__, data.shape):
            return f"the records of {name} came back malformed"
    _rebuilt(watched)
    return None


def _launch_ok(x) -> bool:
    ref = x.fn if type(x) is Launch else None
    return (type(x) is Launch and type(x.kernel) is str and _ints(x.grid, 3)
            and _ints(x.block, 3) and type(x.shared_bytes) is int
            and type(ref) is KernelRef and type(ref.name) is str and type(ref.module) is str
            and type(ref.filename) is str and type(ref.line) is int
            and type(ref.learners) is bool and type(ref.borrowed) is bool
            and (x.arguments is None or type(x.arguments) is tuple and all(
                type(a) is ArgRef and type(a.token) is int and type(a.size) is int
                for a in x.arguments))
            and type(x.idle_blocks) is int and x.idle_blocks >= 0 and type(x.first_idle) is int)


def _records_ok(fields: dict, shape: tuple) -> bool:
    """A WatchedArray's judging records: owner, the first unwritten read, the first foreign
    write, the first host access, the first element two threads stored to (see
    :mod:`.recording`)."""
    owner, reader = fields.get("owner"), fields.get("reader")
    read, foreign, host, twice, unordered, foreign_read = (fields.get(k) for k in (
        "read_unwritten", "foreign_write", "host_access", "twice_written", "unordered_store",
        "foreign_read"))
    return ((owner is None or type(owner) is np.ndarray and owner.shape == shape)
            and (reader is None or type(reader) is np.ndarray and reader.shape == shape)
            and (foreign_read is None or type(foreign_read) is tuple and len(foreign_read) == 3
                 and _ints(foreign_read[0]) and _ints(foreign_read[1], 2)
                 and type(foreign_read[2]) is int)
            and (read is None or type(read) is tuple and len(read) == 2 and _ints(read[0])
                 and _ints(read[1], 2))
            and (foreign is None or type(foreign) is tuple and len(foreign) == 3
                 and _ints(foreign[0]) and _ints(foreign[1], 2) and type(foreign[2]) is int)
            and (host is None or type(host) is str and len(host) <= LINE_CHARS)
            and (twice is None or _ints(twice))
            and (unordered is None or type(unordered) is str and len(unordered) <= LINE_CHARS))


def portable(trial):
    """``trial`` as the child sends it: each launch as data
    (:meth:`.launch_records.Launch.portable`: no kernel object, the arguments as tokens)."""
    tokens: dict = {}
    for w in trial.watched.values():  # the step's own arrays get the first tokens
        tokens.setdefault(id(w), (len(tokens), w))
    return dataclasses.replace(trial, launches=[x.portable(tokens) for x in trial.launches])


def sanitized(trial):
    """``trial`` encoded and decoded: plain arrays only (WireError if it holds anything
    else)."""
    return wire.decode(wire.encode(portable(trial)), MESSAGE_LIMIT)
