"""Cold-L2 event timing of one launcher (:class:`Timer`), GPU only.

Its own small module: the exercise grader times learners' kernels with it and needs nothing
else of the bench.  The method is in :mod:`ropelab.measure.bench`'s docstring.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from .stats import DEFAULT_REPEATS, DEFAULT_WARMUP, flush_bytes, quantiles, repeats_for


class BenchError(RuntimeError):
    """The benchmark cannot run here (simulator, no device)."""


def require_gpu() -> None:
    from ...target import SIMULATED

    if SIMULATED:
        raise BenchError(
            "refusing to benchmark on the Numba CUDA simulator: it runs each CUDA thread as a "
            "Python thread, so any time it reports describes the interpreter, not a GPU. Run on a "
            "machine with an NVIDIA GPU, or look at the recorded GPU data "
            "(python -m ropelab bench --recorded).")


def refused(prog: str) -> bool:
    """True, after saying why on stderr, when there is no GPU here to time on (a command's
    exit status is then 2)."""
    try:
        require_gpu()
    except BenchError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return True
    return False


def _fill(buf, value):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < buf.size:
        buf[i] = value
        i += stride


@dataclass
class Timer:
    """Event timing with an L2-evicting, GPU-occupying fill before every timed launch."""

    warmup: int = DEFAULT_WARMUP
    repeats: int = DEFAULT_REPEATS
    l2_bytes: int = field(init=False)
    flush_bytes: int = field(init=False)

    def __post_init__(self):
        require_gpu()
        dev = cuda.get_current_device()
        self.l2_bytes = int(dev.L2_CACHE_SIZE)
        self.flush_bytes = flush_bytes(self.l2_bytes)
        self._buf = cuda.device_array(self.flush_bytes // 4, dtype=np.float32)
        self._fill = cuda.jit(_fill)
        self._fill_grid = int(dev.MULTIPROCESSOR_COUNT) * 8
        self._k = 0
        self.flush()
        cuda.synchronize()
        self.fill_us = quantiles(self._time_fill())[0]  # how long each fill keeps the GPU busy
        self.last_host_us: list[float] = []

    def _time_fill(self, n: int = 5) -> list[float]:
        out = []
        for _ in range(n):
            s, e = cuda.event(), cuda.event()
            s.record()
            self.flush()
            e.record()
            e.synchronize()
            out.append(cuda.event_elapsed_time(s, e) * 1e3)
        return out

    def flush(self):
        self._k += 1
        self._fill[self._fill_grid, 256](self._buf, np.float32(self._k))

    def estimate_seconds(self, launch) -> float:
        """Wall time of one warm call including synchronization (for slow baselines)."""
        cuda.synchronize()
        t0 = time.perf_counter()
        launch()
        cuda.synchronize()
        return time.perf_counter() - t0

    def time(self, launch, repeats: int | None = None) -> list[float]:
        """Microseconds of ``repeats`` cold, GPU-side launches of ``launch()``."""
        for _ in range(self.warmup):
            launch()
        n = repeats or self.repeats
        n = repeats_for(self.estimate_seconds(launch), n)
        starts = [cuda.event() for _ in range(n)]
        ends = [cuda.event() for _ in range(n)]
        host = []
        cuda.synchronize()
        for s, e in zip(starts, ends):
            self.flush()
            t0 = time.perf_counter()
            s.record()
            launch()
            e.record()
            host.append((time.perf_counter() - t0) * 1e6)
        ends[-1].synchronize()
        # If enqueueing took longer than the fill keeps the GPU busy, the GPU idled between the
        # events and the row measured the host too: host_fields() flags it in the record.
        self.last_host_us = host
        return [cuda.event_elapsed_time(s, e) * 1e3 for s, e in zip(starts, ends)]
