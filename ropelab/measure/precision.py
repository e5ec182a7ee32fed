"""Precision by position: how far each kernel strays from the float64 reference as positions grow.

RoPE angles are ``position * inv_freq``; the fastest pair turns one radian per position, so a
131072-token context asks for angles above 1e5 rad.  Two float32 effects grow with the angle:

1. The angle itself.  ``float32(position) * inv_freq`` rounds ``inv_freq`` and the product:
   about ``angle * 2**-24`` to ``angle * 2**-23`` radians, i.e. several 1e-3 rad at 131072,
   *whatever* sin/cos do with it.  ``fastmath=False`` does not cure this.
2. sin/cos.  Fast-math ``sin.approx``/``cos.approx`` do not reduce large arguments accurately;
   the course's notes report about 1.7e-2 absolute error above 1e4 rad on an H200, which
   :func:`sincos_error` re-measures on isolated float32 angles (confirm or refute).

The accurate paths, both in ``ropelab.kernels.freq_table``:

* ``cache=True, max_positions=N``: cos/sin computed in float64 on the host, stored as float32:
  exact to float32 rounding at every position, for the price of an ``N x rotary_dim/2`` table.
* ``reduce_angle=True``: frequencies stored in turns as a float32 head + tail; an ``fma``
  recovers the product's rounding error and whole turns are dropped before ``2 pi`` is applied,
  so even fast-math sin/cos get an angle below ``2 pi`` that is right to a few 1e-7 rad.

Everything here runs on the simulator too (tests use it), but the simulator computes much of
the math in double and ignores fast-math, so its numbers describe Python, not a GPU.
:func:`record_precision` therefore refuses to run there; on a GPU it writes three records under
``data/`` (kinds ``precision``, ``freq_drift`` and ``sincos_error``) with GPU, versions and date.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from .. import kernels, reference
from . import records
from ..ops.rope import rope
from ..kernels.launch import launch
from ..kernels.plan import Plan, blocks_for
from ..kernels import pair_sincos
from ..scaling import Llama3, parse, resolve

DEFAULT_MAX_POSITION = 131072
# A maximum error (relative to max|x|) below this is invisible once activations are rounded to
# bf16 (half an ulp at 1.0 is 2**-8 = 3.9e-3) or fp16 (2**-11 = 4.9e-4 ... close to it).
LONG_CONTEXT_THRESHOLD = 1e-3


# --------------------------------------------------------------------------------------------
# Positions and buckets
# --------------------------------------------------------------------------------------------

def position_buckets(max_position: int = DEFAULT_MAX_POSITION) -> list[tuple[int, int]]:
    """Inclusive ``(lo, hi)`` position ranges: ``{0}``, ``{1}``, ``[2, 3]``, ``[4, 7]``, ... with the
    last range ending exactly at ``max_position``."""
    if max_position < 1:
        raise ValueError(f"max_position must be >= 1, got {max_position}")
    edges = [0, 1] + [1 << k for k in range(1, max_position.bit_length()) if (1 << k) <= max_position]
    edges = sorted(set(edges)) + [max_position + 1]
    return [(lo, hi - 1) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]


def sample_positions(buckets, per_bucket: int, rng) -> np.ndarray:
    """Up to ``per_bucket`` distinct positions per bucket, always including both ends."""
    out = []
    for lo, hi in buckets:
        span = hi - lo + 1
        if span <= per_bucket:
            out.append(np.arange(lo, hi + 1))
        else:
            inner = rng.choice(np.arange(lo + 1, hi), size=per_bucket - 2, replace=False)
            out.append(np.concatenate([[lo], np.sort(inner), [hi]]))
    return np.concatenate(out).astype(np.int32)


def bucket_errors(positions, err, buckets) -> list[dict]:
    """Aggregate a per-element absolute error ``err[token, ...]`` by position bucket.

    Returns one dict per non-empty bucket: ``pos_lo``, ``pos_hi``, ``samples`` (tokens),
    ``max_abs_err`` and ``mean_abs_err`` (over every element of those tokens).
    """
    positions = np.asarray(positions)
    err = np.asarray(err, dtype=np.float64).reshape(len(positions), -1)
    rows = []
    for lo, hi in buckets:
        sel = (positions >= lo) & (positions <= hi)
        if not sel.any():
            continue
        e = err[sel]
        rows.append(dict(pos_lo=int(lo), pos_hi=int(hi), samples=int(sel.sum()),
                         max_abs_err=float(e.max()), mean_abs_err=float(e.mean())))
    return rows


# --------------------------------------------------------------------------------------------
# End-to-end error of a variant
# --------------------------------------------------------------------------------------------

def _label(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(options.items())) or "-"


def position_error(variant: str, *, fastmath: bool = True, options: dict | None = None,
                   scaling=None, head_dim: int = 128, max_position: int = DEFAULT_MAX_POSITION,
                   samples_per_bucket: int = 128, base: float = reference.DEFAULT_BASE,
                   seed: int = 0) -> list[dict]:
    """Max and mean absolute error against the float64 reference, per position bucket.

    ``x`` is ``[tokens, head_dim]`` standard normal float32 (one head, interleaved, full rotary:
    the form every variant supports), one token per sampled position from
    :func:`position_buckets`; ``options`` are the variant's keyword options (for
    ``freq_table`` with ``cache=True`` the cache length defaults to ``max_position + 1``).
    Errors are absolute, on inputs with ``|x|`` up to about 4: divide by ``max_abs_x`` for a
    relative figure.
    """
    options = dict(options or {})
    if options.get("cache") and "max_positions" not in options:
        options["max_positions"] = max_position + 1
    rng = np.random.default_rng(seed)
    buckets = position_buckets(max_position)
    pos = sample_positions(buckets, samples_per_bucket, rng)
    x = rng.standard_normal((len(pos), head_dim)).astype(np.float32)
    got = rope(x, variant=variant, positions=pos, fastmath=fastmath, scaling=scaling, base=base,
               **options)
    freqs, att = resolve(scaling, rotary_dim=head_dim, base=base)
    want = reference.rope(x, pos, freqs=freqs, attention_factor=att)
    err = np.abs(got.astype(np.float64) - want)
    label = "-" if scaling is None else type(parse(scaling)).__name__.lower()
    rows = []
    for r in bucket_errors(pos, err, buckets):
        rows.append(dict(variant=variant, options=_label({k: v for k, v in options.items()
                                                          if k != "max_positions"}),
                         scaling=label, fastmath=bool(fastmath), head_dim=head_dim,
                         max_angle_rad=float(r["pos_hi"] * freqs.max()),
                         max_abs_x=float(np.abs(x).max()), **r))
    return rows


def default_cases() -> list[tuple[str, dict, object]]:
    """``(variant, options, scaling)`` for every registered variant that takes float32
    ``[tokens, hidden]`` input, plus the accurate freq_table modes and one Llama 3.1 scheme."""
    cases = []
    for name, module in kernels.VARIANTS.items():
        cases.append((name, {}, None))
        if name == "freq_table":
            cases += [(name, {"cache": True}, None), (name, {"reduce_angle": True}, None)]
        if "scaled" in module.features and name in ("freq_table", "pair_sincos"):
            cases.append((name, {}, Llama3(8.0, 1.0, 4.0, 8192)))
    return cases


def precision_by_position(cases=None, *, fastmath_modes=(True, False), **kwargs):
    """:func:`position_error` for every case and fastmath mode: ``(rows, skipped)``.

    A variant that cannot take this input (another dtype or layout) is listed in ``skipped``
    with the reason instead of failing the whole run.
    """
    rows, skipped = [], []
    for variant, options, scaling in cases if cases is not None else default_cases():
        for fm in fastmath_modes:
            try:
                rows += position_error(variant, fastmath=fm, options=options, scaling=scaling, **kwargs)
            except (TypeError, ValueError) as exc:
                skipped.append(f"{variant} {_label(options)} fastmath={fm}: {exc}")
    return rows, skipped


def long_context_verdict(rows, threshold: float = LONG_CONTEXT_THRESHOLD) -> list[dict]:
    """Per (variant, options, scaling, fastmath): the first position bucket whose max error,
    relative to ``max|x|``, exceeds ``threshold`` (None: accurate over the whole range), and
    the advice for the inaccurate ones."""
    out = {}
    for r in sorted(rows, key=lambda r: r["pos_lo"]):
        key = (r["variant"], r["options"], r["scaling"], r["fastmath"])
        v = out.setdefault(key, dict(variant=key[0], options=key[1], scaling=key[2],
                                     fastmath=key[3], worst_rel_err=0.0, fails_from=None))
        rel = r["max_abs_err"] / r["max_abs_x"]
        v["worst_rel_err"] = max(v["worst_rel_err"], rel)
        if rel > threshold and v["fails_from"] is None:
            v["fails_from"] = r["pos_lo"]
    for v in out.values():
        v["advice"] = ("accurate over the measured range" if v["fails_from"] is None else
                       f"error above {threshold:g} x max|x| from position {v['fails_from']}: use "
                       "variant='freq_table' with cache=True, max_positions=N (float64-built "
                       "cos/sin) or reduce_angle=True (fma angle reduction)")
    return list(out.values())


# --------------------------------------------------------------------------------------------
# sin/cos alone, and the frequency recurrence of pair_sincos
# --------------------------------------------------------------------------------------------

def sincos_kernel(angles, sin_out, cos_out):
    i = cuda.grid(1)
    if i < angles.size:
        sin_out[i] = math.sin(angles[i])
        cos_out[i] = math.cos(angles[i])


def sincos_error(*, max_exponent: int = 6, per_decade: int = 4096, fastmath: bool = True,
                 seed: int = 0) -> list[dict]:
    """Absolute error of the GPU's float32 sin/cos on exact float32 angles, per decade of angle.

    Angles are float32 values drawn log-uniformly in ``[10**k, 10**(k+1))`` for
    ``k = -1 .. max_exponent - 1``; the reference is ``np.sin``/``np.cos`` of the very same
    float32 values in float64, so only the function's error is measured, not angle rounding.
    """
    rng = np.random.default_rng(seed)
    decades = list(range(-1, max_exponent))
    angles = np.concatenate([10.0 ** rng.uniform(k, k + 1, per_decade) for k in decades]).astype(np.float32)
    d_a = cuda.to_device(angles)
    d_s = cuda.device_array_like(d_a)
    d_c = cuda.device_array_like(d_a)
    f32 = np.dtype(np.float32)
    launch(Plan(sincos_kernel, fastmath, blocks_for(angles.size, 256), 256, (f32, f32, f32)),
           (d_a, d_s, d_c))
    a64 = angles.astype(np.float64)
    es = np.abs(d_s.copy_to_host() - np.sin(a64))
    ec = np.abs(d_c.copy_to_host() - np.cos(a64))
    rows = []
    for n, k in enumerate(decades):
        sl = slice(n * per_decade, (n + 1) * per_decade)
        rows.append(dict(fastmath=bool(fastmath), angle_lo=10.0**k, angle_hi=10.0 ** (k + 1),
                         samples=per_decade, max_abs_err_sin=float(es[sl].max()),
                         max_abs_err_cos=float(ec[sl].max()), mean_abs_err_sin=float(es[sl].mean()),
                         mean_abs_err_cos=float(ec[sl].mean())))
    return rows


def freq_drift(*, rotary_dim: int = 128, base: float = reference.DEFAULT_BASE,
               chunks=(1, 2, 4, 8, 16, 32, 64), fastmath: bool = True,
               position: int = DEFAULT_MAX_POSITION, scaling=None) -> list[dict]:
    """pair_sincos's ratio recurrence against a ``pow`` per pair, both against float64.

    For each chunk length (pairs per thread; 1 = a pow for every pair) and pair, the rows give
    the float64 frequency, the relative error of the per-pair ``pow`` and of the recurrence,
    and what each becomes as an angle error at ``position`` (relative error x angle).  Runs
    ``pair_sincos.DRIFT_KERNEL``, i.e. the variant's own arithmetic.  Only the geometric part is
    measured; the YaRN / Llama 3.1 blend is applied after it, per pair, in both cases.
    """
    params = pair_sincos.freq_params(parse(scaling), rotary_dim, base)
    n_pairs = rotary_dim // 2
    exact = params.freq_scale * params.freq_base ** (params.exponent_step * np.arange(n_pairs))
    rows = []
    for chunk in chunks:
        d_pow = cuda.device_array(n_pairs, np.float32)
        d_rec = cuda.device_array(n_pairs, np.float32)
        # stride (threads per head), freq_scale, freq_base, exponent_step, ratio ** stride
        args = pair_sincos.drift_args(params, n_pairs, int(chunk))
        stride = int(args[0])
        f32 = np.dtype(np.float32)
        launch(Plan(pair_sincos.DRIFT_KERNEL, fastmath, blocks_for(n_pairs, 64), 64, (f32, f32),
                    scalars=(np.int64(n_pairs), *args)), (d_pow, d_rec))
        p, r = d_pow.copy_to_host().astype(np.float64), d_rec.copy_to_host().astype(np.float64)
        for j in range(n_pairs):
            rel_p = abs(p[j] - exact[j]) / exact[j]
            rel_r = abs(r[j] - exact[j]) / exact[j]
            rows.append(dict(fastmath=bool(fastmath), chunk=int(chunk), pair=j,
                             steps=j // stride, inv_freq=float(exact[j]),
                             rel_err_pow=float(rel_p), rel_err_recurrence=float(rel_r),
                             angle_err_pow_rad=float(rel_p * exact[j] * position),
                             angle_err_recurrence_rad=float(rel_r * exact[j] * position)))
    return rows


# --------------------------------------------------------------------------------------------
# Recording on a GPU
# --------------------------------------------------------------------------------------------

def record_precision(directory=None, *, max_position: int = DEFAULT_MAX_POSITION,
                     samples_per_bucket: int = 128) -> dict:
    """Measure everything above on the current GPU and save it under ``data/`` (or ``directory``).

    Refuses on the simulator (:class:`ropelab.measure.records.RecordError`) before measuring anything.
    Returns ``{"precision": path, "freq_drift": path, "sincos_error": path, "skipped": [...],
    "verdict": [...]}``.  ``directory`` None writes to ``data/<kind>/``; otherwise to
    ``directory/<kind>/``.
    """
    meta = records.metadata()  # raises under the simulator
    from pathlib import Path

    where = (lambda kind: None) if directory is None else (lambda kind: Path(directory) / kind)

    rows, skipped = precision_by_position(max_position=max_position,
                                          samples_per_bucket=samples_per_bucket)
    out = {"skipped": skipped, "verdict": long_context_verdict(rows)}
    out["precision"] = records.save(
        "precision", rows, meta=meta, directory=where("precision"),
        method=(f"ropelab.measure.precision.precision_by_position: x [tokens, 128] ~ N(0,1) float32, one "
                f"token per position, up to {samples_per_bucket} positions per power-of-two bucket "
                f"up to {max_position} (both ends included), base 10000, interleaved, full rotary; "
                f"error = |kernel - float64 reference| over all elements of a bucket; fastmath on "
                f"and off; freq_table cache uses max_positions = {max_position + 1}."))
    drift = [r for fm in (True, False) for r in freq_drift(fastmath=fm, position=max_position)]
    out["freq_drift"] = records.save(
        "freq_drift", drift, meta=meta, directory=where("freq_drift"),
        method=("ropelab.measure.precision.freq_drift: pair_sincos.DRIFT_KERNEL computes every pair's "
                "frequency (rotary_dim 128, base 10000) with one pow per pair and as the kernel "
                "does it: pow for the thread's first slot j % stride (stride = threads per head) "
                "then j // stride multiplications by ratio ** stride; relative errors vs float64; angle "
                f"errors at position {max_position}; fastmath on and off."))
    sc = [r for fm in (True, False) for r in sincos_error(fastmath=fm)]
    out["sincos_error"] = records.save(
        "sincos_error", sc, meta=meta, directory=where("sincos_error"),
        method=("ropelab.measure.precision.sincos_error: math.sin/math.cos in a kernel on 4096 float32 "
                "angles log-uniform per decade 0.1 .. 1e6 rad, vs numpy float64 sin/cos of the same "
                "float32 values; fastmath on (sin.approx/cos.approx) and off (libdevice)."))
    return out
