"""What the sweep times on: :class:`Shape` (plain RoPE on ``[tokens, hidden]``, or Q and K
heads of a packed ``qkv``) and the named shape groups of ``python -m ropelab bench --shapes``."""

from __future__ import annotations

from dataclasses import dataclass

from ...shapes import PRODUCTION_SHAPES, ROPE_SHAPES, qk_bytes, rope_bytes
from ...shapes import SEED_SHAPES as SEED_ROPE_SHAPES

# The shapes come from ropelab.shapes (the one registry): the seed's [tokens, hidden] sizes, one
# that moves more than 1 GB, and the production shapes of the fused kernel (SGLang PR 21654).
SEED_SHAPES = [(s.tokens, s.hidden) for s in SEED_ROPE_SHAPES]
BIG_SHAPES = [(s.tokens, s.hidden) for n, s in ROPE_SHAPES.items() if n.startswith("large_")]
OVERHEAD_SHAPE = (64, 512)  # host launch cost: a kernel far shorter than its launch
FUSED_DTYPES = ("bfloat16", "float16", "float32")
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}

# Plain RoPE the way a model calls it (group ``rows``, the entries of :mod:`.rope_rows`), each
# described as Q and K heads of a packed qkv so that the copy roof is the bytes of Q and K:
# (label, tokens, heads_q, heads_k, head_dim, dtype, heads_v).
ROWS_SHAPES = (
    ("rope16_32768x32x128", 32768, 32, 0, 128, "bfloat16", 0),  # the single-tensor target
    ("flux_1024_rows", 4096, 24, 24, 128, "bfloat16", 24),
    ("qwen3_8b_4096", 4096, 32, 8, 128, "bfloat16", 8),  # GQA
)
GROUPS = ("seed", "big", "production", "rows")


@dataclass(frozen=True)
class Shape:
    """One benchmark shape: plain RoPE on [tokens, hidden] or the fused kernel's Q and K."""

    label: str
    tokens: int
    hidden: int | None = None  # plain RoPE: one head of this width
    heads_q: int | None = None  # fused: [tokens, heads, head_dim] Q and K
    heads_k: int | None = None
    head_dim: int | None = None
    dtype: str = "float32"
    heads_v: int | None = None  # fused: V heads sit in qkv but are not touched
    rotary_dim: int | None = None

    @property
    def fused(self) -> bool:
        return self.heads_q is not None

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def bytes_moved(self) -> int:
        if self.fused:
            return qk_bytes(self.tokens, self.heads_q, self.heads_k, self.head_dim, self.itemsize)
        return rope_bytes(self.tokens, self.hidden, self.itemsize)

    @property
    def copy_bytes(self) -> int:
        """Bytes one copy must read (and write) to move what this shape moves."""
        if self.fused:
            return self.tokens * (self.heads_q + self.heads_k) * self.head_dim * self.itemsize
        return self.tokens * self.hidden * self.itemsize

    def fields(self) -> dict:
        return {"shape": self.label, "tokens": self.tokens, "hidden": self.hidden,
                "heads_q": self.heads_q, "heads_k": self.heads_k, "head_dim": self.head_dim,
                "dtype": self.dtype}


def plain_shape(tokens: int, hidden: int) -> Shape:
    return Shape(f"{tokens}x{hidden}", tokens, hidden=hidden)


def shapes_for(groups) -> list[Shape]:
    """Shapes of the named groups (:data:`GROUPS`; 'all' is seed, big and production)."""
    groups = {"seed", "big", "production"} if "all" in groups else set(groups)
    unknown = groups - set(GROUPS)
    if unknown:
        raise ValueError(f"unknown shape group(s) {sorted(unknown)}; use "
                         f"{', '.join(GROUPS)}, all")
    out = []
    if "seed" in groups:
        out += [plain_shape(t, h) for t, h in SEED_SHAPES]
    if "big" in groups:
        out += [plain_shape(t, h) for t, h in BIG_SHAPES]
    if "production" in groups:
        out += [Shape(p.name, p.tokens, heads_q=p.heads_q, heads_k=p.heads_k, head_dim=p.head_dim,
                      dtype=dt, heads_v=p.heads_v, rotary_dim=p.rotary_dim)
                for p in PRODUCTION_SHAPES.values() for dt in FUSED_DTYPES]
    if "rows" in groups:
        out += [Shape(label, t, heads_q=hq, heads_k=hk, head_dim=hd, dtype=dt, heads_v=hv)
                for label, t, hq, hk, hd, dt, hv in ROWS_SHAPES]
    return out
