"""The time model, its fit and its validation: a roofline with a handful of fitted constants.

One launch (:func:`.features.launch_features`) takes::

    launch_us + smooth max(memory, l2, l1, latency, blocks, issue, lines) + host

``host`` is what a launch step's function does between its launches that the GPU waits for:
``copy_call_us`` per copy to or from the GPU plus its bytes over ``pcie_bytes_per_us``, and
``alloc_us`` per device allocation (0 for a kernel step).

with seven ceilings, each a physical limit:

``memory``   the arrays' bytes over the DRAM bandwidth (times ``1 + drain / blocks per SM``: an
             SM holding two big blocks idles a block's place while its last warps finish), plus
             ``dram_ramp_us`` times the share
             of the machine the launch fills: the DRAM pipeline's fill and drain, which a
             launch of a few warps never reaches (its time is the latency ceiling's);
``l2``       the 32-byte sectors the warps ask for, over the L2's bandwidth: narrow or
             scattered accesses fetch more sectors than the bytes they use;
``l1``       the 128-byte lines (wavefronts) the warps' accesses touch, at about one per cycle
             per SM: a warp whose lanes each read a line of their own (a row per thread) is
             served 32 times slower than a coalesced one, whatever the L2 holds;
``latency``  waves x a warp's lifetime, ``wave_us + round * rounds + l1_round_us *
             hit_rounds + max(serial * issue, serial_line * serial_lines)`` (the last: one
             thread of the block looping while the rest wait; where one thread loops, its
             warp's dependent instructions and its extra lines are the same loop, paid once;
             ``serial_line`` is :func:`serial_line_us`: a loop over global memory waits
             ``line_us`` a line, plus ``loaded_line_us`` times the share of the machine the
             launch fills, where its loads queue behind everyone's; a loop over shared memory
             or registers waits ``shared_line_us``, or, where the looping threads of several
             resident blocks share a scheduler, takes ``serial_line_cycles`` of it per line
             each):
             too few warps in flight (small blocks, one load per thread, loads that wait
             for loads) leave the memory idle between rounds; a round is ``round_us`` (a DRAM
             latency), or ``l2_round_us`` for the share of bytes an earlier launch of the
             step was given (``warm``: in the L2, which the timer empties only per step);
``blocks``   ``block_us`` per block an SM starts: tiny blocks pay their start-up;
``issue``    the warps' issue cycles over the SMs' four schedulers, times ``issue_scale``;
``lines``    the source lines the launch's warps run (``thread_lines``: a warp's busiest lane
             in the first block on the simulator, averaged over its warps, for every warp of
             the grid) at ``line_cycles`` of a scheduler each: the work of a loop whose trip count depends on the data (a carry
             loop, a search), which ``issue`` cannot see, since the PTX holds the loop's body
             once and the bytes do not grow with it.

The smooth max is ``(sum of t**SMOOTH) ** (1 / SMOOTH)``: the largest ceiling, raised a little
where two are close.  A step that launches several kernels takes the sum of their times.

The constants (:data:`PRIORS`, in us and bytes) are fitted by least squares on
``log(predicted / measured)``, pulled gently toward their priors (a factor e is one standard
deviation), so a constant the training rows cannot see stays at its physical value instead of
running off.  :func:`cross_validate` refits with one *family* of rows left out at a time (a
step's kernels, or a recorded kernel at every size) and predicts that family: the errors a
learner's kernel of a step the fit never saw can expect.  The bar is the trivial model, a fixed
fraction of the copy of the step's bytes, fitted and validated the same way.
"""

from __future__ import annotations

import math

import numpy as np

from ...cuda_limits import WARP
from .features import SMS

CLOCK_PER_US = 1980.0  # H200 SXM boost clock, MHz
SCHEDULERS = 4
SECTOR = 32
SMOOTH = 4.0
PRIORS = {
    "launch_us": 3.0,  # launch to the end of the last block, on a busy GPU
    "dram_bytes_per_us": 4.2e6,  # 4.2 TB/s: a large device copy on this H200
    "l2_bytes_per_us": 1.0e7,
    "wave_us": 0.5,  # a block's start and end, once per wave
    "round_us": 0.8,  # one DRAM latency under load
    "l2_round_us": 0.2,  # one L2 hit latency
    "dram_ramp_us": 2.0,  # DRAM pipeline fill and drain of a launch that fills the machine
    "block_us": 0.03,  # per block an SM starts
    "issue_scale": 1.5,  # SASS instructions per PTX instruction, roughly
    "serial": 2.0,  # cycles a warp's own dependent instructions take per issue cycle
    # One synchronous copy between host and GPU (pageable memory): the call, its wait for the
    # GPU to drain, and the host work after it that the wait leaves exposed (the launches).
    "copy_call_us": 100.0,  # numba's cuda.to_device of a small host array, as timed in 10.4
    "pcie_bytes_per_us": 2.0e4,  # 20 GB/s: such a copy's bandwidth
    # one device allocation (numba's, no memory pool) as the GPU timer sees it: mostly hidden
    # behind the kernel already running (a step's second stage allocates while the first runs)
    "alloc_us": 4.0,
    # a simulated source line the busiest thread of a block runs beyond its block's mean (one
    # thread looping while the others wait): about a tenth of an L2 round a loop iteration
    "line_us": 0.03,
    # the same where the loop reads no global memory (shared memory, registers): its
    # iteration waits on a shared-memory load or an add, tens of cycles, not an L2 round
    "shared_line_us": 0.01,
    # what a global-memory loop's line adds where the launch fills the machine: its loads
    # wait behind everyone else's (a loaded DRAM round is several idle ones)
    "loaded_line_us": 0.05,
    # a scheduler's cycles per such line when several blocks' looping threads share it
    "serial_line_cycles": 8.0,
    "l1_round_us": 0.02,  # one L1 hit latency (about 40 cycles)
    "l1_lines_per_cycle": 1.0,  # 128-byte lines (wavefronts) an SM's L1 serves per cycle
    "drain": 0.2,  # the DRAM time lost per block resident on an SM, as its last warps finish
    # a scheduler's cycles per simulated source line a warp runs: a line of integer work is a
    # few PTX instructions, issued one a cycle, some waiting on the one before
    "line_cycles": 2.5,
}
PARAMS = tuple(PRIORS)
PRIOR_SIGMA = 1.0  # in log units
PRIOR_WEIGHT = 0.05  # against one row's squared log error
ROOFS = ("memory", "l2", "l1", "latency", "blocks", "issue", "lines")


def roofs(f: dict, c: dict) -> dict:
    """The seven ceilings of one launch, in us (see the module docstring)."""
    warm = f.get("warm", 0.0)
    round_us = c["round_us"] * (1 - warm) + c["l2_round_us"] * warm
    lifetime = (c["wave_us"] + round_us * f["rounds"] + c["l1_round_us"] * f.get("hit_rounds", 0.0)
                + max(c["serial"] * f["issue"] / CLOCK_PER_US,
                      serial_line_us(f, c) * f.get("serial_lines", 0.0)))
    fill = machine_fill(f)
    # An SM that holds few blocks (two of 1024 threads) leaves a block's place idle while its
    # last warps finish: the DRAM sees that share of the SM's requests missing.
    blocks_per_sm = resident_blocks(f)
    drain = 1.0 + c["drain"] / max(blocks_per_sm, 1.0)
    return {"memory": f["dram_bytes"] / c["dram_bytes_per_us"] * drain + c["dram_ramp_us"] * fill,
            "l2": f["sectors"] * SECTOR / c["l2_bytes_per_us"],
            "l1": f.get("wavefronts", 0.0) / (SMS * CLOCK_PER_US * c["l1_lines_per_cycle"]),
            "latency": f["waves"] * lifetime,
            "blocks": c["block_us"] * f["blocks"] / SMS,
            "issue": c["issue_scale"] * f["warps"] * f["issue"] / (SMS * SCHEDULERS * CLOCK_PER_US),
            "lines": lines_us(f, c)}


def resident_blocks(f: dict) -> float:
    """The blocks an SM holds at once (its resident warps over a block's warps)."""
    return f["resident_warps"] / max(1.0, math.ceil(f["threads_per_block"] / WARP))


def machine_fill(f: dict) -> float:
    """The share of the machine's warp slots the launch's warps fill (at most 1)."""
    return min(1.0, f["warps"] / (SMS * f["resident_warps"]))


def serial_line_us(f: dict, c: dict) -> float:
    """What one line of the busiest thread's extra work costs its block: the wait of one
    iteration (``line_us`` where the loop reads global memory, ``shared_line_us`` where it
    does not), or, where the looping threads of several resident blocks share a scheduler,
    their turns at it (``serial_line_cycles`` each)."""
    if f.get("loop_global", 1.0):
        return c["line_us"] + c["loaded_line_us"] * machine_fill(f)
    # one looping thread a block: the blocks an SM runs at once (a small grid has fewer)
    blocks_per_sm = min(resident_blocks(f), max(1.0, f["blocks"] / SMS))
    sharing = max(1.0, blocks_per_sm / SCHEDULERS)
    return max(c["shared_line_us"], sharing * c["serial_line_cycles"] / CLOCK_PER_US)


def lines_us(f: dict, c: dict) -> float:
    """The ``lines`` ceiling: every warp of the grid runs ``thread_lines`` at ``line_cycles``
    each, spread over the schedulers that have a warp to run (a grid of one warp has one)."""
    warps = f["blocks"] * math.ceil(f["threads_per_block"] / WARP)
    schedulers = max(1, min(warps, SMS * SCHEDULERS))
    return c["line_cycles"] * warps * f.get("thread_lines", 0.0) / (schedulers * CLOCK_PER_US)


def host_us(f: dict, c: dict) -> float:
    """What a launch function's copies and allocations add (0 for a kernel step): the GPU
    waits for them, in series with the launches."""
    calls = f.get("h2d", 0.0) + f.get("d2h", 0.0)
    moved = f.get("h2d_bytes", 0.0) + f.get("d2h_bytes", 0.0)
    return (c["copy_call_us"] * calls + moved / c["pcie_bytes_per_us"]
            + c["alloc_us"] * f.get("allocs", 0.0))


def launch_us(f: dict, c: dict) -> float:
    r = roofs(f, c)
    return c["launch_us"] + sum(t ** SMOOTH for t in r.values()) ** (1 / SMOOTH) + host_us(f, c)


def predict(launches: list, c: dict) -> float:
    """Predicted time of a step's launches (a list of feature dicts), in us."""
    if not launches:
        raise ValueError("no launch to predict")
    return sum(launch_us(f, c) for f in launches)


def binding(f: dict, c: dict) -> str:
    """The ceiling that sets this launch's time."""
    r = roofs(f, c)
    return max(r, key=r.get)


# --------------------------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------------------------

def _constants(phi) -> dict:
    return {n: float(math.exp(v)) for n, v in zip(PARAMS, phi)}


def _residuals(phi, rows, prior_weight: float) -> np.ndarray:
    c = _constants(phi)
    fit = [math.log(predict(r["launches"], c) / r["measured_us"]) for r in rows]
    prior = [math.sqrt(prior_weight) * (v - math.log(PRIORS[n])) / PRIOR_SIGMA
             for n, v in zip(PARAMS, phi)]
    return np.array(fit + prior)


def fit(rows: list, prior_weight: float = PRIOR_WEIGHT, iterations: int = 60) -> dict:
    """Constants minimizing the squared log errors of ``rows`` (Levenberg-Marquardt on the
    logarithms of the constants, which keeps them positive)."""
    if not rows:
        raise ValueError("no rows to fit")
    phi = np.array([math.log(PRIORS[n]) for n in PARAMS])
    damping = 1e-2
    res = _residuals(phi, rows, prior_weight)
    cost = float(res @ res)
    for _ in range(iterations):
        jac = np.empty((res.size, phi.size))
        for j in range(phi.size):
            step = np.zeros_like(phi)
            step[j] = 1e-5
            jac[:, j] = (_residuals(phi + step, rows, prior_weight) - res) / 1e-5
        normal = jac.T @ jac
        grad = jac.T @ res
        while True:
            delta = np.linalg.solve(normal + damping * np.diag(np.diag(normal) + 1e-12), -grad)
            trial = phi + delta
            trial_res = _residuals(trial, rows, prior_weight)
            trial_cost = float(trial_res @ trial_res)
            if trial_cost < cost:
                phi, res, cost = trial, trial_res, trial_cost
                damping = max(damping / 3, 1e-7)
                break
            damping *= 4
            if damping > 1e8:
                return _constants(phi)
        if float(np.max(np.abs(delta))) < 1e-7:
            break
    return _constants(phi)


def trivial_fraction(rows: list) -> float:
    """The trivial model's one constant: time = copy time / fraction (geometric mean)."""
    return math.exp(-float(np.mean([math.log(r["measured_us"] / r["copy_us"]) for r in rows])))


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

def cross_validate(rows: list, prior_weight: float = PRIOR_WEIGHT) -> list[dict]:
    """Each row predicted by a fit without its family: ``{key, family, measured_us,
    model_us, model_error, trivial_us, trivial_error}`` (error = predicted / measured - 1)."""
    out = []
    for family in sorted({r["family"] for r in rows}):
        train = [r for r in rows if r["family"] != family]
        held = [r for r in rows if r["family"] == family]
        if not train:
            raise ValueError("cross-validation needs at least two families")
        c = fit(train, prior_weight)
        fraction = trivial_fraction(train)
        for r in held:
            model_us = predict(r["launches"], c)
            trivial_us = r["copy_us"] / fraction
            out.append({"key": r["key"], "family": family, "measured_us": r["measured_us"],
                        "model_us": round(model_us, 3),
                        "model_error": round(model_us / r["measured_us"] - 1, 4),
                        "trivial_us": round(trivial_us, 3),
                        "trivial_error": round(trivial_us / r["measured_us"] - 1, 4)})
    return out


def summary(lines: list[dict]) -> dict:
    """Mean and worst |error| of both models, and per family, of validation ``lines``."""
    def stats(chosen, model):
        errors = [abs(x[f"{model}_error"]) for x in chosen]
        if not errors:
            return None, None
        return round(sum(errors) / len(errors), 4), round(max(errors), 4)

    out = {"rows": len(lines)}
    for model in ("model", "trivial"):
        out[f"{model}_mean"], out[f"{model}_max"] = stats(lines, model)
    families = {}
    for family in sorted({x["family"] for x in lines}):
        chosen = [x for x in lines if x["family"] == family]
        m_mean, m_max = stats(chosen, "model")
        t_mean, t_max = stats(chosen, "trivial")
        families[family] = {"rows": len(chosen), "model_mean": m_mean, "model_max": m_max,
                            "trivial_mean": t_mean, "trivial_max": t_max}
    out["families"] = families
    out["families_worse_than_trivial"] = [f for f, s in families.items()
                                          if s["model_mean"] > s["trivial_mean"]]
    out["interval_80"] = interval(lines)
    return out


def interval(lines: list[dict], coverage: float = 0.8) -> list[float]:
    """``[low, high]``: measured / predicted of the middle ``coverage`` of held-out rows, the
    error bar printed with a prediction (the time lies in [predicted * low, predicted * high]
    for that share of kernels the fit never saw)."""
    ratios = np.array([x["measured_us"] / x["model_us"] for x in lines])
    tail = (1 - coverage) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return [round(float(low), 4), round(float(high), 4)]
