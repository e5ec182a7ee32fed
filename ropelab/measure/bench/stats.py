"""Pure arithmetic on timings: quantiles, GB/s, repeat counts, flush sizes.

Tested on synthetic numbers; nothing here touches a GPU.
"""

from __future__ import annotations

import numpy as np

# At least this much, and at least 4x the L2.  1 GiB keeps the H200 busy for ~300 us, longer than
# the host needs to enqueue any launch we time (numba's dispatch of a many-argument kernel is
# 40-100 us); each row records the host time so a reader can check that.
FLUSH_BYTES_MIN = 2**30
L2_FACTOR = 4
DEFAULT_REPEATS = 50
DEFAULT_WARMUP = 5
ENTRY_SECONDS = 2.0  # a slow baseline gets fewer repeats so one row takes about this long
MIN_REPEATS = 5


def quantiles(samples_us) -> tuple[float, float, float]:
    """(median, 20th percentile, 80th percentile) of the samples, linear interpolation."""
    a = np.asarray(samples_us, dtype=np.float64)
    if a.size == 0:
        raise ValueError("no timing samples")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"timing samples must be finite and positive, got {a.min()}..{a.max()}")
    p20, med, p80 = np.percentile(a, [20, 50, 80])
    return float(med), float(p20), float(p80)


def gbps(bytes_moved: int, microseconds: float) -> float:
    """Decimal gigabytes per second (1 GB = 1e9 bytes), as GPU data sheets quote bandwidth."""
    if microseconds <= 0:
        raise ValueError("time must be positive")
    return bytes_moved / (microseconds * 1e-6) / 1e9


def host_fields(host_us, fill_us) -> dict:
    """Host enqueue time of the timed launches against the GPU time each fill covers.

    ``host_bound`` is True when the median enqueue time reached 80% of the fill's duration: the
    GPU may have run out of work before the launch arrived, so the row may include host time.
    """
    if not host_us or not fill_us:
        return {"host_us": None, "fill_us": None, "host_bound": None}
    host = quantiles(host_us)[0]
    return {"host_us": round(host, 2), "fill_us": round(float(fill_us), 2),
            "host_bound": bool(host >= 0.8 * fill_us)}


def summarize(samples_us, bytes_moved: int, copy_gbps: float | None = None,
              rounded: bool = True) -> dict:
    """The timing columns of one bench row (:data:`.kinds.TIMING`, in that order); times to the
    nanosecond and rates to 0.01 GB/s unless ``rounded`` is False."""
    med, p20, p80 = quantiles(samples_us)
    rate = gbps(bytes_moved, med)
    frac = None if not copy_gbps else rate / copy_gbps
    r = (lambda v, n: v if v is None or not rounded else round(v, n))  # noqa: E731
    return {
        "bytes_moved": int(bytes_moved),
        "median_us": r(med, 3),
        "p20_us": r(p20, 3),
        "p80_us": r(p80, 3),
        "repeats": len(samples_us),
        "gbps": r(rate, 2),
        "copy_gbps": r(copy_gbps, 2),
        "frac_of_copy": r(frac, 4),
    }


def repeats_for(seconds_per_call: float, repeats: int = DEFAULT_REPEATS,
                budget_s: float = ENTRY_SECONDS, minimum: int = MIN_REPEATS) -> int:
    """Fewer repeats for slow baselines (eager PyTorch at 1 GB takes ~0.1 s a call)."""
    if seconds_per_call <= 0:
        return repeats
    return max(minimum, min(repeats, int(budget_s / seconds_per_call)))


def flush_bytes(l2_bytes: int) -> int:
    """Size of the L2-evicting fill buffer: at least 4x the L2 and at least 1 GiB."""
    return max(L2_FACTOR * int(l2_bytes), FLUSH_BYTES_MIN)


def per_launch_us(seconds: float, launches: int) -> float:
    if launches <= 0:
        raise ValueError("launches must be positive")
    return seconds / launches * 1e6
