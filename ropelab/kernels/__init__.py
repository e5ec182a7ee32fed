"""The RoPE kernel variants, one module each, in course order, and their registry.

Each variant module holds its device code, a ``launch_config(problem, threads_per_block=None)``
(the launch geometry, which notebooks show) and a :class:`~ropelab.kernels._launch.Variant`
record ``VARIANT`` that declares its name, summary, features, options and how to build its
:class:`~ropelab.kernels._launch.Plan`.  Nothing launches a kernel except
:func:`ropelab.kernels._launch.launch` (and the :class:`~ropelab.kernels._launch.Bound` it
caches): the public API, the benchmark, the census, the checks and the notebooks' tracer all go
through it.
"""

from . import block2d, flat, freq_table, fused_qknorm_rope, pack4, pack4_scalar, pair_sincos, rope_rows
from ..errors import RopeInputError
from ._launch import Plan, Variant, launch

VARIANTS: dict[str, Variant] = {m.VARIANT.name: m.VARIANT for m in
                                (flat, block2d, pack4, pack4_scalar, freq_table, pair_sincos)}
MODULES = {m.VARIANT.name: m for m in (flat, block2d, pack4, pack4_scalar, freq_table, pair_sincos)}

# A different operation (QK-RMSNorm + RoPE in place on packed qkv) with its own problem type:
# kept apart so that code looping over VARIANTS never calls it.
FUSED: dict[str, Variant] = {fused_qknorm_rope.VARIANT.name: fused_qknorm_rope.VARIANT}

# Plain RoPE on rows of heads (16-bit storage, row strides, q and k in one launch), with its own
# problem type (RowsProblem): also kept out of VARIANTS, whose plans take a RopeProblem.
ROWS: dict[str, Variant] = {rope_rows.VARIANT.name: rope_rows.VARIANT}


def get(name) -> Variant:
    """The variant called ``name``, or a clear error listing the ones that exist."""
    if not isinstance(name, str):
        raise TypeError(f"variant must be a string, got {type(name).__name__} {name!r}")
    try:
        return VARIANTS[name]
    except KeyError:
        raise RopeInputError(f"unknown variant {name!r}; choose one of {', '.join(VARIANTS)}") from None


def variants_supporting(features) -> list[str]:
    return [n for n, v in VARIANTS.items() if set(features) <= v.features]


__all__ = ["FUSED", "MODULES", "Plan", "ROWS", "VARIANTS", "Variant", "get", "launch", "variants_supporting"]
