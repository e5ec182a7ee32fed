"""The RoPE kernel variants, one module each, in course order, and their registry.

Each variant module holds its device code, a ``launch_config(problem, threads_per_block=None)``
(the launch geometry, which notebooks show) and a :class:`~ropelab.kernels.plan.Variant`
record ``VARIANT`` that declares its name, summary, features, options and how to build its
:class:`~ropelab.kernels.plan.Plan`.  Nothing launches a kernel except
:func:`ropelab.kernels.launch.launch` (and the :class:`~ropelab.kernels.launch.Bound` it
caches; ``kernels.launch`` is that module): the public API, the benchmark, the census, the checks and the notebooks' tracer all go
through it.

A new variant is one module plus one line in :data:`REGISTRY` below: the public ``rope``,
``python -m ropelab check``, the bench plan and the census all read :data:`VARIANTS`.
"""

from . import (block2d, flat, freq_table, fused_qknorm_rope, fused_qknorm_rope_kv, launch, pack4,
               pack4_scalar, pair_sincos, rope_rows_host)
from .fused_qknorm_rope import backward_host as qknorm_backward
from ..errors import RopeInputError
from .plan import Plan, Variant

# The plain-RoPE variant modules, in course order: the one place a new variant is registered.
REGISTRY = (flat, block2d, pack4, pack4_scalar, freq_table, pair_sincos)

VARIANTS: dict[str, Variant] = {m.VARIANT.name: m.VARIANT for m in REGISTRY}
MODULES = {m.VARIANT.name: m for m in REGISTRY}

# A different operation (QK-RMSNorm + RoPE in place on packed qkv) with its own problem type:
# kept apart so that code looping over VARIANTS never calls it.
FUSED: dict[str, Variant] = {fused_qknorm_rope.VARIANT.name: fused_qknorm_rope.VARIANT}

# Plain RoPE on rows of heads (16-bit storage, row strides, q and k in one launch), with its own
# problem type (RowsProblem): also kept out of VARIANTS, whose plans take a RopeProblem.
ROWS: dict[str, Variant] = {rope_rows_host.VARIANT.name: rope_rows_host.VARIANT}

# The fused op's backward (dx and the two weight gradients): registered for the census; its
# public call is ropelab.fused_qknorm_rope_backward (main kernel, then the reduction).
BACKWARD: dict[str, Variant] = {qknorm_backward.VARIANT.name: qknorm_backward.VARIANT}

# The serving op (QK-RMSNorm + RoPE with the K/V write into a paged cache; problem type
# KVProblem): registered for the census; its public call is ropelab.fused_qknorm_rope_kv.
SERVING: dict[str, Variant] = {fused_qknorm_rope_kv.VARIANT.name: fused_qknorm_rope_kv.VARIANT}


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


__all__ = ["BACKWARD", "FUSED", "MODULES", "Plan", "ROWS", "SERVING", "VARIANTS", "Variant", "get",
           "launch", "variants_supporting"]
