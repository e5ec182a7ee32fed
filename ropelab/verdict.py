"""One comparison of a kernel's output with the float64 judge: the one check row type.

``python -m ropelab check`` (:mod:`ropelab.check`), the notebooks' checks
(:func:`ropelab.grader.check`) and the fused kernel's checks (:func:`ropelab.check.check_case`)
all produce a :class:`CheckRow`, so a PASS means the same thing everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class CheckRow:
    variant: str  # the kernel (or the notebook's name for the case)
    target: str  # "gpu" or "simulator"
    shape: tuple  # the input's shape, or a named shape as a 1-tuple
    options: str  # what else the case set ("-" for none)
    max_error: float
    tolerance: float
    storage: str = "float32"
    v_unchanged: bool = True  # the fused kernel must not touch V

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.max_error) and self.max_error <= self.tolerance
                    and self.v_unchanged)

    @property
    def label(self) -> str:
        return "x".join(map(str, self.shape))

    @property
    def line(self) -> str:
        """Deterministic text for notebooks: no raw error (it depends on the machine and the
        target), only the budget and the verdict."""
        return (f"{self.variant:<10} shape {self.label:<12} max|error| <= {self.tolerance:.1e}: "
                f"{'PASS' if self.passed else 'FAIL'}")
