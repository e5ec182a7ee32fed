"""The serving op inside a real model: greedy generation through a paged KV cache
(ropelab.models.paged, a test harness, not a serving engine) for the patched tiny Qwen3 gives
the unpatched model's own ``generate`` tokens, for a batch of prompts of different lengths;
the pages hold what the model's own cache holds; a planted mistake changes the tokens.

Random weights, nothing downloaded; the op runs on the simulator here (CPU tensors)."""

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the models extra (transformers) is not installed")

from ropelab.models import paged, qwen3  # noqa: E402
from test_models import tiny_qwen3  # noqa: E402

PROMPTS = [[5, 17, 3, 88, 41], [9, 2], [60, 61, 62, 63, 64, 65, 66]]
NEW = 4


@pytest.fixture(scope="module")
def models():
    original = tiny_qwen3()
    return original, qwen3.patch_qwen3(copy.deepcopy(original))


@pytest.fixture(scope="module")
def want(models):
    original, _ = models
    out = []
    with torch.no_grad():
        for p in PROMPTS:  # one prompt at a time: no padding, the model's own cache
            ids = torch.tensor([p])
            got = original.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                    max_new_tokens=NEW, min_new_tokens=NEW, pad_token_id=0)
            out.append(got[0, len(p):].tolist())
    return out


def test_greedy_tokens_through_the_paged_cache_are_generates(models, want):
    _, patched = models
    got = paged.generate(patched, PROMPTS, NEW, block_size=2)
    assert got == want
    assert len({tuple(t) for t in want}) > 1  # the prompts lead to different continuations


def test_the_pages_hold_the_models_keys(models):
    """After a prefill, request 0's gathered K pages of layer 0 are the model's own rotated,
    normalized keys (its DynamicCache), and V its values."""
    original, patched = models
    cache = paged.PagedKV(2, 16, 2, 2, 64, torch.float32)
    r = cache.add()
    positions, slots = cache.extend(r, len(PROMPTS[0]))
    with torch.no_grad():
        paged._step(patched, PROMPTS[0], positions, slots, [(r, (0, len(PROMPTS[0])))], cache,
                    (1.0, 1.0))
        out = original(torch.tensor([PROMPTS[0]]), use_cache=True)
    layer0 = out.past_key_values.layers[0]
    k, v = cache.gather(0, r)
    torch.testing.assert_close(k, layer0.keys[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(v, layer0.values[0], rtol=0, atol=0)  # V is copied


def test_a_planted_mistake_changes_the_tokens(models, want):
    _, patched = models
    wrong = copy.deepcopy(patched)
    for layer in wrong.model.layers:
        layer.self_attn.ropelab_interleave = True  # GPT-J pairs: wrong for Qwen3
    # The prefill's tokens already differ (one step keeps the test cheap).
    assert paged.generate(wrong, PROMPTS, 1, block_size=2) != [t[:1] for t in want]
