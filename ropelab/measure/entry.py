"""What the benchmark times: one :class:`Entry` per row family (a ropelab call, a baseline).

Its own module because the baselines declare entries and the bench sweeps them: each imports
this, neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Entry:
    """Something to time: ``make(buffers) -> launch()`` or None when it does not apply."""

    name: str
    family: str
    make: object
    fastmath: object = None
    fused: bool = False
    group: int = 0  # run order: 0 ropelab + copy + CUDA C++, 1 eager PyTorch, 2 torch.compile
