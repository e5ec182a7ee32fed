"""ropelab inside real models (ropelab.models): a patched Qwen3 computes the original's logits,
a planted mistake in the patch is caught, a few training steps give the original's loss
curve (through the fused backward kernel), and FLUX's 3-axis RoPE through the user cos/sin
cache matches its formula.

Small shapes: the fused kernel runs on the simulator here (a few seconds per forward).
"""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers", reason="the models extra (transformers) is not installed")

from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from ropelab.models import compare, qwen3, training  # noqa: E402

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
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(model) == count(original)


def test_patched_logits_match_the_original(original, input_ids, reference_logits):
    ours = _patched_logits(original, input_ids)
    check = compare.check_logits(ours, *reference_logits)
    assert check.floor > 0  # float32 rounding exists, so the bar is not zero
    assert check.passed, check


def test_patched_logits_match_with_the_cos_sin_table_too(original, input_ids, reference_logits):
    ours = _patched_logits(original, input_ids, cache=True)
    assert compare.check_logits(ours, *reference_logits).passed


def test_planted_gptj_layout_fails_the_logits_check(original, input_ids, reference_logits):
    wrong = _patched_logits(original, input_ids, interleave=True)  # Qwen3 is NeoX
    check = compare.check_logits(wrong, *reference_logits)
    assert not check.passed and check.difference > 1000 * check.tolerance


def test_planted_skipped_norm_weight_fails_the_logits_check(original, input_ids, reference_logits):
    model = qwen3.patch_qwen3(copy.deepcopy(original))
    attn = model.model.layers[1].self_attn
    attn.q_norm = copy.deepcopy(attn.q_norm)  # the op reads unit weights: the norm's scale is lost
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
    bad = compare.check_layer_qk(wrong.model.layers[0].self_attn,
                                 original.model.layers[0].self_attn, original.model.rotary_emb,
                                 hidden, positions)
    assert not bad.passed and bad.ropelab_error > 1000 * bad.atol


def test_patched_and_original_models_train_alike(input_ids):
    # One layer and one sequence of 4 tokens: the backward kernel on the simulator is slow.
    original, ids = tiny_qwen3(num_hidden_layers=1), input_ids[:1]
    ours = training.loss_curve(qwen3.patch_qwen3(copy.deepcopy(original)), ids, steps=2)
    theirs = training.loss_curve(copy.deepcopy(original), ids, steps=2)
    assert theirs[-1] < theirs[0]  # the steps train
    # Equal curves need equal gradients: the first step's update moves every later loss.
    assert training.curves_agree(ours, theirs), (ours, theirs)


def test_the_control_patch_trains_like_the_original(original, input_ids):
    """The training comparison on a patch that is differentiable today: one qkv GEMM, then
    transformers' own norm and rotation.  Its curve agrees with the original's within
    CURVE_RTOL; that is the bar the fused op's curve will meet."""
    control = qwen3.patch_qwen3(copy.deepcopy(original), qk="transformers")
    ours = training.loss_curve(control, input_ids)
    theirs = training.loss_curve(copy.deepcopy(original), input_ids)
    assert theirs[-1] < theirs[0]
    assert training.curves_agree(ours, theirs), (ours, theirs)


def test_curve_comparison_can_fail():
    assert training.curves_agree([2.0, 1.5], [2.0, 1.50001])
    assert not training.curves_agree([2.0, 1.5], [2.0, 1.51])
    assert not training.curves_agree([2.0], [2.0, 1.5])


def test_models_ropelab_cannot_serve_are_refused_before_any_change():
    model = tiny_qwen3(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4})
    with pytest.raises(qwen3.PatchError, match="rope_type"):
        qwen3.patch_qwen3(model)
    assert not qwen3.is_patched(model.model.layers[0].self_attn)
    with pytest.raises(qwen3.PatchError, match="head_dim 32"):
        qwen3.patch_qwen3(tiny_qwen3(head_dim=32))


@pytest.mark.parametrize("options", [dict(interleave="False"), dict(interleave=None),
                                     dict(cache="yes"), dict(cache=1)])
def test_non_bool_options_are_refused_before_any_change(original, options):
    """A string "False" is truthy: it used to patch in GPT-J pairs without a word."""
    model = copy.deepcopy(original)
    with pytest.raises(TypeError, match="must be True or False"):
        qwen3.patch_qwen3(model, **options)
    assert not qwen3.is_patched(model.model.layers[0].self_attn)


def test_patching_twice_is_a_no_op_and_returns_the_model(original, input_ids, reference_logits):
    model = qwen3.patch_qwen3(copy.deepcopy(original))
    weight = model.model.layers[0].self_attn.qkv_proj.weight
    assert qwen3.patch_qwen3(model) is model
    assert model.model.layers[0].self_attn.qkv_proj.weight is weight  # not fused a second time
    with torch.no_grad():
        ours = model(input_ids).logits
    assert compare.check_logits(ours, *reference_logits).passed


# ---- FLUX-style attention: 3-axis ids through the user cos/sin cache ----------------------------

from ropelab.models import flux  # noqa: E402

HEADS, HEAD_DIM = 2, 128


@pytest.fixture(scope="module")
def flux_case():
    rng = np.random.default_rng(3)
    ids = flux.flux_ids(2, 2, 3)  # 2 text tokens, a 2 x 3 patch grid
    ids[2:, 1:] += 17  # ids away from 0, so every axis turns by a visible angle
    qkv = rng.standard_normal((len(ids), 3 * HEADS * HEAD_DIM)).astype(np.float32)
    wq, wk = (rng.uniform(0.5, 1.5, HEAD_DIM).astype(np.float32) for _ in range(2))
    return ids, qkv, wq, wk


def test_flux_ids_follow_diffusers_layout():
    ids = flux.flux_ids(2, 2, 3)
    assert ids.shape == (8, 3) and not ids[:2].any()
    assert ids[2:].tolist() == [[0, r, c] for r in range(2) for c in range(3)]


def test_flux_fused_call_matches_the_float64_formula(flux_case):
    ids, qkv, wq, wk = flux_case
    want = flux.reference_flux_qk(qkv, heads=HEADS, head_dim=HEAD_DIM, q_weight=wq, k_weight=wk,
                                  ids=ids)
    got = flux.fused_flux_qk(qkv.copy(), heads=HEADS, head_dim=HEAD_DIM, q_weight=wq,
                             k_weight=wk, ids=ids)
    err = np.abs(got[:, :2 * HEADS * HEAD_DIM] - want).max()
    assert err <= flux.atol(want, wq, wk, HEAD_DIM), err
    # Planted: one axis's ids dropped (the row id) moves the result far past the bound.
    flat = ids.copy()
    flat[:, 1] = 0
    wrong = flux.fused_flux_qk(qkv.copy(), heads=HEADS, head_dim=HEAD_DIM, q_weight=wq,
                               k_weight=wk, ids=flat)
    assert np.abs(wrong[:, :2 * HEADS * HEAD_DIM] - want).max() > 100 * flux.atol(want, wq, wk,
                                                                                    HEAD_DIM)


def test_flux_formula_is_diffusers_own(flux_case):
    pytest.importorskip("diffusers", reason="diffusers is not installed")
    ids, qkv, wq, wk = flux_case
    normed = flux.reference_normed_qk(qkv, heads=HEADS, head_dim=HEAD_DIM, q_weight=wq,
                                      k_weight=wk)
    theirs = flux.diffusers_flux_qk(normed, ids, HEADS, HEAD_DIM)
    want = flux.reference_flux_qk(qkv, heads=HEADS, head_dim=HEAD_DIM, q_weight=wq, k_weight=wk,
                                  ids=ids)
    # diffusers rounds its float64 cos/sin to float32: a few 2**-24 of the largest value.
    assert np.abs(theirs - want).max() <= 8 * 2.0**-24 * np.abs(want).max()


def test_a_machine_without_transformers_is_told_what_to_install():
    from ropelab.models import missing

    assert missing() is None  # this test module runs only where both are installed
    message = missing(find_spec=lambda name: None if name == "transformers" else object())
    assert "transformers" in message and "torch" not in message and "ropelab[models]" in message


def test_bench_layer_case_builds_two_layers_with_the_same_function():
    """The GPU bench's case at a tiny shape on the CPU: the patched layers compute the
    original's output (their forward+backward launchers run in the next test)."""
    from ropelab.models import bench

    config = bench.layer_config(4, hidden_size=128, intermediate_size=192, num_attention_heads=2,
                                num_key_value_heads=1, head_dim=64)
    layers, inputs = bench.layer_case(config, 4, "cpu", torch.float32)
    assert list(layers) == ["transformers", "qkv_gemm", "ropelab"]
    with torch.no_grad():
        want = layers["transformers"](**inputs)
    for name in ("qkv_gemm", "ropelab"):
        calls = bench.launchers(layers[name], inputs, compiled=False)
        assert (calls["forward"]() - want).abs().max().item() < 1e-5, name


def test_cache_style_is_read_from_the_update_signature():
    def old(self, key, value, layer_idx, cache_kwargs=None): ...
    def plain(self, key, value, layer_idx): ...
    def new(self, key, value, layer_idx, *args, **kwargs): ...
    assert [qwen3._cache_style(f) for f in (old, plain, new)] == ["dict", "none", "keywords"]


@pytest.mark.parametrize("style", ["dict", "none", "keywords"])
def test_cache_update_follows_the_installed_transformers_convention(monkeypatch, style):
    seen = {}

    class Cache:
        def update(self, key, value, layer_idx, *args, **kwargs):
            seen.update(args=args, kwargs=kwargs)
            return key, value

    monkeypatch.setattr(qwen3, "_CACHE_STYLE", style)
    key = torch.zeros(1)
    out = qwen3._update_cache(Cache(), key, key, 0, ("cos", "sin"), {"cache_position": 7})
    assert out == (key, key)
    expected = {"dict": (({"sin": "sin", "cos": "cos", "cache_position": 7},), {}),
                "none": ((), {}), "keywords": ((), {"kwargs": {"cache_position": 7}})}[style]
    assert (seen["args"], seen["kwargs"]) == expected


def test_bench_rows_carry_times_ratios_and_failures():
    """The bench's row assembly with a stand-in timer on a tiny CPU layer: every model and pass
    gets a row, ratios are over the transformers row, a failing launch becomes the row's note."""
    from ropelab.models import bench

    class Timer:
        last_host_us, fill_us = [1.0], 100.0
        l2_bytes = flush_bytes = warmup = repeats = 1

        def time(self, launch):
            launch()
            if self.calls == 5 and not self.failed:  # once: the sixth row
                self.failed = True
                raise RuntimeError("planted failure")
            self.calls += 1
            return [10.0 * self.calls] * 3

        calls, failed = 0, False

    rows = bench.run(tokens=4, timer=Timer(), device="cpu", modes=("eager",), hidden_size=128,
                     intermediate_size=192, num_attention_heads=2, num_key_value_heads=1,
                     head_dim=64)
    models = ("transformers", "qkv_gemm", "ropelab", "ropelab_op")
    passes = ("forward", "forward_backward")
    assert [(r["model"], r["pass"]) for r in rows] == [(m, p) for m in models for p in passes]
    assert [r["median_us"] for r in rows] == [10.0, 20.0, 30.0, 40.0, 50.0, None, 60.0, 70.0]
    assert [r["vs_transformers"] for r in rows] == [1.0, 1.0, 3.0, 2.0, 5.0, None, 6.0, 3.5]
    assert rows[5]["note"] == "RuntimeError: planted failure" and rows[5]["dtype"] == "float32"
    # the op's share of the patched layer, same pass (none where the layer's row failed)
    assert rows[6]["note"] == "120.0% of the patched layer's forward" and rows[7]["note"] == ""
