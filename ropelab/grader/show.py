"""``verdict.show()``: the learner's own kernel drawn on a small shape.

The graded function runs once more on the simulator, on the step's largest case that is still
small enough to label every cell (at most :data:`MAX_CELLS` elements), with every array a
:class:`.recording.WatchedArray`.  As in grading, the run happens in a forked child with the
check's time limit (:class:`.child.Child`), so a runaway kernel cannot hang the drawing either;
the child sends back the recorded run as data (:mod:`.carried`), and this process builds the
answer and the :class:`Trace`, drawn in the style of the notebooks' thread maps
(:func:`.plots.plot_thread_map`): colour = block, number = global thread.  ``show()`` never
raises: what it cannot draw, it says.

Panels: who wrote each element of ``out``; who last read each element of ``x`` (or the first
input of ``out``'s size); the reference beside the learner's output, wrong cells outlined in
red; reads and writes per thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

MAX_CELLS = 64


@dataclass
class Trace:
    """One recorded run, reduced to plain arrays, beside the case's answer."""

    step: str
    name: str  # the learner's function
    case: str  # the case's label
    shape: tuple  # rows x columns the elements are drawn as
    expected: np.ndarray
    got: np.ndarray  # float32; the sentinel where never written
    wrong: np.ndarray  # bool, the drawn shape
    unwritten: np.ndarray  # bool
    threads_per_block: int
    writer: tuple  # (block, thread) int arrays of out, -1 = nobody
    reader_name: str | None = None
    reader: tuple | None = None  # (block, thread) of the last reader of reader_name
    per_thread: dict = field(default_factory=dict)  # global thread -> (reads, writes)
    error: str | None = None  # what stopped the run early, if anything
    launch: str = ""  # the launch configuration and how many blocks wrote to out


def _pick(cases: list) -> int:
    """The index of the largest case with at most MAX_CELLS elements (else the smallest)."""
    sizes = [c.out_size for c in cases]
    small = [k for k, n in enumerate(sizes) if n <= MAX_CELLS]
    if small:
        return max(small, key=lambda k: sizes[k])
    return min(range(len(sizes)), key=lambda k: sizes[k])


def pick_case(step):
    """The largest of the step's cases with at most MAX_CELLS elements (else the smallest)."""
    cases = step.cases()
    return cases[_pick(cases)]


def _shape_of(expected: np.ndarray) -> tuple:
    return expected.shape if expected.ndim == 2 else (1, expected.size)


def _name(fn) -> str:
    found = getattr(fn, "py_func", None) or getattr(fn, "fn", None) or fn
    name = getattr(found, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def recorded_run(step, inputs, fn):
    """(Where the learner's code runs.)  ``fn`` on one case's inputs with every access
    recorded: ``(trial, None)``, or the trial as far as it got and what stopped it."""
    from . import trial as trials

    try:
        return trials.run(step, inputs, fn), None
    except BaseException as exc:  # noqa: BLE001  (a failing kernel is drawn as far as it got)
        try:
            error = re.sub(r"\s*\[array=\w+\]", "", f"{type(exc).__name__}: {str(exc)[:2000]}")
        except Exception:  # noqa: BLE001  (a message that raises)
            error = type(exc).__name__
        return _partial(step, inputs, fn), error


def trace_of(step, case, trial, error: str | None, name: str) -> Trace:
    """The :class:`Trace` of a recorded run on ``case`` (its answer from this process)."""
    from . import trial as trials

    shape = _shape_of(case.expected)
    out = trial.watched["out"]
    got = np.asarray(out.data, dtype=np.float32)[:case.expected.size]
    expected = case.expected.reshape(shape)
    never = trials.unwritten(got).reshape(shape)
    wrong = trials.wrong_mask(case, got).reshape(shape)  # NaN expected: must stay untouched
    tpb = trial.launches[-1].threads_per_block if trial.launches else int(np.prod(case.block))
    reader_name = "x" if "x" in trial.watched else next(
        (n for n, w in trial.watched.items() if n != "out" and w.size == case.expected.size),
        None)
    per_thread = {}
    for w in trial.watched.values():
        for (block, thread), (reads, writes) in w.access.per_thread.items():
            r, wr = per_thread.get(block * tpb + thread, (0, 0))
            per_thread[block * tpb + thread] = (r + reads, wr + writes)
    reader = None
    if reader_name is not None:
        acc = trial.watched[reader_name].access
        reader = (acc.reader_block.reshape(-1)[:case.expected.size].reshape(shape),
                  acc.reader_thread.reshape(-1)[:case.expected.size].reshape(shape))
    launch = ""
    if trial.launches:
        last = trial.launches[-1]
        busy = len(np.unique(out.access.writer_block[out.access.writer_block >= 0]))
        launch = f"launch: {last.text()}; {busy} of {last.blocks} blocks wrote to out"
    return Trace(step.id, name, case.label, shape, expected, got.reshape(shape), wrong, never,
                 tpb, (out.access.writer_block.reshape(shape), out.access.writer_thread.reshape(
                     shape)), reader_name, reader, per_thread, error, launch)


def record(step, fn) -> Trace:
    """Run ``fn`` on :func:`pick_case` of ``step`` with every access recorded, in this process
    (the simulator); the case's answer is built after the run."""
    from .unseen import scrub

    cases = step.cases()
    k = _pick(cases)
    inputs = cases[k].runnable()
    scrub(cases)
    del cases
    trial, error = recorded_run(step, inputs, fn)
    return trace_of(step, step.cases()[k], trial, error, _name(fn))


def _partial(step, case, fn):
    """Run again, keeping the watched arrays of a run that raised (to draw how far it got)."""
    from . import trial as trials
    from .recording import WatchedArray, intercepted_launches

    size = case.out_size
    watched, args = {}, []
    for arg in step.arguments:
        if arg == "out":
            watched[arg] = WatchedArray("out", np.full(size, trials.SENTINEL, np.float32))
        elif isinstance(case.inputs[arg], np.ndarray):
            watched[arg] = WatchedArray(arg, case.inputs[arg].copy())
        else:
            args.append(trials.host_scalar(step, case.inputs[arg]))
            continue
        args.append(watched[arg])
    launches = []
    try:
        with intercepted_launches() as launches:
            if step.kind == "launch":
                fn(*args)
            else:
                fn[case.grid, case.block](*args)
    except BaseException:  # noqa: BLE001  (the same failure as the first run)
        pass
    inputs_after = {n: w.data for n, w in watched.items() if n != "out"}
    return trials.Trial(watched["out"].data, inputs_after, list(launches), watched)


def _map(ax, block, thread, tpb, title, name):
    """One thread map in the notebooks' style (:func:`.plots.plot_thread_map`): colour =
    block, number = global thread (``-``: nobody)."""
    from ..lessons.plots import plot_thread_map
    from ..lessons.tracing import ThreadMap

    rows, cols = block.shape
    blocks = int(block.max()) + 1 if block.size and block.max() >= 0 else 1
    tmap = ThreadMap(name, rows, cols, (blocks, 1), (tpb, 1), block, thread)
    plot_thread_map(tmap, ax, label="global")
    _label(ax, title, block.shape)


def _label(ax, title: str, shape: tuple) -> None:
    rows, cols = shape
    ax.set_xticks(range(0, cols, max(1, cols // 16)))
    ax.set_yticks(range(rows))
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("element of the row")
    ax.set_ylabel("row")


def _values(ax, values, title, limits, *, wrong=None, never=None):
    import matplotlib.patches as patches

    shown = np.where(np.isfinite(values), values, np.nan).astype(np.float64)
    if never is not None:
        shown = np.where(never, np.nan, shown)
    ax.imshow(shown, cmap="coolwarm", aspect="auto", interpolation="nearest",
              vmin=-limits, vmax=limits)
    if never is not None:
        for (r, c), flag in np.ndenumerate(never):
            if flag:
                ax.text(c, r, "·", ha="center", va="center", fontsize=8, color="black")
    if wrong is not None:
        for (r, c), flag in np.ndenumerate(wrong):
            if flag:
                ax.add_patch(patches.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False,
                                               edgecolor="red", linewidth=1.5, label="wrong"))
    _label(ax, title, values.shape)


def draw(trace: Trace):
    """The figure of a :class:`Trace` (see the module docstring); returns it."""
    import matplotlib.pyplot as plt

    rows, cols = trace.shape
    width = max(8.0, 0.32 * cols * 2 + 2)
    fig = plt.figure(figsize=(width, 3 * (0.35 * rows + 1.2) + 2.2))
    grid = fig.add_gridspec(3, 2)
    ax_w, ax_r = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ax_ref, ax_got = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    ax_n = fig.add_subplot(grid[2, :])
    _map(ax_w, *trace.writer, trace.threads_per_block, "who wrote out: colour = block, "
         "number = global thread", trace.name)
    if trace.reader is not None:
        _map(ax_r, *trace.reader, trace.threads_per_block,
             f"who last read {trace.reader_name}", trace.name)
    else:
        ax_r.set_title("no input of out's size to draw", fontsize=9)
        ax_r.axis("off")
    limits = float(np.nanmax(np.abs(trace.expected), initial=0.0)) or 1.0
    _values(ax_ref, trace.expected, "reference (float64)", limits)
    n_wrong = int(trace.wrong.sum())
    _values(ax_got, trace.got, f"yours: {n_wrong} wrong (red), {int(trace.unwritten.sum())} "
            "never written (·)", limits, wrong=trace.wrong, never=trace.unwritten)
    threads = sorted(trace.per_thread)
    reads = [trace.per_thread[t][0] for t in threads]
    writes = [trace.per_thread[t][1] for t in threads]
    ax_n.bar(np.arange(len(threads)) - 0.2, reads, width=0.4, label="reads")
    ax_n.bar(np.arange(len(threads)) + 0.2, writes, width=0.4, label="writes")
    step_every = max(1, len(threads) // 32)
    ax_n.set_xticks(np.arange(len(threads))[::step_every], [str(t) for t in threads][::step_every],
                    fontsize=7)
    ax_n.set_xlabel("global thread (threads that touched no array are left out)")
    ax_n.set_ylabel("accesses")
    ax_n.set_title("global-memory accesses per thread", fontsize=9)
    ax_n.legend(fontsize=7)
    notes = [trace.launch] if trace.launch else []
    if trace.error:
        notes.append(f"stopped early: {trace.error.splitlines()[0][:120]}")
    fig.suptitle("\n".join([f"{trace.name} on step {trace.step}, case {trace.case}", *notes]),
                 fontsize=10)
    fig.tight_layout()
    return fig


def _serve(step, fn):
    def serve(receive, send):
        message = receive()
        if type(message) is tuple and len(message) == 2 and message[0] == "case":
            from .carried import portable

            trial, error = recorded_run(step, message[1], fn)
            send(("recorded", portable(trial), error))
    return serve


def _record_in_child(step, fn, timeout_s: float):
    """``(trace, None)`` or ``(None, why not)``: the run in a forked child, the answer here."""
    from . import carried
    from .child import Child, ChildEnded

    with Child(_serve(step, fn), timeout_s=timeout_s, limit=carried.MESSAGE_LIMIT) as child:
        cases = step.cases()  # after the fork: the child has no answer
        case = cases[_pick(cases)]
        try:
            child.send(("case", case.runnable()))
            answer = child.receive()
        except ChildEnded as end:
            return None, f"recording the kernel {end.how} ({end.detail})"
    if not (type(answer) is tuple and len(answer) == 3 and answer[0] == "recorded"
            and (answer[2] is None or type(answer[2]) is str)):
        return None, "the recording process answered with something that is not a recording"
    _, trial, error = answer
    problem = carried.trial_problem(step, case, trial)
    if problem is not None or "out" not in trial.watched:
        return None, f"the recording did not fit case {case.label}: {problem or 'no out'}"
    return trace_of(step, case, trial, error and error[:2000], _name(fn)), None


def show_verdict(verdict, timeout_s: float = 30.0):
    """Record and draw the verdict's kernel; the figure, or None (a sentence printed) when
    there is nothing to draw.  Never raises."""
    from .child import can_fork

    subject = getattr(verdict, "subject", None)
    if not (isinstance(subject, tuple) and len(subject) == 2):
        print("nothing to show: this verdict came without its kernel (grade it with "
              "steps.check)")
        return None
    step, fn = subject
    try:
        timeout_s = float(timeout_s)
    except (TypeError, ValueError):
        timeout_s = 30.0
    if not (0 < timeout_s < float("inf")):
        timeout_s = 30.0
    try:
        if not can_fork():
            from ..target import SIMULATED
            if not SIMULATED:
                print("nothing to show: drawing a kernel needs the simulator (it records every "
                      "access); run the notebook with ROPELAB_TARGET=simulator")
                return None
            trace = record(step, fn)
        else:
            trace, why = _record_in_child(step, fn, timeout_s)
            if trace is None:
                print(f"nothing to show: {why}")
                return None
        return draw(trace)
    except Exception as exc:  # noqa: BLE001  (show() says why, it never raises)
        print(f"nothing to show: {type(exc).__name__}: {exc}")
        return None
