"""FLUX and M-RoPE cos/sin tables (ropelab.tables) against the published formulas, written
independently in ropelab.reference, and used through rope_qk.  Budget: about 1 s."""

import numpy as np
import pytest

import ropelab
from ropelab import reference, tables


def _halves(cache):
    half = cache.shape[1] // 2
    return cache[:, :half].astype(np.float64), cache[:, half:].astype(np.float64)


def test_flux_cache_matches_diffusers_formula(rng):
    ids = np.stack([np.zeros(50), rng.integers(0, 64, 50), rng.integers(0, 64, 50)], 1)
    cos, sin = _halves(tables.flux_cache(ids))
    ref_cos, ref_sin = reference.flux_cos_sin(ids)
    # the reference repeats each pair's value for both elements: compare per pair
    np.testing.assert_allclose(cos, ref_cos[:, 0::2], atol=6e-8, rtol=0)
    np.testing.assert_allclose(sin, ref_sin[:, 0::2], atol=6e-8, rtol=0)


def test_mrope_cache_matches_transformers_formula(rng):
    pos = rng.integers(0, 300, (3, 40))
    cos, sin = _halves(tables.mrope_cache(pos, 128, (16, 24, 24)))
    ref_cos, ref_sin = reference.mrope_cos_sin(pos, 128, (16, 24, 24))
    np.testing.assert_allclose(cos, ref_cos[:, :64], atol=6e-8, rtol=0)
    np.testing.assert_allclose(sin, ref_sin[:, :64], atol=6e-8, rtol=0)
    # NeoX layout: the second half of the head repeats the first half's angles
    np.testing.assert_array_equal(ref_cos[:, :64], ref_cos[:, 64:])


def test_mrope_through_rope_qk_equals_the_models_rotation(rng):
    tokens, hd = 6, 32
    pos = rng.integers(0, 50, (3, tokens))
    cache = tables.mrope_cache(pos, hd, (4, 6, 6))
    q = rng.standard_normal((tokens, 2 * hd)).astype(np.float32)
    k = rng.standard_normal((tokens, hd)).astype(np.float32)
    q0 = q.reshape(tokens, 2, hd).astype(np.float64)
    cos, sin = reference.mrope_cos_sin(pos, hd, (4, 6, 6))
    rot = np.concatenate([-q0[..., hd // 2:], q0[..., :hd // 2]], -1)  # rotate_half
    want = q0 * cos[:, None] + rot * sin[:, None]
    ropelab.rope_qk(q, k, positions=np.arange(tokens), head_dim=hd, interleave=False,
                    cos_sin_cache=cache)
    np.testing.assert_allclose(q.reshape(tokens, 2, hd), want, atol=2e-6)


def test_bad_table_arguments_are_refused():
    with pytest.raises(ValueError, match="sum to head_dim"):
        tables.mrope_cache(np.zeros((3, 2)), 128, (16, 24, 16))
    with pytest.raises(ValueError, match="ids must be"):
        tables.flux_cache(np.zeros((4, 2)))
