"""The validated description of one call, as data: :class:`RopeProblem` and :class:`FusedProblem`.

A problem holds only plain numbers and the float64 inverse frequencies, so every launcher (the
public ops, the bench, the census, the notebooks' tracer) can build one, and a kernel's plan
depends on nothing else.  The checks that produce a valid problem live next to each op
(:mod:`ropelab.ops.rope`, :mod:`ropelab.ops.fused`) and, when shared, in :mod:`ropelab.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import reference
from .cuda_limits import MAX_THREADS_PER_BLOCK  # noqa: F401  (the ops import it from here)

# Features a variant may support; a launcher lists the ones it implements.
HEADS = "heads"  # [tokens, heads, head_dim] with more than one head
PARTIAL = "partial"  # rotary_dim < head_dim
NEOX = "neox"  # half-split pairs (interleave=False)
INVERSE = "inverse"  # rotate by -angle
SCALED = "scaled"  # frequencies other than base ** (-2i/d), or an attention factor != 1

# How a refusal names each feature.
WORDING = {
    HEADS: "more than one head per token",
    PARTIAL: "partial rotary (rotary_dim < head_dim)",
    NEOX: "the half-split NeoX layout (interleave=False)",
    INVERSE: "the inverse rotation",
    SCALED: "frequency scaling or an attention factor",
}


@dataclass(frozen=True)
class RopeProblem:
    """One plain-RoPE call: ``x`` is ``[tokens, heads, head_dim]``, the first ``rotary_dim`` dims
    of each head rotate."""

    tokens: int
    heads: int
    head_dim: int
    rotary_dim: int
    interleave: bool = True
    inverse: bool = False
    base: float = reference.DEFAULT_BASE
    # float64 inverse frequencies actually used (after any scaling), [rotary_dim // 2]
    inv_freq: np.ndarray = field(default=None, repr=False, compare=False)
    attention_factor: float = 1.0
    scaling: object = None  # the parsed scaling scheme object, or None for plain RoPE
    # Storage of x and out: "float32", "float16" or "bfloat16" (math is float32 in every case).
    storage: str = "float32"

    def __post_init__(self):
        if self.inv_freq is None:
            object.__setattr__(self, "inv_freq", reference.inv_freq(self.rotary_dim, self.base))

    @property
    def n_pairs(self) -> int:
        """Rotated pairs per head."""
        return self.rotary_dim // 2

    @property
    def row(self) -> int:
        """Elements per token (all heads)."""
        return self.heads * self.head_dim

    @property
    def elements(self) -> int:
        return self.tokens * self.row

    def features(self) -> set[str]:
        used = set()
        if self.heads > 1:
            used.add(HEADS)
        if self.rotary_dim < self.head_dim:
            used.add(PARTIAL)
        if not self.interleave:
            used.add(NEOX)
        if self.inverse:
            used.add(INVERSE)
        if self.scaling is not None or self.attention_factor != 1.0:
            used.add(SCALED)
        return used


@dataclass(frozen=True)
class FusedProblem:
    """One ``fused_qknorm_rope`` call: plain numbers and the float64 frequencies."""

    tokens: int
    heads_q: int
    heads_k: int
    heads_v: int
    head_dim: int
    rotary_dim: int
    interleave: bool
    storage: str  # "float32", "float16" or "bfloat16"
    eps: float
    base: float
    attention_factor: float = 1.0
    inv_freq: np.ndarray = field(default=None, repr=False, compare=False)  # float64 [rotary_dim/2]

    @property
    def row(self) -> int:
        return (self.heads_q + self.heads_k + self.heads_v) * self.head_dim
