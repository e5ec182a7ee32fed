"""Which of one launch's accesses of an element no barrier orders: the global-memory race
check of the simulated grader.

In one launch, a thread that reads an element another thread stored, or stores over one
another thread read, with nothing ordering the two, has no defined result on a GPU: the
simulator runs a block's threads in turn, so such a kernel gives the right answer there.  Two
accesses are ordered when one thread made both, or when both threads are in one block and a
``cuda.syncthreads()`` lies between (a ``cuda.syncwarp()`` within a warp: the thread clocks are
:mod:`ropelab.sim.shared_race`'s); threads of different blocks are never ordered within a
launch.  ``cuda.atomic.*`` updates are ordered among themselves, not with plain accesses.  Two
unordered stores of different values are reported to the caller rather than raised (which lands
last is the schedule's choice, but where the values come out wrong the value check says more).

:class:`Ordering` keeps one launch's records of one array; :mod:`.recording` (a step's arrays)
and :mod:`.launch_records` (the buffers a launch function makes) use it.
"""

from __future__ import annotations


class GlobalMemoryRace(RuntimeError):
    """Two threads of one launch touched one element of a step's array, at least one a plain
    write, with nothing ordering them."""


def _ordered(a, a_clock, b, b_clock) -> bool:
    """Whether something orders an access of simulated thread ``a`` before one of ``b``: the
    same thread, or one block with a barrier between (:func:`ropelab.sim.shared_race._ordered`)."""
    from ..sim import shared_race

    return a is b or (a.blockIdx == b.blockIdx and shared_race._ordered(a, a_clock, b, b_clock))


class Ordering:
    """One launch's accesses of one array's elements, by simulated thread and clock: what
    :meth:`access` checks a new access against (see the module docstring).  ``name`` is the
    array as a verdict names it."""

    def __init__(self, name: str, launch, element: str = "{name}[{index}]"):
        self.name, self.launch, self.element = name, launch, element
        self.writes: dict = {}  # element -> (thread, clock, value stored or None)
        self.reads: dict = {}  # element -> {thread: clock}
        self.atomics: dict = {}  # element -> {thread: clock}

    def access(self, key, shown: str, write: bool, value=None) -> str | None:
        """Record an access of element ``key`` (``shown``: its index, as a verdict prints it)
        by the current simulated thread; raise :class:`GlobalMemoryRace` for one no barrier
        orders after a conflicting one, or return the message of an unordered store of a
        different value (judged by the caller: recorded, not raised)."""
        from ..sim import shared_race

        me, clock = shared_race._thread()
        if shared_race.in_atomic():
            for other, at in self.reads.get(key, {}).items() if write else ():
                if not _ordered(other, at, me, clock):
                    raise self._race(shown, other, "read it", me, "updated it atomically")
            last = self.writes.get(key)
            if last is not None and not _ordered(last[0], last[1], me, clock):
                raise self._race(shown, last[0], "wrote it", me, "updated it atomically")
            if write:
                self.atomics.setdefault(key, {})[me] = clock
            return None
        did = "wrote it" if write else "read it"
        last = self.writes.get(key)
        if last is not None and not write and not _ordered(last[0], last[1], me, clock):
            raise self._race(shown, last[0], "wrote it", me, did)
        for other, at in self.atomics.get(key, {}).items():
            if not _ordered(other, at, me, clock):
                raise self._race(shown, other, "updated it atomically", me, did)
        if not write:
            self.reads.setdefault(key, {})[me] = clock
            return None
        for other, at in self.reads.get(key, {}).items():
            if not _ordered(other, at, me, clock):
                raise self._race(shown, other, "read it", me, did)
        found = None
        if last is not None and not _ordered(last[0], last[1], me, clock) and \
                _differ(last[2], value):
            # where the values come out wrong, the value check's words (an index mistake, say)
            # say more; where they come out right, this is what is wrong (grading._compare)
            found = str(self._race(shown, last[0], f"stored {_shown(last[2])}", me,
                                   f"stored {_shown(value)}",
                                   " (which store lands last is the schedule's choice)"))
        self.writes[key] = (me, clock, value)
        self.reads.pop(key, None)
        return found

    def _race(self, shown: str, first, first_did: str, me, me_did: str,
              what: str = "") -> GlobalMemoryRace:
        where = lambda t: f"thread {t.label} of block {_block_text(t.blockIdx)}"  # noqa: E731
        across = first.blockIdx != me.blockIdx
        why = (", in one launch (threads of different blocks are never ordered within one "
               "launch: pass the value on through a second launch)" if across else
               ", with no cuda.syncthreads() between: on a GPU they run at once (the simulator "
               "ran them in turn)")
        element = self.element.format(name=self.name, index=shown)
        return GlobalMemoryRace(f"global-memory race on {element}: {where(first)} "
                                f"{first_did} and {where(me)} {me_did}{why}{what}")


def _differ(a, b) -> bool:
    """Whether two stored values differ (unknown ones, a slice's, count as equal: no claim)."""
    if a is None or b is None:
        return False
    try:
        return not (bool(a == b) or (a != a and b != b))
    except (TypeError, ValueError):
        return False


def _shown(value) -> str:
    return "a value" if value is None else repr(value.item() if hasattr(value, "item") else value)


def _block_text(block: tuple) -> str:
    return str(block[0]) if block[1] == block[2] == 0 else str(tuple(block))
