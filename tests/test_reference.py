"""Self-checks of the float64 reference: the judge has to be right before it judges."""

import numpy as np
import pytest

from ropelab import reference as R


def test_inv_freq_matches_the_formula_by_hand():
    f = R.inv_freq(8, base=10000.0)
    assert f.dtype == np.float64
    np.testing.assert_allclose(f, [1.0, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75], rtol=1e-15)


@pytest.mark.parametrize("bad", [0, -2, 3])
def test_inv_freq_rejects_odd_or_non_positive_dims(bad):
    with pytest.raises(ValueError, match="rotary_dim"):
        R.inv_freq(bad)


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("shape", [(5, 8), (4, 3, 16)])
def test_real_and_complex_formulations_agree(rng, interleave, shape):
    x = rng.standard_normal(shape)
    pos = rng.integers(0, 10_000, shape[0])
    np.testing.assert_allclose(
        R.rope(x, pos, interleave=interleave), R.rope_complex(x, pos, interleave=interleave),
        rtol=0, atol=1e-12,
    )


def test_interleaved_layout_pairs_adjacent_elements():
    # One pair, position 1, frequency 1: a rotation by exactly 1 radian.
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    out = R.rope(x)
    np.testing.assert_allclose(out[0], [0.0, 0.0])
    np.testing.assert_allclose(out[1], [np.cos(1.0), np.sin(1.0)], rtol=1e-15)


def test_half_split_layout_pairs_i_with_i_plus_half():
    x = np.zeros((2, 4))
    x[1, 0] = 1.0  # partner of index 0 is index 2 in the NeoX layout
    out = R.rope(x, interleave=False)
    np.testing.assert_allclose(out[1], [np.cos(1.0), 0.0, np.sin(1.0), 0.0], atol=1e-15)


@pytest.mark.parametrize("interleave", [True, False])
def test_rotation_keeps_each_pair_norm(rng, interleave):
    x = rng.standard_normal((6, 2, 12))
    out = R.rope(x, rng.integers(0, 5000, 6), interleave=interleave)
    a, b = R.pair_indices(12, interleave)
    np.testing.assert_allclose(np.hypot(out[..., a], out[..., b]), np.hypot(x[..., a], x[..., b]),
                               rtol=1e-12)


@pytest.mark.parametrize("interleave", [True, False])
def test_inverse_undoes_forward(rng, interleave):
    x = rng.standard_normal((7, 3, 10))
    pos = rng.integers(0, 100_000, 7)
    kw = dict(interleave=interleave, rotary_dim=6)
    back = R.rope(R.rope(x, pos, **kw), pos, inverse=True, **kw)
    np.testing.assert_allclose(back, x, atol=1e-12)
    assert not np.allclose(R.rope(x, pos, **kw), x)


def test_partial_rotary_passes_the_tail_through_unchanged(rng):
    x = rng.standard_normal((4, 2, 16))
    out = R.rope(x, np.arange(4) + 3, rotary_dim=8)
    assert np.array_equal(out[..., 8:], x[..., 8:])
    assert not np.allclose(out[..., :8], x[..., :8])


@pytest.mark.parametrize("interleave", [True, False])
def test_scores_depend_only_on_relative_position(rng, interleave):
    q = rng.standard_normal((1, 32))
    k = rng.standard_normal((1, 32))

    def score(m, n):
        qm = R.rope(q, np.array([m]), interleave=interleave)
        kn = R.rope(k, np.array([n]), interleave=interleave)
        return float(qm[0] @ kn[0])

    for m, n in [(5, 2), (105, 102), (10_003, 10_000)]:
        assert score(m, n) == pytest.approx(score(3, 0), abs=1e-9)
    assert score(3, 0) != pytest.approx(score(4, 0), abs=1e-3)


def test_two_d_input_is_one_head_of_the_whole_row(rng):
    x = rng.standard_normal((5, 12))
    pos = rng.integers(0, 50, 5)
    np.testing.assert_array_equal(R.rope(x, pos), R.rope(x[:, None, :], pos)[:, 0, :])


def test_attention_factor_scales_only_the_rotated_part(rng):
    x = rng.standard_normal((3, 8))
    plain = R.rope(x, rotary_dim=4)
    scaled = R.rope(x, rotary_dim=4, attention_factor=1.5)
    np.testing.assert_allclose(scaled[:, :4], 1.5 * plain[:, :4], rtol=1e-14)
    np.testing.assert_array_equal(scaled[:, 4:], x[:, 4:])


@pytest.mark.parametrize("kwargs, match", [
    (dict(rotary_dim=5), "rotary_dim"),
    (dict(rotary_dim=10), "rotary_dim"),
    (dict(positions=np.arange(3)), "positions"),
])
def test_reference_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        R.rope(np.zeros((4, 8)), **kwargs)
