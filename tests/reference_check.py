"""One way to judge a kernel's output against the float64 reference, shared by the kernel tests."""

import numpy as np

from ropelab import reference
from ropelab.scaling import resolve
from ropelab.tolerance import max_angle, mode_for, rope_atol


def error_and_tolerance(x, got, pos, *, scaling=None, fastmath=True, variant_options=None, **opts):
    """``(max |got - reference|, tolerance)`` under the error model of the call's mode.

    ``variant_options`` are the kernel options of the call (e.g. ``freq_table``'s ``cache`` or
    ``reduce_angle``), which pick the mode with ``fastmath``; ``opts`` are reference.rope's
    layout options (rotary_dim, interleave, inverse, base).
    """
    rd = opts.get("rotary_dim") or x.shape[-1]
    freqs, att = resolve(scaling, rotary_dim=rd, base=opts.get("base", reference.DEFAULT_BASE))
    want = reference.rope(x, pos, freqs=freqs, attention_factor=att, **opts)
    mode = mode_for(fastmath=fastmath, **(variant_options or {}))
    tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), mode=mode, attention_factor=att,
                    max_position=int(np.max(np.abs(pos))))
    return float(np.abs(np.asarray(got, np.float64) - want).max()), tol


def assert_matches_reference(x, got, pos, **kwargs):
    """``got`` must be within its mode's :func:`ropelab.tolerance.rope_atol` of ``reference.rope``."""
    err, tol = error_and_tolerance(x, got, pos, **kwargs)
    assert err <= tol, f"max error {err:.3g} > tolerance {tol:.3g}"
