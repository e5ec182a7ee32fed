"""One way to judge a kernel's output against the float64 reference, shared by the kernel tests."""

import numpy as np

from ropelab import reference
from ropelab.scaling import resolve
from ropelab.tolerance import max_angle, rope_atol


def assert_matches_reference(x, got, pos, *, scaling=None, fastmath=True, **opts):
    """``got`` must be within :func:`ropelab.tolerance.rope_atol` of ``reference.rope``.

    ``opts`` are reference.rope's layout options (rotary_dim, interleave, inverse, base).
    """
    rd = opts.get("rotary_dim") or x.shape[-1]
    freqs, att = resolve(scaling, rotary_dim=rd, base=opts.get("base", reference.DEFAULT_BASE))
    want = reference.rope(x, pos, freqs=freqs, attention_factor=att, **opts)
    tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), fastmath=fastmath,
                    attention_factor=att)
    err = np.abs(np.asarray(got, np.float64) - want).max()
    assert err <= tol, f"max error {err:.3g} > tolerance {tol:.3g}"
