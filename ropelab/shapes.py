"""Named problem sizes for notebooks and benchmarks, so every chapter measures the same things.

* ``PRODUCTION_SHAPES``: the fused QK-RMSNorm + RoPE shapes of SGLang's benchmark for
  ``fused_qknorm_rope`` (diffusion transformers at 1024x1024: 4096 image tokens), plus a
  partial-rotary variant of Qwen-Image.
* ``ROPE_SHAPES``: the seed's plain-RoPE sizes ``[tokens, hidden]`` (float32, interleaved), and
  one over a gigabyte moved, large enough that L2 (60 MB on an H200) and launch cost vanish.
"""

from __future__ import annotations

from dataclasses import dataclass


def rope_bytes(tokens: int, hidden: int, itemsize: int = 4, position_itemsize: int = 4) -> int:
    """The least traffic of plain RoPE on ``[tokens, hidden]``: x read, out written, positions
    read once.  The one byte count every GB/s figure of plain RoPE divides by."""
    return 2 * tokens * hidden * itemsize + tokens * position_itemsize


def qk_bytes(tokens: int, heads_q: int, heads_k: int, head_dim: int, itemsize: int) -> int:
    """The least traffic of fused QK-norm + RoPE: Q and K read and written once (V untouched;
    positions and norm weights are negligible beside them)."""
    return 2 * tokens * (heads_q + heads_k) * head_dim * itemsize


@dataclass(frozen=True)
class FusedShape:
    """One ``fused_qknorm_rope`` problem: ``qkv`` is ``[tokens, (heads_q+heads_k+heads_v)*head_dim]``."""

    name: str
    tokens: int
    heads_q: int
    heads_k: int
    heads_v: int
    head_dim: int
    rotary_dim: int

    @property
    def row(self) -> int:
        """Elements per token row of ``qkv``."""
        return (self.heads_q + self.heads_k + self.heads_v) * self.head_dim

    def qk_bytes(self, itemsize: int) -> int:
        """Bytes the kernel must move (:func:`qk_bytes`)."""
        return qk_bytes(self.tokens, self.heads_q, self.heads_k, self.head_dim, itemsize)


FLUX_1024 = FusedShape("flux_1024", 4096, 24, 24, 24, 128, 128)
QWEN_IMAGE_1024 = FusedShape("qwen_image_1024", 4096, 32, 32, 32, 128, 128)
QWEN_IMAGE_PARTIAL = FusedShape("qwen_image_partial", 4096, 32, 32, 32, 128, 64)
ZIMAGE_1024 = FusedShape("zimage_1024", 4096, 30, 30, 30, 128, 128)

PRODUCTION_SHAPES = {s.name: s for s in (FLUX_1024, QWEN_IMAGE_1024, QWEN_IMAGE_PARTIAL, ZIMAGE_1024)}


@dataclass(frozen=True)
class RopeShape:
    """One plain-RoPE problem: ``x`` is ``[tokens, hidden]`` float32 (one head, as the seed)."""

    name: str
    tokens: int
    hidden: int

    def bytes_moved(self, itemsize: int = 4) -> int:
        """Read once and written once, positions read once (:func:`rope_bytes`)."""
        return rope_bytes(self.tokens, self.hidden, itemsize)


SEED_4096x512 = RopeShape("seed_4096x512", 4096, 512)
SEED_4096x1024 = RopeShape("seed_4096x1024", 4096, 1024)
SEED_8192x512 = RopeShape("seed_8192x512", 8192, 512)
SEED_8192x1024 = RopeShape("seed_8192x1024", 8192, 1024)
LARGE_32768x4096 = RopeShape("large_32768x4096", 32768, 4096)  # 1.07 GB moved in float32

ROPE_SHAPES = {s.name: s for s in (SEED_4096x512, SEED_4096x1024, SEED_8192x512, SEED_8192x1024,
                                   LARGE_32768x4096)}
SEED_SHAPES = (SEED_4096x512, SEED_4096x1024, SEED_8192x512, SEED_8192x1024)  # the seed's table


def label(shape: RopeShape) -> str:
    """``"4096x512"``: how records and prose name a plain-RoPE shape."""
    return f"{shape.tokens}x{shape.hidden}"


SEED_LABELS = tuple(label(s) for s in SEED_SHAPES)
BIG_LABEL = label(LARGE_32768x4096)
