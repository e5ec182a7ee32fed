# %% [markdown]
# # 09 — ropelab inside a real model
#
# Notebook 06 built a fused QK-[RMSNorm](00_rope_in_one_notebook.ipynb#9-glossary) + RoPE kernel and checked it against a float64 formula.
# A model author asks a different question: if I put it into my model, does the model still
# compute the same thing?  This notebook answers it for two attentions:
#
# * **Qwen3**, from `transformers`: its attention normalizes every q and k head (`q_norm`,
#   `k_norm`) and then rotates them (`apply_rotary_pos_emb`), which is exactly
#   `fused_qknorm_rope`;
# * **FLUX**, the image model behind the course's production shapes: the same norm, then a RoPE
#   whose angles come from three ids per token (text, row, column) rather than one position.
#
# Everything runs on the simulator with a tiny random Qwen3 (nothing is downloaded).  The
# timings at a real size come from a recorded GPU run.  This notebook needs the `models` extra
# (`pip install 'ropelab[models]'`): without `transformers` the first cell says so and stops.

# %% tags=["nbval-ignore-output"]
# Run this first.  It installs ropelab into this kernel where it is missing (a bare Jupyter,
# Colab): from the course's repository when this notebook is in one, else from the course's
# wheel in this folder.  Then it says where your kernels will run.
from pathlib import Path

try:
    import ropelab
except ImportError:
    project = Path("../pyproject.toml")  # there when this notebook sits in the course's repository
    in_repo = project.is_file() and 'name = "ropelab"' in project.read_text()
    # %pip install -q {".." if in_repo else "ropelab-*.whl"}
    import ropelab

import copy
import warnings

import matplotlib.pyplot as plt
import numpy as np

from ropelab import lessons
from ropelab.models import missing

print(ropelab.format_description())
if missing():
    raise ModuleNotFoundError(missing())

# transformers imports tqdm, which warns on stderr when Jupyter's progress widgets are absent.
warnings.filterwarnings("ignore", message="IProgress not found")
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3 import modeling_qwen3

from ropelab.models import compare, flux, qwen3, training

# %% [markdown]
# ## 1. What Qwen3's attention does
#
# Per layer and token, Qwen3's attention:
#
# 1. projects the hidden state three times, `q_proj`, `k_proj`, `v_proj`: `Hq` query heads and
#    `Hk` key and value heads of `head_dim` each (grouped-query attention: `Hk < Hq`);
# 2. applies an RMSNorm to every q head with one weight vector (`q_norm`), and to every k head
#    with another (`k_norm`);
# 3. rotates q and k with RoPE, in the half-split (NeoX) layout: `rotate_half` pairs dim `i`
#    with dim `i + head_dim/2`, angles `position * rope_theta ** (-2i / head_dim)`;
# 4. attends, then projects back with `o_proj`.
#
# Steps 2 and 3 read and write every q and k element twice in PyTorch; the fused op does both
# in one pass over a packed `[tokens, (Hq + 2 Hk) * head_dim]` buffer.  A tiny Qwen3 with the
# real structure ([GQA](00_rope_in_one_notebook.ipynb#9-glossary), per-head norms) but small sizes, so the simulator can run it:

# %%
config = Qwen3Config(vocab_size=96, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                     max_position_embeddings=64,
                     rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
torch.manual_seed(0)
original = Qwen3ForCausalLM(config).eval()
with torch.no_grad():  # Qwen3 initializes its norm weights to 1; draw them so that they matter
    for layer in original.model.layers:
        layer.self_attn.q_norm.weight.uniform_(0.5, 1.5)
        layer.self_attn.k_norm.weight.uniform_(0.5, 1.5)
attn = original.model.layers[0].self_attn
print(f"{config.num_hidden_layers} layers, {config.num_attention_heads} q heads, "
      f"{config.num_key_value_heads} kv heads, head_dim {attn.head_dim}, "
      f"rope_theta {config.rope_parameters['rope_theta']:g}")
print("q_proj", tuple(attn.q_proj.weight.shape), " k_proj", tuple(attn.k_proj.weight.shape),
      " v_proj", tuple(attn.v_proj.weight.shape), " q_norm", tuple(attn.q_norm.weight.shape))

# %% [markdown]
# ## 2. The patch
#
# `ropelab.models.qwen3.patch_qwen3(model)` changes every attention layer in place:
#
# * the three projections become one `qkv_proj` whose weight is theirs stacked by rows, so
#   one matrix multiply writes each token's row `[Q heads | K heads | V heads]`, the op's
#   packed layout (the parameter count is unchanged);
# * `q_norm` and `k_norm` stay as modules: their weights are the op's `q_weight` and
#   `k_weight`, so a state dict or an optimizer sees the same parameters;
# * the forward calls `ropelab.torch_ops.fused_qknorm_rope` (the torch custom op of notebook
#   07, so `torch.compile(fullgraph=True)` sees no graph break) with `interleave=False`, the
#   NeoX layout, and `base = rope_theta`.  Positions are the model's `position_ids`; the
#   cos/sin that the model computed for `apply_rotary_pos_emb` are not read.
#
# The new forward, printed from the package:

# %%
print(lessons.excerpt(qwen3, "qwen3_fused_forward"))

# %%
patched = qwen3.patch_qwen3(copy.deepcopy(original))
layer = patched.model.layers[0].self_attn
print("patched:", qwen3.is_patched(layer), " qkv_proj", tuple(layer.qkv_proj.weight.shape))
print("same parameter count:", sum(p.numel() for p in patched.parameters())
      == sum(p.numel() for p in original.parameters()))

# %% [markdown]
# ## 3. Does the patched model compute the same thing?
#
# Two levels, because only one has an error model.
#
# **One layer's q and k.**  Both implementations start from the same float32 packed qkv.
# Each is compared with the float64 formula (`ropelab.reference.fused_qknorm_rope`, NeoX
# layout).  ropelab's bound is `ropelab.tolerance.fused_atol`: the norm's float32 rounding plus
# the rotation's budget at the largest angle, [fast-math](00_rope_in_one_notebook.ipynb#9-glossary) included.  transformers' own float32
# path is measured against the same truth.

# %%
hidden = torch.randn(4, config.hidden_size, generator=torch.Generator().manual_seed(2))
positions = torch.tensor([0, 1, 17, 63], dtype=torch.int32)
qk_check = compare.check_layer_qk(layer, attn, original.model.rotary_emb, hidden, positions)
print(qk_check.line)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"max error vs float64: ropelab {qk_check.ropelab_error:.2e}, transformers "
      f"{qk_check.transformers_error:.2e}; ropelab's bound {qk_check.atol:.2e}")

# %% [markdown]
# **The logits.**  Between q/k and the logits lie dozens of matrix products, softmaxes and
# norms, and no error model covers them.  The bar is the original model's own float32
# rounding: the unmodified model run in float64 is the truth, `floor = max|original32 -
# original64|`, and the patched model's logits must lie within `LOGITS_FACTOR * floor` of the
# original's.  Two float32 implementations of one function differ by about two floors.  A wrong
# layout or a lost norm weight lands orders of magnitude beyond that: `tests/test_models.py`
# plants both and checks that this comparison fails.

# %%
input_ids = torch.randint(0, config.vocab_size, (2, 4), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    logits_32 = original(input_ids).logits
    logits_64 = copy.deepcopy(original).double()(input_ids).logits
    logits_ropelab = patched(input_ids).logits
logits_check = compare.check_logits(logits_ropelab, logits_32, logits_64)
print(f"logits {tuple(logits_32.shape)} (batch 2, 4 tokens each, vocabulary {config.vocab_size})")
print(logits_check.line)

# %%
# NBVAL_IGNORE_OUTPUT
print(f"max |patched - original| = {logits_check.difference:.2e}; the original's own float32 "
      f"error {logits_check.floor:.2e}; tolerance {logits_check.tolerance:.2e}")

# %% [markdown]
# The same patch in the wrong layout, GPT-J pairs (`interleave=True`), for contrast: the model
# runs without complaint and computes something else.

# %%
gptj = qwen3.patch_qwen3(copy.deepcopy(original), interleave=True)
with torch.no_grad():
    wrong_check = compare.check_logits(gptj(input_ids).logits, logits_32, logits_64)
print(wrong_check.line)
far_off = wrong_check.difference > 1000 * wrong_check.tolerance
print(f"off by more than 1000x the tolerance: {far_off}")

# %% [markdown]
# ## 4. Training
#
# Training needs the gradient of the fused op, which is notebook 08's backward kernel.  When
# autograd needs the op's input (grad mode on, and `qkv` or a weight requiring grad),
# `ropelab.torch_ops.fused_qknorm_rope` does not work in place: `qkv` is left as it is, a new
# tensor comes back, and its backward runs ropelab's backward kernel from the saved input.
# That is why the patched forward keeps what the op returns (`qkv = rt.fused_qknorm_rope(...)`).
#
# The check: a few plain [SGD](00_rope_in_one_notebook.ipynb#9-glossary) steps of the patched model and of the original, from the same
# weights on the same tokens, must give the same loss curve, within `training.CURVE_RTOL` of
# the loss (`ropelab.models.training`).  One sequence of 4 tokens and four steps: the backward
# kernel runs on the simulator too.

# %%
ids_train = input_ids[:1]
ours = training.loss_curve(qwen3.patch_qwen3(copy.deepcopy(original)), ids_train, steps=4)
theirs = training.loss_curve(copy.deepcopy(original), ids_train, steps=4)
print(("PASS" if training.curves_agree(ours, theirs) else "FAIL")
      + f": {len(ours)} SGD steps, the original's loss curve within "
      f"{training.CURVE_RTOL:g} relative")

# %%
# NBVAL_IGNORE_OUTPUT
print("ropelab: ", [f"{v:.6f}" for v in ours])
print("original:", [f"{v:.6f}" for v in theirs])

# %% [markdown]
# The two curves, drawn (left), and at each step their difference relative to the original's
# loss, against the bound `training.CURVE_RTOL` (right, a linear axis from zero):

# %%
lessons.plot_loss_curves(ours, theirs, training.CURVE_RTOL)
plt.show()

# %% [markdown]
# ## 5. FLUX: three position ids per token
#
# FLUX's attention normalizes q and k per head like Qwen3, then rotates interleaved (GPT-J)
# pairs.  There is no single position: each token carries three ids (`0` for text tokens,
# `(0, row, column)` for image patches), and the head's 128 dims are split `16 / 56 / 56`, the
# pairs of each part turning by one axis's id.  `base` and `position` cannot describe that.
# So the angles come from a table: `ropelab.tables.flux_cache(ids)` holds one float32 row per
# token, cos half then sin half, computed in float64.  The fused op reads it through
# `cos_sin_cache=`, with `positions = arange(tokens)`:

# %%
print(lessons.excerpt(flux, "flux_fused_call"))

# %% [markdown]
# The check: a small FLUX-like sequence (2 text tokens, a 2 x 3 [grid](00_rope_in_one_notebook.ipynb#9-glossary) of image patches, 2
# heads), against `ropelab.models.flux.reference_flux_qk`.  That is the float64 formula:
# the norm from `ropelab.reference`, then FLUX's rotation with `reference.flux_cos_sin`.  The
# bound is the cache mode's: cos and sin are rounded once on the host, and no angle is formed
# on the device.  (`tests/test_models.py` also checks the formula against diffusers' own
# `FluxPosEmbed` + `apply_rotary_emb` when diffusers is installed.)

# %%
ids = flux.flux_ids(2, 2, 3)
ids[2:, 1:] += 17  # patches away from the origin, so every axis turns
print("ids (text, row, column):", ids.tolist())
rng = np.random.default_rng(3)
heads, head_dim = 2, 128
qkv = rng.standard_normal((len(ids), 3 * heads * head_dim)).astype(np.float32)
wq, wk = (rng.uniform(0.5, 1.5, head_dim).astype(np.float32) for _ in range(2))
want = flux.reference_flux_qk(qkv, heads=heads, head_dim=head_dim, q_weight=wq,
                              k_weight=wk, ids=ids)
got = flux.fused_flux_qk(qkv.copy(), heads=heads, head_dim=head_dim, q_weight=wq,
                         k_weight=wk, ids=ids)[:, :2 * heads * head_dim]
within = np.abs(got - want).max() <= flux.atol(want, wq, wk, head_dim)
print(("PASS" if within else "FAIL") + ": FLUX q/k within the cache mode's bound of float64")

# %% [markdown]
# ## 6. On a GPU: one Qwen3-8B decoder layer
#
# `python -m ropelab.models.bench --record` times one `Qwen3DecoderLayer` at Qwen3-8B's shape
# (hidden 4096, 32 q heads, 8 kv heads, head_dim 128, [bfloat16](00_rope_in_one_notebook.ipynb#9-glossary)) on one sequence of 4096 tokens.
# It runs the layer as transformers ships it and after `patch_qwen3`, eager and under
# `torch.compile(fullgraph=True)`, forward alone and forward + backward, with the course's
# timer (cold [L2](00_rope_in_one_notebook.ipynb#9-glossary), [CUDA events](00_rope_in_one_notebook.ipynb#9-glossary), medians; notebook 07).
#
# | pass | mode | transformers | one qkv [GEMM](00_rope_in_one_notebook.ipynb#9-glossary) (control) | ropelab | ropelab / transformers |
# |---|---|---|---|---|---|
# | forward | eager | {{ real_model.transformers_eager_forward_ms }} | {{ real_model.qkv_gemm_eager_forward_ms }} | {{ real_model.ropelab_eager_forward_ms }} | {{ real_model.ratio_eager_forward }} |
# | forward | compiled | {{ real_model.transformers_compiled_forward_ms }} | {{ real_model.qkv_gemm_compiled_forward_ms }} | {{ real_model.ropelab_compiled_forward_ms }} | {{ real_model.ratio_compiled_forward }} |
# | forward + backward | eager | {{ real_model.transformers_eager_forward_backward_ms }} | {{ real_model.qkv_gemm_eager_forward_backward_ms }} | {{ real_model.ropelab_eager_forward_backward_ms }} | {{ real_model.ratio_eager_forward_backward }} |
# | forward + backward | compiled | {{ real_model.transformers_compiled_forward_backward_ms }} | {{ real_model.qkv_gemm_compiled_forward_backward_ms }} | {{ real_model.ropelab_compiled_forward_backward_ms }} | {{ real_model.ratio_compiled_forward_backward }} |
#
# The control column patches only the projections (`patch_qwen3(model, qk="transformers")`:
# one qkv GEMM, then transformers' own norm and rotation), so ropelab against it is the fused
# op's own share of the difference.
#
# The norm and rotation are a small share of a decoder layer: the GEMMs and
# the attention dominate.  So the layer-level gain is bounded by what those two steps cost in
# the original, whatever the kernel's own speed-up.
#
# The same record, drawn: one panel per pass and mode, each bar the median time of one call
# with its [p20-p80](00_rope_in_one_notebook.ipynb#9-glossary) range (from the 20th to the 80th percentile of the timed calls), labelled
# with its ratio to transformers.  A hatched bar is a [host_bound](00_rope_in_one_notebook.ipynb#9-glossary) row: the host took about as
# long to enqueue the timed call as the fill kept the GPU busy, so its events may include time
# the GPU spent waiting for the host (notebook 07).  The three models of a panel were timed the
# same way in the same run.

# %%
layer_record = lessons.recorded("real_model")
if layer_record is not None:
    print(lessons.provenance(layer_record))
    lessons.plot_layer_times(layer_record)
    plt.show()

# %% [markdown]
# ## 7. Check yourself
#
# Qwen3-8B has 32 query heads and 8 key/value heads of 128 dims.  How many output columns does
# the fused `qkv_proj` of one of its layers have?

# %%
answer_1 = (32 + 2 * 8) * 128  # your answer here

# %%
assert answer_1 == modeling_qwen3.Qwen3Attention(
    Qwen3Config(hidden_size=64, num_attention_heads=32, num_key_value_heads=8, head_dim=128),
    layer_idx=0).o_proj.in_features + 2 * 8 * 128
print(f"exercise 1: correct, {answer_1} columns: {32 * 128} for q, {8 * 128} each for k and v")
