"""The notebooks' PASS/FAIL line: a kernel's output against the float64 reference, under the
tolerance the test suite uses.  The line holds only deterministic facts (name, shape, tolerance,
verdict); the raw error is kept apart because it depends on the machine and the target.
"""

from __future__ import annotations

import numpy as np

from .. import reference
from ..target import TARGET
from ..tolerance import max_angle, rope_atol
from ..verdict import CheckRow


# The notebooks' check row is the package's one check row type.
Check = CheckRow


def check(name: str, x: np.ndarray, got: np.ndarray, positions=None, *, fastmath: bool = True,
          **reference_options) -> Check:
    """Compare ``got`` (a kernel's output for input ``x``) with :func:`ropelab.reference.rope`.

    The tolerance is :func:`ropelab.tolerance.rope_atol` for this input's magnitude and the
    largest angle it reaches, the same bound the test suite uses.
    """
    x = np.asarray(x)
    tokens = x.shape[0]
    pos = reference.default_positions(tokens) if positions is None else np.asarray(positions)
    want = reference.rope(x, pos, **reference_options)
    freqs = reference_options.get("freqs")
    if freqs is None:
        rotary = reference_options.get("rotary_dim") or x.shape[-1]
        freqs = reference.inv_freq(rotary, reference_options.get("base", reference.DEFAULT_BASE))
    tol = rope_atol(float(np.abs(x).max()), max_angle(pos, freqs), fastmath=fastmath,
                    attention_factor=reference_options.get("attention_factor", 1.0))
    err = float(np.abs(np.asarray(got, dtype=np.float64) - want).max())
    return CheckRow(name, TARGET, tuple(x.shape), "-", err, tol)
