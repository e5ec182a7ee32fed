"""ropelab inside real models: Qwen3's attention and FLUX-style 3-axis RoPE.

Nothing here is imported by ``import ropelab``; torch, transformers and diffusers are imported
by the submodules that need them (install the ``models`` extra):

* :mod:`ropelab.models.qwen3` -- :func:`~ropelab.models.qwen3.patch_qwen3` fuses a
  ``transformers`` Qwen3 model's q/k/v projections into one and replaces ``q_norm`` /
  ``k_norm`` + ``apply_rotary_pos_emb`` with one ``ropelab.torch_ops.fused_qknorm_rope`` call;
* :mod:`ropelab.models.flux` -- FLUX's attention (QK-RMSNorm, then RoPE over (text, row,
  column) ids) through the fused op's user cos/sin cache;
* :mod:`ropelab.models.bench` -- the GPU timing of one Qwen3-8B-like decoder layer
  (``python -m ropelab.models.bench --record``).
"""

import importlib.util

NEEDED = ("torch", "transformers")


def missing(find_spec=importlib.util.find_spec) -> str | None:
    """None when ropelab.models can run here, else the message to show (nothing is imported)."""
    absent = [name for name in NEEDED if find_spec(name) is None]
    if not absent:
        return None
    return (f"ropelab.models and notebook 09 need {' and '.join(absent)} (not installed here): "
            f"pip install 'ropelab[models]'")
