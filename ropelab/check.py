"""``python -m ropelab check``: run every kernel on the current target against the reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels, reference
from .api import rope
from .target import SIMULATED, TARGET
from .tolerance import max_angle, rope_atol

# The simulator runs each CUDA thread as a Python thread (~10^4 per second): keep it small.
SIM_SHAPES = [(1, 6), (7, 130), (3, 2048)]
GPU_SHAPES = [(1, 6), (257, 130), (4096, 2048), (4099, 6144)]


@dataclass
class CheckRow:
    variant: str
    target: str
    shape: tuple
    options: str
    max_error: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.max_error) and self.max_error <= self.tolerance)


def cases_for(module):
    """Option sets worth checking for a variant: the seed form plus every feature it supports."""
    cases = [dict()]
    feats = module.FEATURES
    if "neox" in feats:
        cases.append(dict(interleave=False))
    if "partial" in feats:
        cases.append(dict(rotary_dim="half"))
    if "inverse" in feats:
        cases.append(dict(inverse=True))
    return cases


def run_checks(variants=None, shapes=None, seed: int = 0, fastmath: bool = True) -> list[CheckRow]:
    shapes = shapes or (SIM_SHAPES if SIMULATED else GPU_SHAPES)
    rng = np.random.default_rng(seed)
    rows = []
    for name in variants or kernels.VARIANTS:
        module = kernels.get(name)
        for tokens, hidden in shapes:
            for opts in cases_for(module):
                opts = dict(opts)
                if opts.get("rotary_dim") == "half":
                    if hidden % 4:
                        continue
                    opts["rotary_dim"] = hidden // 2
                x = rng.standard_normal((tokens, hidden)).astype(np.float32)
                pos = rng.integers(0, 4096, tokens).astype(np.int32)
                got = rope(x, variant=name, positions=pos, fastmath=fastmath, **opts)
                want = reference.rope(x, pos, **opts)
                rd = opts.get("rotary_dim", hidden)
                tol = rope_atol(float(np.abs(x).max()), max_angle(pos, reference.inv_freq(rd)),
                                fastmath=fastmath)
                label = ",".join(f"{k}={v}" for k, v in opts.items()) or "-"
                rows.append(CheckRow(name, TARGET, (tokens, hidden), label,
                                     float(np.abs(got - want).max()), tol))
    return rows


def format_rows(rows: list[CheckRow]) -> str:
    head = f"{'variant':<12} {'target':<10} {'shape':<12} {'options':<18} {'max |err|':>10} {'tolerance':>10}  result"
    lines = [head, "-" * len(head)]
    for r in rows:
        shape = "x".join(map(str, r.shape))
        lines.append(f"{r.variant:<12} {r.target:<10} {shape:<12} {r.options:<18} "
                     f"{r.max_error:>10.2e} {r.tolerance:>10.2e}  {'PASS' if r.passed else 'FAIL'}")
    failed = sum(not r.passed for r in rows)
    lines.append(f"{len(rows) - failed} passed, {failed} failed")
    return "\n".join(lines)
