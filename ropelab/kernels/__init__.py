"""The RoPE kernel variants, one module each, in course order.

Every variant module exposes the same names:

``NAME``, ``SUMMARY``
    Registry key and a one-line description.
``FEATURES``
    The optional features it implements (see :mod:`ropelab.problem`: heads, partial, neox,
    inverse, scaled).  The public API refuses a call that needs one it lacks.
``KERNEL``, ``PTX_SIGNATURE``
    The plain Python kernel function (notebooks show it with ``inspect.getsource``) and the
    argument types its launcher passes (the PTX census compiles exactly that).
``launch_config(problem, threads_per_block=None) -> (blocks, threads)``
``launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0)``
    Launch on flat 1-D device arrays; no validation (the public API has done it).
"""

from . import block2d, flat, freq_table, pack4, pack4_scalar, pair_sincos

VARIANTS = {m.NAME: m for m in (flat, block2d, pack4, pack4_scalar, freq_table, pair_sincos)}

# A different operation from plain RoPE (QK-RMSNorm + RoPE in place on packed qkv), with its own
# launcher signature: kept apart so that code looping over VARIANTS never calls it.
from . import fused_qknorm_rope  # noqa: E402

FUSED = {fused_qknorm_rope.NAME: fused_qknorm_rope}


def get(name: str):
    try:
        return VARIANTS[name]
    except KeyError:
        raise ValueError(
            f"unknown variant {name!r}; choose one of {', '.join(VARIANTS)}"
        ) from None


def launch_variant(module, problem, x, out, positions, *, fastmath=True, threads_per_block=None,
                   stream=0, **options):
    """Prepare (tables, caches) if the variant needs it, then launch; no validation here."""
    kwargs = dict(fastmath=fastmath, threads_per_block=threads_per_block, stream=stream)
    prepare = getattr(module, "prepare", None)
    if prepare is not None:
        kwargs["state"] = prepare(problem, **options)
    elif options:
        raise TypeError(f"variant '{module.NAME}' takes no options, got {sorted(options)}")
    module.launch(problem, x, out, positions, **kwargs)


def variants_supporting(features) -> list[str]:
    return [n for n, m in VARIANTS.items() if set(features) <= m.FEATURES]
