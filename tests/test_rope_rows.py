"""The rope_rows path: 16-bit storage, row strides, q+k in one call, a user cos/sin cache.

Every result is judged against the float64 reference (ropelab.reference) with the 16-bit error
model of ropelab.tolerance; a planted error of 10x the bound must fail the same check.
Budget: a few seconds per case on the simulator (tiny shapes).
"""

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import bf16, reference, tolerance
from ropelab.errors import RopeDeviceError, RopeInputError
from ropelab.kernels import rope_rows_host

STORAGES = ("float32", "float16", "bfloat16")


def make(rng, shape, storage):
    x = rng.standard_normal(shape).astype(np.float32)
    if storage == "bfloat16":
        return bf16.from_float32(x)
    return x.astype(storage)


def as_f64(a, storage):
    a = np.asarray(a)
    f32 = bf16.to_float32(a) if storage == "bfloat16" else a.astype(np.float32)
    return f32.astype(np.float64)


def check(got, want, storage, x_abs_max, angle=1e4, af=1.0):
    """The kernel's output against the judge, within the 16-bit error model; the bound back."""
    bound = tolerance.rows_atol(x_abs_max, angle, storage, attention_factor=af)
    err = np.nanmax(np.abs(got - want))
    assert err <= bound, (storage, err, bound)
    return bound


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("interleave", [True, False])
def test_rope_qk_slices_of_packed_qkv_gqa(rng, storage, interleave):
    tokens, hd, hq, hk, hv = 3, 64, 4, 2, 2
    qkv = make(rng, (tokens, (hq + hk + hv) * hd), storage)
    before = qkv.copy()
    q, k = qkv[:, :hq * hd], qkv[:, hq * hd:(hq + hk) * hd]
    pos = np.array([3, 0, 1000])
    want_q = reference.rope(as_f64(q, storage).reshape(tokens, hq, hd), pos, interleave=interleave)
    want_k = reference.rope(as_f64(k, storage).reshape(tokens, hk, hd), pos, interleave=interleave)
    ropelab.rope_qk(q, k, positions=pos, head_dim=hd, interleave=interleave)
    x_max = np.abs(as_f64(before, storage)).max()
    check(as_f64(q, storage).reshape(want_q.shape), want_q, storage, x_max)
    check(as_f64(k, storage).reshape(want_k.shape), want_k, storage, x_max)
    # V untouched
    np.testing.assert_array_equal(qkv[:, (hq + hk) * hd:], before[:, (hq + hk) * hd:])


@pytest.mark.parametrize("storage", ["bfloat16", "float32"])
def test_rope_qk_three_d_views_partial_rotary_uneven_stride(rng, storage):
    # Row stride of 7 heads for 3 q heads + 1 k head: no vector path (stride % 16 bytes != 0 for
    # bf16 at head_dim 40... and a head_dim not a multiple of 16).
    tokens, hd = 5, 40
    buf = make(rng, (tokens, 7, hd), storage)
    q, k = buf[:, 0:3, :], buf[:, 4:5, :]
    before = buf.copy()
    pos = np.arange(tokens) * 7
    want_q = reference.rope(as_f64(q, storage), pos, rotary_dim=24, interleave=False)
    want_k = reference.rope(as_f64(k, storage), pos, rotary_dim=24, interleave=False)
    ropelab.rope_qk(q, k, positions=pos, head_dim=hd, rotary_dim=24, interleave=False)
    x_max = np.abs(as_f64(before, storage)).max()
    check(as_f64(q, storage), want_q, storage, x_max)
    check(as_f64(k, storage), want_k, storage, x_max)
    np.testing.assert_array_equal(buf[:, 3], before[:, 3])
    np.testing.assert_array_equal(buf[:, 5:], before[:, 5:])


@pytest.mark.parametrize("storage", ["float16", "bfloat16"])
@pytest.mark.parametrize("interleave", [True, False])
def test_rope_16bit_matches_the_judge_with_partial_rotary_and_inverse(rng, storage, interleave):
    x = make(rng, (4, 2, 64), storage)
    pos = np.array([0, 1, 99, 4095])
    want = reference.rope(as_f64(x, storage), pos, rotary_dim=32, interleave=interleave,
                          inverse=True)
    got = ropelab.rope(x, positions=pos, rotary_dim=32, interleave=interleave, inverse=True)
    assert got.dtype == x.dtype and got.shape == x.shape
    check(as_f64(got, storage), want, storage, np.abs(as_f64(x, storage)).max())
    # pass-through dims are copied exactly
    np.testing.assert_array_equal(np.asarray(got)[..., 32:], x[..., 32:])


def test_rope_on_a_column_slice_without_copy_and_out_equal_x(rng):
    buf = make(rng, (3, 96), "float32")
    x = buf[:, 16:80]  # row stride 96, width 64
    want = reference.rope(x.astype(np.float64), np.arange(3))
    out = ropelab.rope(x, out=x)
    assert out is x
    np.testing.assert_allclose(buf[:, 16:80], want, atol=1e-5)


def test_scaling_reaches_the_rows_kernel(rng):
    x = make(rng, (3, 1, 32), "bfloat16")
    s = ropelab.scaling.YaRN(factor=4.0, original_max_positions=64)
    freqs, af = ropelab.scaling.resolve(s, rotary_dim=32, base=10000.0)
    want = reference.rope(as_f64(x, "bfloat16"), np.array([0, 50, 200]), freqs=freqs,
                          attention_factor=af)
    got = ropelab.rope(x, positions=np.array([0, 50, 200]), scaling=s)
    check(as_f64(got, "bfloat16"), want, "bfloat16", np.abs(as_f64(x, "bfloat16")).max(), af=af)


@pytest.mark.parametrize("storage", ["float32", "bfloat16"])
def test_user_cos_sin_cache_rows_are_indexed_by_position(rng, storage):
    # A cache unrelated to any base: each row is an arbitrary angle per pair.
    max_pos, rot = 9, 16
    theta = rng.uniform(-3, 3, (max_pos, rot // 2))
    cache = np.concatenate([np.cos(theta), np.sin(theta)], axis=1).astype(np.float32)
    q = make(rng, (4, 2 * 16), storage)
    k = make(rng, (4, 16), storage)
    pos = np.array([8, 0, 3, 3])
    q0, k0 = as_f64(q, storage).reshape(4, 2, 16), as_f64(k, storage).reshape(4, 1, 16)

    def judge(x):
        out = x.copy()
        c, s = np.cos(theta[pos])[:, None], np.sin(theta[pos])[:, None]
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out

    ropelab.rope_qk(q, k, positions=pos, head_dim=16, cos_sin_cache=cache)
    check(as_f64(q, storage).reshape(4, 2, 16), judge(q0), storage, np.abs(q0).max())
    check(as_f64(k, storage).reshape(4, 1, 16), judge(k0), storage, np.abs(k0).max())


def test_built_cache_matches_the_judge_at_long_positions(rng):
    x = make(rng, (2, 1, 64), "float32")
    pos = np.array([70000, 131071])
    got = ropelab.rope(x, positions=pos, variant="rope_rows", cache=True, max_positions=131072)
    np.testing.assert_allclose(got, reference.rope(x.astype(np.float64), pos), atol=2e-6)


def test_out_of_range_host_positions_are_refused_before_anything_runs(rng):
    cache = np.ones((4, 8), np.float32)
    q, k = make(rng, (2, 8), "float16"), make(rng, (2, 8), "float16")
    before = q.copy()
    with pytest.raises(RopeInputError, match="out of range"):
        ropelab.rope_qk(q, k, positions=np.array([0, 4]), head_dim=8, cos_sin_cache=cache)
    np.testing.assert_array_equal(q, before)


def test_out_of_range_device_position_writes_nan_and_sets_the_error_word(rng):
    ropelab.check_errors()  # clear
    theta = rng.uniform(-3, 3, (4, 4))
    cache = cuda.to_device(np.concatenate([np.cos(theta), np.sin(theta)], 1).astype(np.float32))
    x = cuda.to_device(make(rng, (3, 8), "float32"))
    pos = cuda.to_device(np.array([1, 7, 2], np.int32))
    got = ropelab.rope(x, positions=pos, cos_sin_cache=cache).copy_to_host()
    assert np.isnan(got[1]).all() and np.isfinite(got[[0, 2]]).all()
    with pytest.raises(RopeDeviceError, match="7"):
        ropelab.check_errors()


@pytest.mark.parametrize("bad, error, match", [
    (dict(cos_sin_cache=np.ones((4, 6), np.float32)), RopeInputError, "max_pos, 8"),
    (dict(cos_sin_cache=np.ones((4, 8), np.float64)), TypeError, "float32"),
    (dict(cos_sin_cache=np.ones((4, 8), np.float32), scaling=ropelab.scaling.Linear(2.0)),
     RopeInputError, "exclude"),
    (dict(head_dim=6), RopeInputError, "multiple of head_dim"),
    (dict(cache=True), RopeInputError, "max_positions"),
    (dict(heads_per_thread=3), RopeInputError, "heads_per_thread"),
])
def test_bad_arguments_raise_before_launch(rng, bad, error, match):
    q, k = make(rng, (2, 16), "float32"), make(rng, (2, 8), "float32")
    before = q.copy()
    kwargs = dict(positions=np.array([0, 1]), head_dim=8)
    kwargs.update(bad)
    with pytest.raises(error, match=match):
        ropelab.rope_qk(q, k, **kwargs)
    np.testing.assert_array_equal(q, before)


def test_bad_strides_and_dtypes_are_refused(rng):
    x = make(rng, (4, 32), "float32")
    with pytest.raises(RopeInputError, match="last dimension"):
        ropelab.rope(x[:, ::2])
    with pytest.raises(RopeInputError, match="back to back"):
        ropelab.rope_qk(x.reshape(4, 2, 16)[:, :, :8], x[:, :8], positions=np.arange(4),
                        head_dim=8)
    with pytest.raises(TypeError, match="same dtype"):
        ropelab.rope_qk(x[:, :16], x[:, 16:].astype(np.float16), positions=np.arange(4),
                        head_dim=8)
    with pytest.raises(RopeInputError, match="float32 and contiguous only"):
        ropelab.rope(x.astype(np.float16), variant="flat")  # pack4 now takes 16-bit
    with pytest.raises(TypeError, match="float32, float16, or bfloat16"):
        ropelab.rope_qk(x.astype(np.float64), x.astype(np.float64), positions=np.arange(4),
                        head_dim=8)


def test_tolerance_bound_catches_a_planted_10x_error(rng):
    x = make(rng, (3, 1, 32), "bfloat16")
    want = reference.rope(as_f64(x, "bfloat16"), np.arange(3))
    got = as_f64(ropelab.rope(x), "bfloat16")
    bound = check(got, want, "bfloat16", np.abs(as_f64(x, "bfloat16")).max())
    planted = got.copy()
    planted[1, 0, 3] += 10 * bound
    with pytest.raises(AssertionError):
        check(planted, want, "bfloat16", np.abs(as_f64(x, "bfloat16")).max())


def test_run_fits_and_pick_run_choose_the_measured_access():
    # 16-bit: 64-bit runs of 4 first (they timed faster than 128-bit runs on the H200),
    # 128-bit when asked for; float32: 128-bit runs of 4.
    p = rope_rows_host.RowsProblem(1, 1, 0, 128, 128, True, "bfloat16", 128, 128)
    assert rope_rows_host.pick_run(p, True) == (4, 8)
    assert rope_rows_host.pick_run(p, True, requested=8) == (8, 16)
    assert rope_rows_host.pick_run(p, False) == (4, 0)
    f32 = rope_rows_host.RowsProblem(1, 1, 0, 128, 128, True, "float32", 128, 128)
    assert rope_rows_host.pick_run(f32, True) == (4, 16)
    neox = rope_rows_host.RowsProblem(1, 1, 0, 80, 40, False, "bfloat16", 80, 80)
    assert rope_rows_host.pick_run(neox, True) == (4, 8)  # 20 pairs: runs of 4, 8-byte accesses
    odd = rope_rows_host.RowsProblem(1, 1, 0, 6, 6, False, "float32", 6, 6)
    assert rope_rows_host.pick_run(odd, True) == (1, 0)


@pytest.mark.parametrize("heads_per_thread", [1, 2, 4])
def test_uneven_shapes_stay_in_bounds(rng, heads_per_thread):
    # 37 tokens (a partial last block), 3 + 2 heads (a partial last head group), head_dim 96
    # (6 lanes a head): the simulator raises IndexError on any access past an array.
    tokens, hd, hq, hk = 37, 96, 3, 2
    qkv = make(rng, (tokens, (hq + hk + 1) * hd), "bfloat16")
    before = qkv.copy()
    q, k = qkv[:, :hq * hd], qkv[:, hq * hd:(hq + hk) * hd]
    pos = rng.integers(0, 500, tokens)
    want_q = reference.rope(as_f64(q, "bfloat16").reshape(tokens, hq, hd), pos)
    want_k = reference.rope(as_f64(k, "bfloat16").reshape(tokens, hk, hd), pos)
    ropelab.rope_qk(q, k, positions=pos, head_dim=hd, heads_per_thread=heads_per_thread)
    x_max = np.abs(as_f64(before, "bfloat16")).max()
    check(as_f64(q, "bfloat16").reshape(want_q.shape), want_q, "bfloat16", x_max)
    check(as_f64(k, "bfloat16").reshape(want_k.shape), want_k, "bfloat16", x_max)
    np.testing.assert_array_equal(qkv[:, (hq + hk) * hd:], before[:, (hq + hk) * hd:])


def test_check_positions_reads_device_positions_before_launch(rng):
    cache = cuda.to_device(np.ones((4, 8), np.float32))
    x = cuda.to_device(make(rng, (2, 8), "float16"))
    before = x.copy_to_host()
    with pytest.raises(RopeInputError, match="out of range"):
        ropelab.rope(x, positions=cuda.to_device(np.array([0, 5], np.int32)), out=x,
                     cos_sin_cache=cache, check_positions=True)
    np.testing.assert_array_equal(x.copy_to_host(), before)
    with pytest.raises(RopeInputError, match="reduce_angle"):
        ropelab.rope(make(rng, (2, 8), "bfloat16"), variant="freq_table", reduce_angle=True)
