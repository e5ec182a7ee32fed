"""Precision by position of the fused QK-norm + RoPE kernel: the sin/cos path against the cache.

The fused kernel's default path forms ``float32(position) * inv_freq`` on the device and takes
its (fast-math) sine and cosine: the angle's rounding error grows with the position, about
``angle * 2**-23`` rad, so the output error does too.  ``cache=True`` reads float32 cos/sin
tables computed in float64 on the host: the only errors left are float32 roundings, the same at
every position.  :func:`position_error` measures both, bucketed by position as
:mod:`ropelab.measure.precision` does for plain RoPE, and :func:`record` saves them on a GPU as
``data/precision/precision_fused-<gpu>-<date>.json`` (kind ``precision_fused``).

Run on a GPU host::

    python -m ropelab.measure.fused_precision            # records up to position 131072
    python -m ropelab.measure.fused_precision --max-position 4096 --no-save   # print only

The simulator runs :func:`position_error` too (tests use it on tiny inputs), but its sin/cos are
double-precision library calls without fast-math: :func:`record` refuses to run there.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .. import reference, scaling
from ..ops import fused
from .. import check as ropelab_check
from . import records
from .precision import DEFAULT_MAX_POSITION, bucket_errors, position_buckets, sample_positions

KIND = "precision_fused"
# head_dim 128 with full rotary (the production shapes'), two Q and two K heads per token.
HEADS = (2, 2, 0)
HEAD_DIM = 128


def position_error(*, storage: str = "float32", cache: bool = True, interleave: bool = True,
                   fastmath: bool = True, yarn=None, max_position: int = DEFAULT_MAX_POSITION,
                   samples_per_bucket: int = 64, heads=HEADS, head_dim: int = HEAD_DIM,
                   seed: int = 0) -> list[dict]:
    """Max and mean absolute error of the Q and K outputs against the float64 reference, per
    power-of-two position bucket up to ``max_position`` (one token per sampled position).

    ``max_rel_err`` divides the bucket's max error by the bucket's max ``|reference output|``.
    With ``cache=True`` the table holds positions ``0 .. max_position``.
    """
    rng = np.random.default_rng(seed)
    buckets = position_buckets(max_position)
    pos = sample_positions(buckets, samples_per_bucket, rng)
    qkv, wq, wk, _ = ropelab_check.random_inputs(rng, len(pos), tuple(heads), head_dim, storage)
    hq, hk, hv = heads
    kw = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=head_dim,
              interleave=interleave, yarn=yarn)
    want = reference.fused_qknorm_rope(ropelab_check.decode(qkv, storage), q_weight=ropelab_check.decode(wq, storage),
                                       k_weight=ropelab_check.decode(wk, storage), positions=pos, **kw)
    opts = dict(cache=True, max_positions=max_position + 1) if cache else {}
    got = fused.fused_qknorm_rope(qkv.copy(), q_weight=wq, k_weight=wk, positions=pos,
                                  fastmath=fastmath, **opts, **kw)
    qk = (hq + hk) * head_dim
    err = np.abs(ropelab_check.decode(got, storage)[:, :qk] - want[:, :qk])
    ref = np.abs(want[:, :qk])
    rows = []
    for r in bucket_errors(pos, err, buckets):
        sel = (pos >= r["pos_lo"]) & (pos <= r["pos_hi"])
        ref_max = float(ref[sel].max())
        rows.append(dict(kernel="fused_qknorm_rope", path="cache" if cache else "sincos",
                         storage=storage, layout="gptj" if interleave else "neox",
                         yarn="-" if yarn is None else f"factor={scaling.as_fused_yarn(yarn).factor:g}",
                         fastmath=bool(fastmath), head_dim=head_dim, **r,
                         max_abs_ref=ref_max, max_rel_err=r["max_abs_err"] / ref_max))
    return rows


YARN = dict(factor=8.0, low=3.0, high=11.0)


def default_cases() -> list[dict]:
    """What :func:`record` measures: the cache and sin/cos paths in float32 storage (the method's
    own error), both layouts, fast-math on and off for sin/cos, YaRN once; bfloat16 once each
    (its storage rounding, ``2**-9`` relative, hides both)."""
    cases = []
    for inter in (True, False):
        cases.append(dict(storage="float32", cache=True, interleave=inter))
        for fm in (True, False):
            cases.append(dict(storage="float32", cache=False, interleave=inter, fastmath=fm))
    cases.append(dict(storage="float32", cache=True, yarn=YARN))
    cases += [dict(storage="bfloat16", cache=c) for c in (True, False)]
    return cases


def worst_by_case(rows) -> list[dict]:
    """Per case: the worst relative error over all positions and where it occurred."""
    out = {}
    for r in rows:
        key = (r["path"], r["storage"], r["layout"], r["yarn"], r["fastmath"])
        if key not in out or r["max_rel_err"] > out[key]["max_rel_err"]:
            out[key] = dict(path=key[0], storage=key[1], layout=key[2], yarn=key[3],
                            fastmath=key[4], max_rel_err=r["max_rel_err"], at_pos_hi=r["pos_hi"])
    return list(out.values())


def record(directory=None, *, max_position: int = DEFAULT_MAX_POSITION,
           samples_per_bucket: int = 64, save: bool = True) -> dict:
    """Measure :func:`default_cases` on this GPU; save the rows (unless ``save=False``).

    Refuses on the simulator (:class:`ropelab.measure.records.RecordError`) before measuring.  Returns
    ``{"rows", "worst", "path"}``.
    """
    meta = records.metadata()  # raises under the simulator
    rows = [r for case in default_cases()
            for r in position_error(max_position=max_position,
                                    samples_per_bucket=samples_per_bucket, **case)]
    out = {"rows": rows, "worst": worst_by_case(rows), "path": None}
    if save:
        where = directory if directory is not None else records.DATA_DIR / "precision"
        out["path"] = records.save(
            KIND, rows, meta=meta, directory=where,
            method=(f"ropelab.measure.fused_precision.position_error: qkv [tokens, ({HEADS[0]} Q + "
                    f"{HEADS[1]} K heads) x {HEAD_DIM}] N(0,1) with per-head scales, weights "
                    f"U(0.5, 1.5), one token per position, up to {samples_per_bucket} positions "
                    f"per power-of-two bucket up to {max_position} (both ends included), base "
                    f"10000, full rotary; through the public ropelab.fused_qknorm_rope; error = "
                    f"|kernel - float64 reference| over the Q and K outputs of a bucket, "
                    f"max_rel_err = max error / max |reference| in the bucket; cache rows use "
                    f"cache=True, max_positions={max_position + 1}; yarn {YARN}."))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ropelab.measure.fused_precision",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-position", type=int, default=DEFAULT_MAX_POSITION)
    parser.add_argument("--samples", type=int, default=64, help="positions per bucket")
    parser.add_argument("--out", default=None, help="directory (default data/precision)")
    parser.add_argument("--no-save", action="store_true", help="print, do not record")
    args = parser.parse_args(argv)
    try:
        out = record(args.out, max_position=args.max_position, samples_per_bucket=args.samples,
                     save=not args.no_save)
    except records.RecordError as exc:
        print(f"ropelab.measure.fused_precision: {exc}", file=sys.stderr)
        return 1
    for w in out["worst"]:
        print(f"{w['path']:<7} {w['storage']:<9} {w['layout']:<5} yarn {w['yarn']:<10} "
              f"fastmath {str(w['fastmath']):<5} worst relative error {w['max_rel_err']:.3g} "
              f"(bucket ending at {w['at_pos_hi']})")
    if out["path"]:
        print(f"saved {out['path']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
