"""Validated description of one RoPE call, shared by every launcher.

``RopeProblem`` holds only plain numbers and small host arrays, so building one checks all the
user's arguments before a byte moves to the GPU or a kernel launches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import reference
from .arrays import ArrayInfo
from .errors import RopeInputError  # noqa: F401 (kernels raise it through this module)
from .validate import check_float, check_int, fail

# CUDA's per-block thread limit on every GPU since compute capability 2.0.
MAX_THREADS_PER_BLOCK = 1024
WARP = 32

# Features a variant may support; a launcher lists the ones it implements.
HEADS = "heads"  # [tokens, heads, head_dim] with more than one head
PARTIAL = "partial"  # rotary_dim < head_dim
NEOX = "neox"  # half-split pairs (interleave=False)
INVERSE = "inverse"  # rotate by -angle
SCALED = "scaled"  # frequencies other than base ** (-2i/d), or an attention factor != 1


@dataclass(frozen=True)
class RopeProblem:
    tokens: int
    heads: int
    head_dim: int
    rotary_dim: int
    interleave: bool = True
    inverse: bool = False
    base: float = reference.DEFAULT_BASE
    # float64 inverse frequencies actually used (after any scaling), [rotary_dim // 2]
    freqs: np.ndarray = field(default=None, repr=False, compare=False)
    attention_factor: float = 1.0
    scaling: object = None  # the scaling scheme object, or None

    def __post_init__(self):
        if self.freqs is None:
            object.__setattr__(self, "freqs", reference.inv_freq(self.rotary_dim, self.base))

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


def check_x(info: ArrayInfo, dtypes=(np.float32,)) -> tuple[int, int, int]:
    """Return (tokens, heads, head_dim) of a valid ``x`` or raise."""
    if info.dtype not in [np.dtype(d) for d in dtypes]:
        fail(f"x must have dtype {' or '.join(np.dtype(d).name for d in dtypes)}, got {info.dtype}")
    if len(info.shape) == 2:
        tokens, head_dim = info.shape
        heads = 1
    elif len(info.shape) == 3:
        tokens, heads, head_dim = info.shape
    else:
        fail(f"x must be [tokens, hidden] or [tokens, heads, head_dim], got ndim {len(info.shape)} "
              f"(shape {info.shape})")
    if tokens == 0 or heads == 0 or head_dim == 0:
        fail(f"x must not be empty, got shape {info.shape}")
    if head_dim % 2:
        fail(f"the last dimension of x (head_dim or hidden) must be even to form pairs, got {head_dim}")
    if not info.c_contiguous:
        fail("x must be C-contiguous (the kernels index it as one flat row-major buffer); "
              "pass np.ascontiguousarray(x) or x.contiguous()")
    return tokens, heads, head_dim


def check_rotary_dim(rotary_dim, head_dim: int) -> int:
    if rotary_dim is None:
        return head_dim
    rotary_dim = check_int("rotary_dim", rotary_dim)
    if rotary_dim <= 0 or rotary_dim % 2:
        fail(f"rotary_dim must be a positive even number, got {rotary_dim}")
    if rotary_dim > head_dim:
        fail(f"rotary_dim ({rotary_dim}) must not exceed head_dim ({head_dim})")
    return rotary_dim


def check_base(base) -> float:
    return check_float("base", base, above=1.0)


def check_out(out_info: ArrayInfo, x_info: ArrayInfo) -> None:
    if out_info.shape != x_info.shape:
        fail(f"out must have the shape of x {x_info.shape}, got {out_info.shape}")
    if out_info.dtype != x_info.dtype:
        fail(f"out must have the dtype of x ({x_info.dtype}), got {out_info.dtype}")
    if not out_info.c_contiguous:
        fail("out must be C-contiguous")
    if out_info.on_device != x_info.on_device:
        fail("x and out must both be host (NumPy) arrays or both be device arrays")


def check_positions_info(info: ArrayInfo, tokens: int) -> None:
    if info.shape != (tokens,):
        fail(f"positions must have shape ({tokens},) (one per token), got {info.shape}")
    if info.dtype.kind not in "iu":
        fail(f"positions must be integers (int32), got {info.dtype}")
    if info.on_device and info.dtype != np.int32:
        fail(f"device positions must be int32, got {info.dtype}")


def check_position_values(values: np.ndarray, limit: int | None = None, reason: str = "") -> None:
    """Host-side value checks: non-negative, fits int32, below ``limit`` if one is given.

    ``reason`` says why the limit exists (it is the plan's ``limit_reason``).
    """
    if values.size == 0:
        return
    lo, hi = int(values.min()), int(values.max())
    if lo < 0:
        fail(f"positions must be >= 0, got a minimum of {lo}")
    if hi > np.iinfo(np.int32).max:
        fail(f"positions must fit in int32, got a maximum of {hi}")
    if limit is not None and hi >= limit:
        fail(f"position {hi} is out of range: {reason or f'positions must be below {limit}'}")


WORDING = {
    HEADS: "more than one head per token",
    PARTIAL: "partial rotary (rotary_dim < head_dim)",
    NEOX: "the half-split NeoX layout (interleave=False)",
    INVERSE: "the inverse rotation",
    SCALED: "frequency scaling or an attention factor",
}


def require_features(variant: str, supported: frozenset, problem: RopeProblem, alternatives) -> None:
    """Refuse a call that needs a feature ``variant`` lacks; ``alternatives(features)`` lists the
    variants that have them (for the message)."""
    missing = problem.features() - set(supported)
    if missing:
        alt = alternatives(problem.features())
        hint = f"; variants that do: {', '.join(alt)}" if alt else ""
        fail(f"variant '{variant}' does not support "
             f"{', '.join(WORDING[m] for m in sorted(missing))}{hint}")


def check_threads(threads) -> int:
    threads = check_int("threads_per_block", threads)
    if not 1 <= threads <= MAX_THREADS_PER_BLOCK:
        fail(f"threads_per_block must be in 1..{MAX_THREADS_PER_BLOCK} (CUDA's per-block limit), "
             f"got {threads}")
    return threads


def census_problem(features=frozenset()) -> RopeProblem:
    """A representative problem for the PTX census: only its argument types matter, so it uses
    every feature the variant supports (multi-head, so shifts and divisions are both compiled)."""
    heads = 2 if HEADS in features else 1
    return RopeProblem(tokens=4096, heads=heads, head_dim=128, rotary_dim=128)


@dataclass(frozen=True)
class FusedProblem:
    """One validated ``fused_qknorm_rope`` call: plain numbers and the float64 frequencies."""

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

    def inv_freq_f32(self) -> np.ndarray:
        """The kernel's frequency table: the float64 frequencies rounded once to float32."""
        return self.inv_freq.astype(np.float32)
