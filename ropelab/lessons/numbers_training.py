"""Numbers of the training path, as a trainer calls it (``data/training/``): host time per call
of each ``ropelab.torch_ops`` op against its direct call, and a loop of forward +
``.backward()`` through autograd against ``torch.compile`` of the same math."""

from __future__ import annotations

import json

from .. import resources
from .numbers_core import ROOT, Rendered, number, span

FOLDER = "training"


def newest_training() -> tuple[str, dict]:
    """The newest ``training_speed-*.json`` record (by its ``meta.date``) and its path."""
    folder = resources.data_dir() / FOLDER
    found = [(p, json.loads(p.read_text())) for p in folder.glob("training_speed-*.json")]
    if not found:
        raise LookupError(f"no training_speed record under {folder}")
    path, rec = max(found, key=lambda pr: pr[1]["meta"]["date"])
    try:
        shown = str(path.relative_to(ROOT))
    except ValueError:  # the wheel's copy of data/
        shown = f"data/{FOLDER}/{path.name}"
    return shown, rec


def _host_ratio(op: str) -> Rendered:
    path, rec = newest_training()
    rows = [r for r in rec["host"] if r["op"] == op and "ratio" in r]
    if not rows:
        raise LookupError(f"{path} has no host ratio for {op}")
    return Rendered(f"{rows[0]['ratio']:.2f} times", path)


@number("training.host_rope_ratio")
def training_host_rope_ratio():
    return _host_ratio("rope")


@number("training.host_fused_ratio")
def training_host_fused_ratio():
    return _host_ratio("fused_qknorm_rope")


@number("training.host_backward_ratio")
def training_host_backward_ratio():
    return _host_ratio("fused_qknorm_rope_backward")


def _loop(rec, impl: str) -> dict:
    return {(r["shape"], r["layout"]): r["wall_us_per_iter"] for r in rec["training"]
            if r["impl"] == impl}


@number("training.loop_us")
def training_loop_us():
    path, rec = newest_training()
    return Rendered(span(list(_loop(rec, "ropelab").values()), lambda v: f"{v:.0f}",
                         unit=" us"), path)


@number("training.compile_ratio")
def training_compile_ratio():
    path, rec = newest_training()
    ours, theirs = _loop(rec, "ropelab"), _loop(rec, "torch.compile")
    ratios = [theirs[k] / ours[k] for k in ours if k in theirs]
    if not ratios:
        raise LookupError(f"{path} has no torch.compile rows beside ropelab's")
    return Rendered(span(ratios, lambda v: f"{v:.1f}", unit=" times"), path)
