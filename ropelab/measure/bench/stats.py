"""Pure arithmetic on timings: quantiles, GB/s, repeat counts, flush sizes, the method text.

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


def summarize(samples_us, bytes_moved: int, copy_gbps: float | None = None) -> dict:
    """The timing columns of one bench row."""
    med, p20, p80 = quantiles(samples_us)
    rate = gbps(bytes_moved, med)
    return {
        "bytes_moved": int(bytes_moved),
        "median_us": round(med, 3),
        "p20_us": round(p20, 3),
        "p80_us": round(p80, 3),
        "repeats": len(samples_us),
        "gbps": round(rate, 2),
        "copy_gbps": None if copy_gbps is None else round(copy_gbps, 2),
        "frac_of_copy": None if not copy_gbps else round(rate / copy_gbps, 4),
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


def method_text(l2_bytes: int, flush: int, warmup: int, repeats: int) -> str:
    return (
        f"CUDA events on the default stream around each launch; before every timed launch a fill "
        f"kernel writes {flush / 2**20:.0f} MiB (>= {L2_FACTOR}x the {l2_bytes / 2**20:.0f} MiB "
        f"L2), which evicts the L2 (cold cache) and keeps the GPU busy while the host enqueues "
        f"the launch, so the events bracket GPU work only; {warmup} warm-up launches, then up to "
        f"{repeats} timed repeats (fewer for baselines slower than {ENTRY_SECONDS / repeats * 1e3:.0f} "
        f"ms a call, at least {MIN_REPEATS}); median and 20th/80th percentiles; bytes_moved is the "
        f"operation's minimum traffic (same for every row of a shape), GB/s = bytes_moved / "
        f"median (1 GB = 1e9 B); copy_gbps: a device-to-device copy of the same bytes timed the "
        f"same way in the same run (cuMemcpyDtoDAsync called on the driver directly); "
        f"frac_of_copy = gbps / copy_gbps; host_us: median wall time to enqueue the timed launch, "
        f"fill_us: GPU time of one fill; host_bound when host_us >= 0.8 * fill_us (the GPU may "
        f"have idled inside the events)"
    )
