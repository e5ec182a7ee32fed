"""fused_qknorm_rope with a user cos_sin_cache ([max_pos, rotary_dim], cos half then sin half):
judged against the float64 reference with the user's angles, equal to the built cache=True
path, and the out-of-range policy.  Budget: a few seconds (head_dim 64, a few tokens)."""

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import bf16, reference, tables
from ropelab.errors import RopeDeviceError, RopeInputError
from ropelab.kernels.freq_table import cos_sin_rows

HD = 64


def _args(rng, tokens, storage="float32", heads=(2, 1, 1)):
    x = rng.standard_normal((tokens, sum(heads) * HD)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, (2, HD)).astype(np.float32)
    if storage == "bfloat16":
        x, w = bf16.from_float32(x), bf16.from_float32(w)
    return x, w[0], w[1]


def _f64(a, storage):
    return (bf16.to_float32(a) if storage == "bfloat16" else a).astype(np.float64)


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
def test_user_cache_equals_the_built_cache_and_the_judge(rng, interleave, storage):
    tokens = 3
    qkv, qw, kw = _args(rng, tokens, storage)
    pos = np.array([5, 0, 11], np.int32)
    kw_ = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=HD, q_weight=qw,
               k_weight=kw, positions=pos, interleave=interleave)
    user = cos_sin_rows(reference.inv_freq(HD, 10000.0), 12)
    a = ropelab.fused_qknorm_rope(qkv.copy(), cos_sin_cache=user, **kw_)
    b = ropelab.fused_qknorm_rope(qkv.copy(), cache=True, max_positions=12, **kw_)
    np.testing.assert_array_equal(a, b)  # one cache layout, one kernel path
    want = reference.fused_qknorm_rope(_f64(qkv, storage), **{**kw_, "q_weight": _f64(qw, storage),
                                                               "k_weight": _f64(kw, storage)})
    atol = 1e-5 if storage == "float32" else 2.0**-8 * 4 * np.abs(want).max()
    np.testing.assert_allclose(_f64(a, storage), want, atol=atol)


def test_user_cache_with_flux_rows_rotates_by_the_tables_angles(rng):
    tokens = 4
    ids = np.stack([np.zeros(tokens), np.arange(tokens), np.arange(tokens)[::-1]], 1)
    table = tables.flux_cache(ids, axes_dim=(8, 28, 28))  # rotary_dim 64
    qkv, qw, kw = _args(rng, tokens)
    out = ropelab.fused_qknorm_rope(qkv.copy(), num_heads_q=2, num_heads_k=1, num_heads_v=1,
                                    head_dim=HD, q_weight=qw, k_weight=kw,
                                    positions=np.arange(tokens, dtype=np.int32),
                                    cos_sin_cache=table)
    normed = reference.fused_qknorm_rope(qkv.astype(np.float64), num_heads_q=2, num_heads_k=1,
                                         num_heads_v=1, head_dim=HD, q_weight=qw, k_weight=kw,
                                         positions=np.zeros(tokens, np.int32))  # norm only
    cos, sin = reference.flux_cos_sin(ids, axes_dim=(8, 28, 28))
    h = normed[:, :3 * HD].reshape(tokens, 3, HD)
    a, b = h[..., 0::2], h[..., 1::2]
    c, s = cos[:, None, 0::2], sin[:, None, 0::2]
    want = h.copy()
    want[..., 0::2], want[..., 1::2] = a * c - b * s, a * s + b * c
    np.testing.assert_allclose(out[:, :3 * HD].reshape(tokens, 3, HD), want, atol=2e-5)


def test_bad_user_cache_is_refused_before_anything_runs(rng):
    qkv, qw, kw = _args(rng, 2)
    before = qkv.copy()
    kw_ = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=HD, q_weight=qw,
               k_weight=kw, positions=np.array([0, 3], np.int32))
    with pytest.raises(RopeInputError, match="max_pos, 64"):
        ropelab.fused_qknorm_rope(qkv, cos_sin_cache=np.ones((4, 32), np.float32), **kw_)
    with pytest.raises(RopeInputError, match="excludes"):
        ropelab.fused_qknorm_rope(qkv, cos_sin_cache=np.ones((4, 64), np.float32), cache=True,
                                  max_positions=4, **kw_)
    with pytest.raises(RopeInputError, match="out of range"):
        ropelab.fused_qknorm_rope(qkv, cos_sin_cache=np.ones((3, 64), np.float32), **kw_)
    np.testing.assert_array_equal(qkv, before)


def test_device_position_past_the_user_cache_is_nan_and_reported(rng):
    ropelab.check_errors()
    qkv, qw, kw = _args(rng, 2)
    d = cuda.to_device(qkv)
    ropelab.fused_qknorm_rope(d, num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=HD,
                              q_weight=cuda.to_device(qw), k_weight=cuda.to_device(kw),
                              positions=cuda.to_device(np.array([1, 9], np.int32)),
                              cos_sin_cache=cuda.to_device(np.ones((4, 64), np.float32)))
    out = d.copy_to_host()
    assert np.isnan(out[1, :3 * HD]).all() and not np.isnan(out[0]).any()
    with pytest.raises(RopeDeviceError, match="9"):
        ropelab.check_errors()
