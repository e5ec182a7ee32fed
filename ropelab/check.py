"""``python -m ropelab check``: run every kernel on the current target against the reference."""

from __future__ import annotations


import numpy as np

from . import bf16, kernels, reference, scaling
from .kernels import fused_qknorm_rope as fused_kernel
from .ops import fused
from .ops.rope import rope
from .scaling import Llama3, YaRN, resolve
from .shapes import PRODUCTION_SHAPES
from .target import SIMULATED, TARGET
from .tolerance import Mode, fused_atol, max_angle, mode_for, rope_atol, rows_atol
from .verdict import CheckRow  # noqa: F401 (the row type run_checks returns)

# The simulator runs each CUDA thread as a Python thread (~10^4 per second): keep it small.
# The simulator: one token, a few, and one row past 2048 floats (block2d loops: more than 1024
# pairs); a single wide token is enough there, each simulated thread being a Python thread.
SIM_SHAPES = [(1, 6), (7, 130), (1, 2056)]
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
    cases += [dict(variant_options=dict(o)) for o in module.check_cases]
    # 16-bit builds (pair_sincos, pack4): the seed form, and NeoX where the variant has it.
    for storage in sorted(set(getattr(module, "storages", ())) - {"float32"}):
        cases.append(dict(storage=storage))
        if "neox" in feats:
            cases.append(dict(storage=storage, interleave=False))
    return cases


def max_position_for(mode: Mode) -> int:
    """Positions a check draws from: below 4096, or the whole range reduce_angle claims.

    4096 fits the cos/sin cache the cache option builds (``freq_table.CHECK_OPTIONS``);
    reduce_angle's accuracy is position independent up to 2**24, so its check says so there.
    """
    return Mode.REDUCED.max_position + 1 if mode is Mode.REDUCED else 4096


def run_checks(variants=None, shapes=None, seed: int = 0, fastmath: bool = True,
               on_row=None) -> list[CheckRow]:
    """Every registered variant (or ``variants``) against the float64 reference.

    ``on_row(row)`` is called as each row finishes (the CLI prints it then: a simulator run takes
    tens of seconds); the rows are also returned together.
    """
    shapes = shapes or (SIM_SHAPES if SIMULATED else GPU_SHAPES)
    rng = np.random.default_rng(seed)
    rows = []
    names = list(variants or kernels.VARIANTS)
    if variants is None or any(n in kernels.FUSED for n in names):
        rows += run_fused_checks(seed=seed, fastmath=fastmath, on_row=on_row)
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
                storage = opts.pop("storage", "float32")
                variant_options = opts.pop("variant_options", {})
                scaling = opts.pop("scaling", None)
                shape = (tokens, hidden) if heads == 1 else (tokens, heads, hidden)
                mode = mode_for(fastmath=fastmath, **variant_options)
                x = rng.standard_normal(shape).astype(np.float32)
                pos = rng.integers(0, max_position_for(mode), tokens).astype(np.int32)
                stored = encode(x, storage)
                x = decode(stored, storage)  # the values the kernel sees, exactly
                got = decode(rope(stored, variant=name, positions=pos, fastmath=fastmath,
                                  scaling=scaling, **opts, **variant_options), storage)
                rd = opts.get("rotary_dim", hidden)
                freqs, att = resolve(scaling, rotary_dim=rd, base=reference.DEFAULT_BASE)
                want = reference.rope(x, pos, freqs=freqs, attention_factor=att, **opts)
                # Each accuracy mode is judged by its own error model (ropelab.tolerance).
                tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), mode=mode,
                                attention_factor=att, max_position=int(np.abs(pos).max()))
                if storage != "float32":  # plus half an ulp of the stored output
                    tol = rows_atol(float(np.abs(x).max()), max_angle(pos, freqs), storage,
                                    fastmath=fastmath, attention_factor=att)
                shown = dict(opts, **variant_options)
                if heads > 1:
                    shown["heads"] = heads
                if storage != "float32":
                    shown["storage"] = storage
                if scaling is not None:
                    shown["scaling"] = type(scaling).__name__.lower()
                label = ",".join(f"{k}={v}" for k, v in shown.items()) or "-"
                rows.append(CheckRow(name, TARGET, (tokens, hidden), label,
                                     float(np.abs(got - want).max()), tol, storage))
                if on_row is not None:
                    on_row(rows[-1])
    return rows


# The fused QK-RMSNorm + RoPE kernel: a few warps per case on the simulator, SGLang's production
# shapes on a GPU (see check_case and check_production below).
FUSED_SIM_CASES = [
    dict(tokens=3, heads=(2, 1, 1), head_dim=64, rotary_dim=64, storage="bfloat16", interleave=True),
    dict(tokens=2, heads=(1, 1, 1), head_dim=128, rotary_dim=64, storage="float16", interleave=False,
         yarn=dict(factor=4.0, low=2.0, high=9.0, attention_factor=1.2)),
    dict(tokens=2, heads=(1, 2, 1), head_dim=128, rotary_dim=128, storage="float32", interleave=True),
]


def run_fused_checks(seed: int = 0, fastmath: bool = True, on_row=None) -> list[CheckRow]:
    rng = np.random.default_rng(seed)
    if SIMULATED:  # one case at a time, so each row is reported as it finishes
        results = (check_case(rng, fastmath=fastmath, **case) for case in FUSED_SIM_CASES)
    else:
        # Two production shapes (full and partial rotary) in every storage and layout: the
        # float64 judge runs on the host, and the other shapes differ only in head counts.
        shapes = [PRODUCTION_SHAPES[n] for n in ("flux_1024", "qwen_image_partial")]
        results = check_production(shapes, storages=("bfloat16", "float16", "float32"),
                                         seed=seed, fastmath=fastmath)
    rows = []
    for r in results:
        err = r.max_error if r.v_unchanged else float("inf")  # V bytes changed: fail loudly
        rows.append(CheckRow("fused_qknorm_rope", TARGET, r.shape,
                             f"{r.storage},{r.options}", err, r.tolerance))
        if on_row is not None:
            on_row(rows[-1])
    return rows


def format_header() -> str:
    head = f"{'variant':<12} {'target':<10} {'shape':<12} {'options':<18} {'max |err|':>10} {'tolerance':>10}  result"
    return head + "\n" + "-" * len(head)


def format_row(r: CheckRow) -> str:
    shape = "x".join(map(str, r.shape))
    return (f"{r.variant:<12} {r.target:<10} {shape:<12} {r.options:<18} "
            f"{r.max_error:>10.2e} {r.tolerance:>10.2e}  {'PASS' if r.passed else 'FAIL'}")


def format_summary(rows: list[CheckRow]) -> str:
    failed = sum(not r.passed for r in rows)
    return f"{len(rows) - failed} passed, {failed} failed"


def format_rows(rows: list[CheckRow]) -> str:
    """The whole table at once (the CLI prints the same lines one by one as rows finish)."""
    return "\n".join([format_header(), *map(format_row, rows), format_summary(rows)])


# ---- the fused kernel: inputs, one case against the judge, the production shapes -----------

def encode(x: np.ndarray, storage: str) -> np.ndarray:
    """float32 values -> the storage dtype (bfloat16 as its bits, rounded to nearest even)."""
    if storage == "bfloat16":
        return bf16.from_float32(x)
    return x.astype(storage)


def decode(values: np.ndarray, storage: str) -> np.ndarray:
    """Stored values -> float64 (bfloat16 bits decoded exactly)."""
    if storage == "bfloat16":
        return bf16.to_float32(values).astype(np.float64)
    return np.asarray(values, dtype=np.float64)


def random_inputs(rng: np.random.Generator, tokens: int, heads: tuple[int, int, int], head_dim: int,
                  storage: str, max_position: int = 4096):
    """Host inputs in the storage dtype: (qkv, q_weight, k_weight, positions int32).

    qkv is N(0, 1) with a per-head offset of scale (so heads differ in RMS); weights are near 1.
    """
    hq, hk, hv = heads
    width = (hq + hk + hv) * head_dim
    scale = np.repeat(rng.uniform(0.25, 4.0, hq + hk + hv), head_dim)
    raw = rng.standard_normal((tokens, width)) * scale
    wq = rng.uniform(0.5, 1.5, head_dim)
    wk = rng.uniform(0.5, 1.5, head_dim)
    pos = rng.integers(0, max_position, tokens).astype(np.int32)
    if storage == "bfloat16":
        enc = lambda a: bf16.from_float32(a.astype(np.float32))  # noqa: E731
    else:
        enc = lambda a: a.astype(fused_kernel.STORAGES[storage])  # noqa: E731
    return enc(raw), enc(wq), enc(wk), pos


def check_case(rng, *, tokens, heads, head_dim, rotary_dim, storage, interleave=True, yarn=None,
               fastmath=True, name="", eps=1e-6, base=10000.0, max_position=4096,
               warps_per_block=None, heads_per_warp=None, cache=False) -> CheckRow:
    """Run the kernel once on random inputs and compare with the float64 reference.

    Positions are drawn from ``[0, max_position)``; ``cache=True`` runs the cos/sin cache path
    with ``max_positions=max_position``."""
    qkv, wq, wk, pos = random_inputs(rng, tokens, heads, head_dim, storage, max_position)
    hq, hk, hv = heads
    kw = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=head_dim, eps=eps,
              base=base, rotary_dim=rotary_dim, interleave=interleave)
    y = scaling.as_fused_yarn(yarn)
    rd = rotary_dim or head_dim
    freqs, att = scaling.resolve(y, rotary_dim=rd, base=base)
    want = reference.fused_qknorm_rope(decode(qkv, storage), q_weight=decode(wq, storage),
                                       k_weight=decode(wk, storage), positions=pos, freqs=freqs,
                                       attention_factor=att, **kw)
    before = qkv.copy()
    cached = dict(cache=True, max_positions=max_position) if cache else {}
    got = fused.fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, yarn=y,
                            fastmath=fastmath, warps_per_block=warps_per_block,
                            heads_per_warp=heads_per_warp, **cached, **kw)
    qk = (hq + hk) * head_dim
    v_same = bool(np.array_equal(before[:, qk:].view(np.uint8), got[:, qk:].view(np.uint8)))
    normed = reference.fused_qknorm_rope(decode(before, storage), q_weight=decode(wq, storage),
                                         k_weight=decode(wk, storage), positions=np.zeros_like(pos),
                                         **kw)
    angle = float(np.abs(pos).max()) * float(freqs.max())
    tol = fused_atol(float(np.abs(normed[:, :qk]).max()), float(np.abs(want[:, :qk]).max()), angle,
                    storage, fastmath=fastmath, attention_factor=att, cache=cache)
    err = float(np.abs(decode(got, storage)[:, :qk] - want[:, :qk]).max())
    opts = ([("gptj" if interleave else "neox"), f"rot={rd}"] + ([f"yarn={y.factor:g}"] if y else [])
            + ([f"cache={max_position}"] if cache else []))
    return CheckRow("fused_qknorm_rope", TARGET, (name or f"{tokens}x({hq}+{hk}+{hv})x{head_dim}",),
                    ",".join(opts), err, tol, storage, v_same)


def check_production(shapes=None, storages=("bfloat16", "float16", "float32"), layouts=(True, False),
                     seed: int = 0, fastmath: bool = True) -> list[CheckRow]:
    """The fused kernel against the reference at SGLang's production shapes (needs a GPU).

    Under the simulator this would run millions of Python threads; it refuses instead.
    """
    if SIMULATED:
        raise RuntimeError("check_production needs a GPU: the simulator would take hours")
    rng = np.random.default_rng(seed)
    rows = []
    for shape in (shapes or PRODUCTION_SHAPES.values()):
        for storage in storages:
            for inter in layouts:
                rows.append(check_case(rng, tokens=shape.tokens,
                                       heads=(shape.heads_q, shape.heads_k, shape.heads_v),
                                       head_dim=shape.head_dim, rotary_dim=shape.rotary_dim,
                                       storage=storage, interleave=inter, fastmath=fastmath,
                                       name=shape.name))
    return rows
