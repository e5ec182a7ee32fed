"""ropelab inside a Qwen3 on a real GPU, in bfloat16 (skipped without a GPU or transformers).

Run on a GPU host with ``python -m pytest tests/test_gpu_models.py``.  What is checked, at a
Qwen3-like shape (head_dim 128, GQA 8:2, 2 layers, 2 sequences of 96 tokens):

* the patched model's bfloat16 logits stay within ``compare.LOGITS_FACTOR`` times the
  original bfloat16 model's own error (against the original run in float64 on the GPU) of the
  original's: the bf16 tolerance, by the same rule as the float32 one on the simulator;
* the patched model compiles with ``torch.compile(fullgraph=True)`` (no graph break) and gives
  the eager patched model's logits within the same bar;
* a planted GPT-J layout fails the bar.
"""

import copy

import pytest

import ropelab

pytestmark = pytest.mark.skipif(ropelab.SIMULATED, reason="needs a GPU")
torch = pytest.importorskip("torch") if not ropelab.SIMULATED else None
if not ropelab.SIMULATED:
    pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def models():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=512, hidden_size=512, intermediate_size=1024,
                         num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                         head_dim=128, max_position_embeddings=4096,
                         rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    torch.manual_seed(0)
    base = Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for layer in base.model.layers:
            layer.self_attn.q_norm.weight.uniform_(0.5, 1.5)
            layer.self_attn.k_norm.weight.uniform_(0.5, 1.5)
    ids = torch.randint(0, 512, (2, 96), generator=torch.Generator().manual_seed(1)).cuda()
    with torch.no_grad():
        truth = copy.deepcopy(base).double().cuda()(ids).logits
        original = copy.deepcopy(base).to(device="cuda", dtype=torch.bfloat16)
        original_logits = original(ids).logits
    return base, ids, truth, original_logits


def _patched(base, **options):
    from ropelab.models import qwen3

    return qwen3.patch_qwen3(copy.deepcopy(base).to(device="cuda", dtype=torch.bfloat16), **options)


def test_bf16_patched_logits_match_the_original(models):
    from ropelab.models import compare

    base, ids, truth, original_logits = models
    with torch.no_grad():
        ours = _patched(base)(ids).logits
    check = compare.check_logits(ours, original_logits, truth)
    print(f"bf16: |patched - original| {check.difference:.3e}, floor {check.floor:.3e}")
    assert check.passed, check


def test_bf16_patched_model_compiles_without_graph_breaks(models):
    from ropelab.models import compare

    base, ids, truth, original_logits = models
    model = _patched(base)
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        check = compare.check_logits(compiled(ids).logits, original_logits, truth)
    assert check.passed, check


def test_bf16_planted_gptj_layout_fails(models):
    from ropelab.models import compare

    base, ids, truth, original_logits = models
    with torch.no_grad():
        wrong = _patched(base, interleave=True)(ids).logits
    assert not compare.check_logits(wrong, original_logits, truth).passed
