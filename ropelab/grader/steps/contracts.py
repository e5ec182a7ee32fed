"""The grid and block rules that launch steps state, each with the check that enforces it.

A launch step's text says more than "legal and covering": threads per block a multiple of 32,
one block per token, at most ``ceil(rows / 4)`` blocks, the given second stage launched with its
own grid over exactly the rows the first stage wrote.  Each such sentence is one
:class:`LaunchRule` in the step's ``launch_rules``; the grader (:func:`..grading._compare`)
asks every rule about the launches it recorded (:class:`~ropelab.grader.launch_records.Launch`) and
reports the first broken one, in the step's words, before it compares values: a launch that
breaks its contract is wrong whatever numbers it happens to give.

``Launch.learners`` tells the learner's kernels from the ones a step gives (ropelab's own, such
as 08.4's ``reduce_partials_kernel``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..grading import Case
from ...cuda_limits import WARP



@dataclass(frozen=True)
class LaunchRule:
    """One stated rule: ``rule`` in the step's words, ``check(case, launches)`` the first
    breach in words (None when it holds), ``hint`` what to do."""

    rule: str
    check: Callable[[Case, list], str | None]
    hint: str = ""

    def problem(self, case: Case, launches: list) -> str | None:
        return self.check(case, launches)


def _same(a, b) -> bool:
    """Whether two launch arguments are one object: the same token once they crossed from the
    grading child (:class:`~ropelab.grader.launch_records.ArgRef`), else the same object."""
    token = getattr(a, "token", None)
    return a is b or token is not None and token == getattr(b, "token", None)


def _learners(launches: list) -> list:
    return [launch for launch in launches if launch.learners]


def _each(launches: list, test: Callable) -> str | None:
    for launch in _learners(launches):
        found = test(launch)
        if found:
            return f"{launch.kernel}[{launch.text()}]: {found}"
    return None


def threads_multiple_of(n: int = WARP) -> LaunchRule:
    """Threads per block a multiple of ``n`` (whole warps)."""
    def check(case, launches):
        return _each(launches, lambda launch: (
            f"{launch.threads_per_block} thread{'s' if launch.threads_per_block > 1 else ''} "
            f"per block, not a multiple of {n}" if launch.threads_per_block % n else None))
    return LaunchRule(f"threads per block a multiple of {n} (whole warps)", check,
                      "pick the block in whole warps: 32, 64, ... 1024 threads")


def threads_exactly(count: Callable[[Case], int], words: str) -> LaunchRule:
    """Threads per block as the step computes them from the shape."""
    def check(case, launches):
        want = count(case)
        return _each(launches, lambda launch: (
            f"{launch.threads_per_block} threads per block, but the step asks for {words}: "
            f"{want} here" if launch.threads_per_block != want else None))
    return LaunchRule(f"threads per block: {words}", check)


def blocks_exactly(count: Callable[[Case], int], words: str) -> LaunchRule:
    def check(case, launches):
        want = count(case)
        return _each(launches, lambda launch: (
            f"{launch.blocks} block{'s' if launch.blocks > 1 else ''}, but the step asks for "
            f"{words}: {want} here" if launch.blocks != want else None))
    return LaunchRule(f"blocks: {words}", check)


def blocks_at_most(count: Callable[[Case], int], words: str) -> LaunchRule:
    def check(case, launches):
        cap = count(case)
        return _each(launches, lambda launch: (
            f"{launch.blocks} blocks, more than the step's cap of {words}: {cap} here"
            if launch.blocks > cap else None))
    return LaunchRule(f"at most {words} blocks", check,
                      "cap the grid: blocks = min(the blocks the work needs, the cap)")


def given_launch(kernel: str, grid: Callable[[Case], int], threads: int,
                 words: str) -> LaunchRule:
    """The step's given kernel ``kernel`` is launched, after the learner's, with ``grid(case)``
    blocks of ``threads``."""
    def check(case, launches):
        given = [launch for launch in launches if not launch.learners]
        if not given:
            return f"{kernel} was never launched: the step launches it after yours ({words})"
        launch = given[-1]
        if launches.index(launch) < max((launches.index(x) for x in _learners(launches)),
                                        default=-1):
            return f"{kernel} ran before your kernel: it reduces what yours wrote"
        want = (grid(case), 1, 1), (threads, 1, 1)
        if (launch.grid, launch.block) != want:
            return (f"{kernel}[{launch.text()}], but the step launches it with {words}: "
                    f"grid {want[0][0]} x block {want[1][0]} here")
        return None
    return LaunchRule(f"{kernel} launched last, {words}", check)


def float32_argument(position: int, values: Callable[[Case], tuple], words: str) -> LaunchRule:
    """The learner's launch passes, at ``position``, one of ``values(case)`` (the readings of
    the step's float64 formula) rounded once to float32, bit for bit.  Only a value within
    1e-4 of them is judged here: the right number rounded another way (computed in float32); a
    value further off is the value check's, whose hint says which mistake it resembles."""
    def check(case, launches):
        wants = {float(np.float32(v)) for v in values(case)}
        for launch in _learners(launches):
            if launch.arguments is None or len(launch.arguments) <= position:
                continue
            got = getattr(launch.arguments[position], "value", None)
            if got is None:
                continue
            got = float(np.float32(got))
            near = min(abs(got / w - 1.0) for w in wants if w) if any(wants) else 1.0
            if got not in wants and near < 1e-4:
                return (f"{launch.kernel}[{launch.text()}]: {words} is {got!r}, but the step's "
                        f"float64 value rounded once to float32 is {min(wants)!r}")
        return None
    return LaunchRule(f"{words}: computed in float64, rounded once to float32", check,
                      f"compute {words} with Python floats (float64) and round it once, as "
                      "float32(...) in the launch")


def reads_what_was_written(kernel: str, position: int, per_block: int,
                           what: str) -> LaunchRule:
    """The given ``kernel``'s argument ``position`` (``what``) is the buffer the learner's kernel
    wrote, exactly ``per_block`` floats per block of that launch."""
    def check(case, launches):
        given = [launch for launch in launches if not launch.learners]
        mine = [launch for launch in _learners(launches) if launch.arguments is not None]
        if not given or given[-1].arguments is None:
            return None  # given_launch reports it
        buffer = given[-1].arguments[position]
        writer = [launch for launch in mine if any(_same(a, buffer) for a in launch.arguments)]
        if not writer:
            return (f"the {what} {kernel} summed were never written: no launch of your kernel "
                    f"had that buffer as an argument (is the first stage missing, or given "
                    f"another buffer?)")
        size = max(int(getattr(buffer, "size", 0)), 0)
        want = writer[-1].blocks * per_block
        if size != want:
            return (f"the {what} buffer holds {size} floats, but {writer[-1].kernel}'s "
                    f"{writer[-1].blocks} blocks write {want} ({per_block} a block): {kernel} "
                    f"reads every row it is given")
        return None
    return LaunchRule(f"{kernel} reads exactly the {what} your kernel wrote", check)
