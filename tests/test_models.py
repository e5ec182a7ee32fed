"""ropelab inside real models (ropelab.models): a patched Qwen3 computes the original's logits,
a planted mistake in the patch is caught, training is refused until the fused op has a
backward, and FLUX's 3-axis RoPE through the user cos/sin cache matches its formula.

Small shapes: the fused kernel runs on the simulator here (a few seconds per forward).
"""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the models extra (transformers) is not installed")

from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from ropelab.models import compare, qwen3  # noqa: E402

BATCH, SEQ = 2, 4


def tiny_qwen3(**overrides):
    """Two layers, GQA (4 q heads, 2 kv heads), head_dim 64 (the op's smallest), random weights;
    the q/k norm weights drawn away from their initial ones so that skipping them shows."""
    options = dict(vocab_size=96, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                   max_position_embeddings=64, rope_parameters={"rope_type": "default",
                                                                "rope_theta": 1000000.0})
    options.update(overrides)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**options)).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.uniform_(0.5, 1.5)
            layer.self_attn.k_norm.weight.uniform_(0.5, 1.5)
    return model


@pytest.fixture(scope="module")
def original():
    return tiny_qwen3()


@pytest.fixture(scope="module")
def input_ids():
    return torch.randint(0, 96, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope="module")
def reference_logits(original, input_ids):
    with torch.no_grad():
        return original(input_ids).logits, copy.deepcopy(original).double()(input_ids).logits


def _patched_logits(original, input_ids, **options):
    model = qwen3.patch_qwen3(copy.deepcopy(original), **options)
    with torch.no_grad():
        return model(input_ids).logits


def test_patch_fuses_the_projections_and_keeps_the_parameters(original):
    model = qwen3.patch_qwen3(copy.deepcopy(original))
    attn, before = model.model.layers[0].self_attn, original.model.layers[0].self_attn
    assert qwen3.is_patched(attn) and not qwen3.is_patched(before)
    stacked = torch.cat([before.q_proj.weight, before.k_proj.weight, before.v_proj.weight])
    assert torch.equal(attn.qkv_proj.weight, stacked)
    # Three projections became one: the parameter count is unchanged.
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in original.parameters())


def test_patched_logits_match_the_original(original, input_ids, reference_logits):
    ours = _patched_logits(original, input_ids)
    check = compare.check_logits(ours, *reference_logits)
    assert check.floor > 0  # float32 rounding exists, so the bar is not zero
    assert check.passed, check


def test_planted_gptj_layout_fails_the_logits_check(original, input_ids, reference_logits):
    wrong = _patched_logits(original, input_ids, interleave=True)  # Qwen3 is NeoX
    check = compare.check_logits(wrong, *reference_logits)
    assert not check.passed and check.difference > 1000 * check.tolerance


def test_planted_skipped_norm_weight_fails_the_logits_check(original, input_ids, reference_logits):
    model = qwen3.patch_qwen3(copy.deepcopy(original))
    attn = model.model.layers[1].self_attn
    attn.q_norm = copy.deepcopy(attn.q_norm)  # the op would read unit weights: the norm's scale lost
    with torch.no_grad():
        attn.q_norm.weight.fill_(1.0)
        check = compare.check_logits(model(input_ids).logits, *reference_logits)
    assert not check.passed


def test_one_layer_qk_within_the_error_model(original):
    model = qwen3.patch_qwen3(copy.deepcopy(original))
    tokens = 4
    hidden = torch.randn(tokens, 128, generator=torch.Generator().manual_seed(2))
    positions = torch.tensor([0, 1, 17, 63], dtype=torch.int32)
    check = compare.check_layer_qk(model.model.layers[0].self_attn,
                                   original.model.layers[0].self_attn,
                                   original.model.rotary_emb, hidden, positions)
    assert check.passed, check
    assert check.transformers_error < 1e-4  # both are float32 paths to the same formula
    wrong = qwen3.patch_qwen3(copy.deepcopy(original), interleave=True)
    bad = compare.check_layer_qk(wrong.model.layers[0].self_attn, original.model.layers[0].self_attn,
                                 original.model.rotary_emb, hidden, positions)
    assert not bad.passed and bad.ropelab_error > 1000 * bad.atol


def test_training_the_patched_model_is_refused_until_the_backward_exists(original, input_ids):
    model = qwen3.patch_qwen3(copy.deepcopy(original)).train()
    with pytest.raises(RuntimeError, match="no backward kernel yet"):
        model(input_ids, labels=input_ids)


def test_models_ropelab_cannot_serve_are_refused_before_any_change():
    model = tiny_qwen3(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})
    with pytest.raises(qwen3.PatchError, match="rope_type"):
        qwen3.patch_qwen3(model)
    assert not qwen3.is_patched(model.model.layers[0].self_attn)
    with pytest.raises(qwen3.PatchError, match="head_dim 32"):
        qwen3.patch_qwen3(tiny_qwen3(head_dim=32))
