"""Numbers of the training path, as a trainer calls it (``data/training_speed/``): host time per
call of each ``ropelab.torch_ops`` op against its direct call, and a loop of forward +
``.backward()`` through autograd against ``torch.compile`` of the same math."""

from __future__ import annotations

from .numbers_core import Rendered, newest, number, pct_span, span


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


@number("training.loop_us")
def training_loop_us():
    path, rows = _rows("training")
    return Rendered(span(list(_loop(rows, "ropelab").values()), lambda v: f"{v:.0f}",
                         unit=" us"), path)


@number("training.compile_ratio")
def training_compile_ratio():
    path, rows = _rows("training")
    ours, theirs = _loop(rows, "ropelab"), _loop(rows, "torch.compile")
    ratios = [theirs[k] / ours[k] for k in ours if k in theirs]
    if not ratios:
        raise LookupError(f"{path} has no torch.compile rows beside ropelab's")
    return Rendered(span(ratios, lambda v: f"{v:.1f}", unit=" times"), path)


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
