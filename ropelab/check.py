"""``python -m ropelab check``: run every kernel on the current target against the reference."""

from __future__ import annotations


import numpy as np

from . import fused, kernels, reference
from .api import rope
from .scaling import Llama3, YaRN, resolve
from .shapes import PRODUCTION_SHAPES
from .target import SIMULATED, TARGET
from .tolerance import Mode, max_angle, mode_for, rope_atol
from .verdict import CheckRow  # noqa: F401 (the row type run_checks returns)

# The simulator runs each CUDA thread as a Python thread (~10^4 per second): keep it small.
SIM_SHAPES = [(1, 6), (7, 130), (3, 2048)]
GPU_SHAPES = [(1, 6), (257, 130), (1031, 2050)]  # uneven sizes; the float64 judge runs on the host


def cases_for(module):
    """Option sets worth checking for a variant: the seed form plus every feature it supports."""
    cases = [dict()]
    feats = module.features
    if "neox" in feats:
        cases.append(dict(interleave=False))
    if "partial" in feats:
        cases.append(dict(rotary_dim="half"))
    if "inverse" in feats:
        cases.append(dict(inverse=True))
    if "heads" in feats:
        cases.append(dict(heads=2))
    if "scaled" in feats:
        # A short original context puts pairs in all three Llama 3.1 bands; YaRN adds mscale.
        cases.append(dict(scaling=Llama3(8.0, 1.0, 4.0, 64)))
        cases.append(dict(scaling=YaRN(4.0, 64)))
    # Variant-specific keyword options (e.g. freq_table's cos/sin cache) a module asks to check.
    cases += [dict(variant_options=dict(o)) for o in module.check_options]
    return cases


def max_position_for(mode: Mode) -> int:
    """Positions a check draws from: below 4096, or the whole range reduce_angle claims.

    4096 fits the cos/sin cache the cache option builds (``freq_table.CHECK_OPTIONS``);
    reduce_angle's accuracy is position independent up to 2**24, so its check says so there.
    """
    return Mode.REDUCED.max_position + 1 if mode is Mode.REDUCED else 4096


def run_checks(variants=None, shapes=None, seed: int = 0, fastmath: bool = True) -> list[CheckRow]:
    shapes = shapes or (SIM_SHAPES if SIMULATED else GPU_SHAPES)
    rng = np.random.default_rng(seed)
    rows = []
    names = list(variants or kernels.VARIANTS)
    if variants is None or any(n in kernels.FUSED for n in names):
        rows += run_fused_checks(seed=seed, fastmath=fastmath)
    for name in [n for n in names if n not in kernels.FUSED]:
        module = kernels.get(name)
        for tokens, hidden in shapes:
            for opts in cases_for(module):
                opts = dict(opts)
                if opts.get("rotary_dim") == "half":
                    if hidden % 4:
                        continue
                    opts["rotary_dim"] = hidden // 2
                heads = opts.pop("heads", 1)
                variant_options = opts.pop("variant_options", {})
                scaling = opts.pop("scaling", None)
                shape = (tokens, hidden) if heads == 1 else (tokens, heads, hidden)
                mode = mode_for(fastmath=fastmath, **variant_options)
                x = rng.standard_normal(shape).astype(np.float32)
                pos = rng.integers(0, max_position_for(mode), tokens).astype(np.int32)
                got = rope(x, variant=name, positions=pos, fastmath=fastmath, scaling=scaling,
                           **opts, **variant_options)
                rd = opts.get("rotary_dim", hidden)
                freqs, att = resolve(scaling, rotary_dim=rd, base=reference.DEFAULT_BASE)
                want = reference.rope(x, pos, freqs=freqs, attention_factor=att, **opts)
                # Each accuracy mode is judged by its own error model (ropelab.tolerance).
                tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), mode=mode,
                                attention_factor=att, max_position=int(np.abs(pos).max()))
                shown = dict(opts, **variant_options)
                if heads > 1:
                    shown["heads"] = heads
                if scaling is not None:
                    shown["scaling"] = type(scaling).__name__.lower()
                label = ",".join(f"{k}={v}" for k, v in shown.items()) or "-"
                rows.append(CheckRow(name, TARGET, (tokens, hidden), label,
                                     float(np.abs(got - want).max()), tol))
    return rows


# The fused QK-RMSNorm + RoPE kernel: a few warps per case on the simulator, SGLang's production
# shapes on a GPU (see ropelab.fused.check_case and check_production).
FUSED_SIM_CASES = [
    dict(tokens=3, heads=(2, 1, 1), head_dim=64, rotary_dim=64, storage="bfloat16", interleave=True),
    dict(tokens=2, heads=(1, 1, 1), head_dim=128, rotary_dim=64, storage="float16", interleave=False,
         yarn=dict(factor=4.0, low=2.0, high=9.0, attention_factor=1.2)),
    dict(tokens=2, heads=(1, 2, 1), head_dim=128, rotary_dim=128, storage="float32", interleave=True),
]


def run_fused_checks(seed: int = 0, fastmath: bool = True) -> list[CheckRow]:
    rng = np.random.default_rng(seed)
    if SIMULATED:
        results = [fused.check_case(rng, fastmath=fastmath, **case) for case in FUSED_SIM_CASES]
    else:
        # Two production shapes (full and partial rotary) in every storage and layout: the
        # float64 judge runs on the host, and the other shapes differ only in head counts.
        shapes = [PRODUCTION_SHAPES[n] for n in ("flux_1024", "qwen_image_partial")]
        results = fused.check_production(shapes, storages=("bfloat16", "float16", "float32"),
                                         seed=seed, fastmath=fastmath)
    rows = []
    for r in results:
        err = r.max_error if r.v_unchanged else float("inf")  # V bytes changed: fail loudly
        rows.append(CheckRow("fused_qknorm_rope", TARGET, r.shape,
                             f"{r.storage},{r.options}", err, r.tolerance))
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
