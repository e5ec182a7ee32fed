"""Numbers of the training path, as a trainer calls it (``data/training_speed/``): host time per
call of each ``ropelab.torch_ops`` op against its direct call, and a loop of forward +
``.backward()`` through autograd against ``torch.compile`` of the same math."""

from __future__ import annotations

from .numbers_core import Rendered, newest, newest_on, number, pct, pct_span, span


def _rows(part: str) -> tuple[str, list[dict]]:
    path, rec = newest("training_speed")
    rows = [r for r in rec["rows"] if r["part"] == part]
    if not rows:
        raise LookupError(f"{path} has no {part} rows")
    return path, rows


def _host_ratio(op: str) -> Rendered:
    path, rows = _rows("host")
    ratios = [r["ratio"] for r in rows if r["op"] == op and r["ratio"] is not None]
    if not ratios:
        raise LookupError(f"{path} has no host ratio for {op}")
    return Rendered(f"{ratios[0]:.2f} times", path)


@number("training.host_rope_ratio")
def training_host_rope_ratio():
    return _host_ratio("rope")


@number("training.host_fused_ratio")
def training_host_fused_ratio():
    return _host_ratio("fused_qknorm_rope")


@number("training.host_backward_ratio")
def training_host_backward_ratio():
    return _host_ratio("fused_qknorm_rope_backward")


def _loop(rows, impl: str) -> dict:
    return {(r["shape"], r["layout"]): r["wall_us_per_iter"] for r in rows if r["impl"] == impl}


def _loop_us(impl: str) -> Rendered:
    path, rows = _rows("training")
    walls = list(_loop(rows, impl).values())
    if not walls:
        raise LookupError(f"{path} has no {impl} loop rows")
    return Rendered(span(walls, lambda v: f"{v:.0f}", unit=" us"), path)


@number("training.loop_us")
def training_loop_us():
    return _loop_us("ropelab")


def _loop_ratio(impl: str, against: str) -> Rendered:
    """``impl``'s loop time over ``against``'s, shape by shape, as a span of ratios."""
    path, rows = _rows("training")
    top, bottom = _loop(rows, impl), _loop(rows, against)
    ratios = [top[k] / bottom[k] for k in top if k in bottom]
    if not ratios:
        raise LookupError(f"{path} has no {impl} rows beside {against}'s")
    return Rendered(span(ratios, lambda v: f"{v:.1f}", unit=" times"), path)


@number("training.compile_ratio")
def training_compile_ratio():
    return _loop_ratio("torch.compile", "ropelab")


def _forward(impl: str) -> Rendered:
    path, rows = _rows("forward")
    shares = [r["of_copy"] for r in rows if r["impl"] == impl and r.get("of_copy")]
    if not shares:
        raise LookupError(f"{path} has no forward rows of {impl}")
    return Rendered(pct_span(shares), path)


@number("training.one_pass_pct")
def training_one_pass_pct():
    """The functional forward (read qkv, write the result) as a share of a copy of its bytes."""
    return _forward("one_pass")


@number("training.two_pass_pct")
def training_two_pass_pct():
    """The former functional forward, a clone then the in-place kernel, the same way."""
    return _forward("clone_in_place")


def _copy_us_per_byte(path, rec_rows) -> dict:
    """Per shape, us per byte of ``out.copy_(qkv)`` in the same run (the forward rows' copy)."""
    rates = {}
    for r in rec_rows:
        if r["part"] == "forward" and r["impl"] == "torch_copy" and r.get("median_us"):
            rates[r["shape"]] = r["median_us"] / r["bytes"]
    if not rates:
        raise LookupError(f"{path} has no torch_copy rows to put a roof under the loop")
    return rates


def _roof_shares(impl: str) -> tuple[str, list[float]]:
    """The loop rows of ``impl`` as shares of the copy roof of the bytes a step must move
    (``bytes`` of the row at the copy's rate in the same run)."""
    path, rec = newest("training_speed")
    rates = _copy_us_per_byte(path, rec["rows"])
    shares = [rates[r["shape"]] * r["bytes"] / r["wall_us_per_iter"] for r in rec["rows"]
              if r["part"] == "training" and r["impl"] == impl and r.get("bytes")
              and r.get("wall_us_per_iter") and r["shape"] in rates]
    if not shares:
        raise LookupError(f"{path} has no {impl} loop rows with bytes")
    return path, shares


@number("training.roof_pct")
def training_roof_pct():
    """The trainer's loop as a share of the copy roof of a step's bytes."""
    path, shares = _roof_shares("ropelab")
    return Rendered(pct_span(shares), path)


@number("training.graphed_roof_pct")
def training_graphed_roof_pct():
    """The same loop with the op captured as CUDA graphs, the same way."""
    path, shares = _roof_shares("ropelab_graphed")
    return Rendered(pct_span(shares), path)


@number("training.liger_ratio")
def training_liger_ratio():
    """Liger-Kernel's RMSNorm + RoPE chain in the same loop (NeoX rows: the only layout it
    rotates) against ropelab's, shape by shape."""
    return _loop_ratio("liger", "ropelab")


@number("training.floor_us")
def training_floor_us():
    return _loop_us("empty_function")


@number("training.graphed_us")
def training_graphed_us():
    return _loop_us("ropelab_graphed")


@number("training.over_floor")
def training_over_floor():
    """The trainer's loop against the no-work Function's, shape by shape."""
    return _loop_ratio("ropelab", "empty_function")


@number("training.direct_vs_cupy")
def training_direct_vs_cupy():
    """The single-launch direct public calls' host time against a no-op CuPy RawKernel launch with six
    arguments, in the same run (the cost of any launch from Python on that machine)."""
    path, rows = _rows("host")
    cupy = [r["direct_host_us"] for r in rows if r["op"].startswith("reference: cupy")]
    # One launch each (the backward makes two and its outputs: not a like-for-like pair).
    ours = [r["direct_host_us"] for r in rows
            if r["op"] in ("rope", "rope_qk", "fused_qknorm_rope")]
    if not cupy or not ours:
        raise LookupError(f"{path} has no CuPy reference row beside the direct calls")
    return Rendered(span([v / cupy[0] for v in ours], lambda v: f"{v:.1f}", unit=" times"), path)


@number("training.roof_us")
def training_roof_us():
    """The copy roof of a step's bytes, in us: what the GPU work of one step takes at best."""
    path, rec = newest("training_speed")
    rates = _copy_us_per_byte(path, rec["rows"])
    roofs = {r["shape"]: rates[r["shape"]] * r["bytes"] for r in rec["rows"]
             if r["part"] == "training" and r.get("bytes") and r["shape"] in rates}
    if not roofs:
        raise LookupError(f"{path} has no loop rows with bytes")
    return Rendered(span(list(roofs.values()), lambda v: f"{v:.0f}", unit=" us"), path)


# ---- the H100 run of 2026-12-07 (data/training_speed/h100/): the rope op's own training loop,
# which no H200 record has yet (the same run's bench rows are numbers_backward's)

def _rope_loop(impl: str) -> tuple[str, dict, float]:
    """The rope op's training loop row of ``impl`` in the newest H100 record, and the us of
    its bytes at the copy's rate in the same run."""
    path, rec = newest_on("training_speed", "h100")
    rows = [r for r in rec["rows"] if r["part"] == "rope_training"]
    copy = next((r for r in rows if r["impl"] == "torch_copy"), None)
    row = next((r for r in rows if r["impl"] == impl), None)
    if copy is None or row is None:
        raise LookupError(f"{path} has no rope_training {impl} and torch_copy rows")
    return path, row, copy["median_us"] / copy["bytes"] * row["bytes"]


@number("h100.rope_loop_roof_pct")
def h100_rope_loop_roof_pct():
    """``rt.rope`` + ``.backward()`` in a loop (wall time per iteration) as a share of the copy
    roof of the bytes a step moves (bf16 [32768, 32, 128], H100)."""
    path, row, roof_us = _rope_loop("ropelab")
    return Rendered(pct(roof_us / row["wall_us_per_iter"], 1), path)


@number("h100.rope_loop_vs_compile")
def h100_rope_loop_vs_compile():
    path, ours, _ = _rope_loop("ropelab")
    _, theirs, _ = _rope_loop("torch.compile")
    return Rendered(f"{theirs['wall_us_per_iter'] / ours['wall_us_per_iter']:.2f} times", path)
