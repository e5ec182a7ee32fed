"""Bad input: a clear exception before any kernel runs, and the caller's arrays untouched."""

import numpy as np
import pytest

import ropelab
from ropelab import RopeInputError, kernels

VARIANTS = list(kernels.VARIANTS)


def x32(*shape):
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) / 7.0


CASES = [
    ("wrong dtype", dict(x=x32(4, 8).astype(np.float64)), "dtype float32"),
    ("1-D", dict(x=x32(8)), "ndim 1"),
    ("4-D", dict(x=x32(2, 2, 2, 2)), "ndim 4"),
    ("odd hidden", dict(x=x32(4, 7)), "must be even"),
    ("no head dims", dict(x=x32(4, 0)), "at least one head"),
    # A strided x goes to the rope_rows path (row strides only): a strided last dimension is
    # refused there, or the variant says it is float32 and contiguous only.
    ("non-contiguous", dict(x=x32(4, 16)[:, ::2]), "contiguous"),
    ("transposed", dict(x=x32(8, 4).T), "contiguous"),
    ("not an array", dict(x=[[1.0, 2.0]]), "NumPy array or a CUDA array"),
    ("out shape", dict(out=np.zeros((4, 6), np.float32)), "shape"),
    ("out dtype", dict(out=np.zeros((4, 8), np.float64)), "dtype"),
    ("out strided", dict(out=np.zeros((4, 16), np.float32)[:, ::2]), "C-contiguous"),
    ("positions length", dict(positions=np.arange(3, dtype=np.int32)), r"shape \(4,\)"),
    ("positions float", dict(positions=np.arange(4, dtype=np.float32)), "integers"),
    ("positions below int32", dict(positions=np.array([0, 1, -2**31 - 1, 3], np.int64)), "int32"),
    ("positions huge", dict(positions=np.array([0, 1, 2, 2**31], np.int64)), "int32"),
    ("base", dict(base=1.0), "base"),
    ("base nan", dict(base=float("nan")), "base"),
    ("threads too many", dict(threads_per_block=2048), "1024"),
    ("threads zero", dict(threads_per_block=0), "1..1024"),
    ("rotary odd", dict(rotary_dim=3), "even"),
    ("rotary too big", dict(rotary_dim=10), "must not exceed"),
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("label, kwargs, match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_before_launch(launches, variant, label, kwargs, match):
    kwargs = dict(kwargs)
    x = kwargs.pop("x", x32(4, 8))
    before = x.copy() if isinstance(x, np.ndarray) else None
    with pytest.raises((RopeInputError, TypeError), match=match):
        ropelab.rope(x, variant=variant, **kwargs)
    assert launches == []
    if before is not None:
        np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("variant", VARIANTS)
def test_float16_runs_on_rope_rows_or_is_refused_by_float32_variants(variant):
    # 16-bit x runs on the rope_rows kernel for the default variant and freq_table, and on
    # pair_sincos's and pack4's own 16-bit builds; the others (an explicit "flat" included) say
    # they are float32 and contiguous only, before anything runs, instead of quietly running
    # another kernel.
    x = x32(4, 8).astype(np.float16)
    if variant in ("freq_table", "pair_sincos", "pack4"):
        assert ropelab.rope(x, variant=variant).dtype == np.float16
        return
    with pytest.raises(RopeInputError, match="float32 and contiguous only"):
        ropelab.rope(x, variant=variant)


def test_float16_with_the_default_variant_runs_on_rope_rows():
    x = x32(4, 8).astype(np.float16)
    y = ropelab.rope(x, positions=np.arange(4))
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y[0], x[0])  # position 0 does not rotate
    assert not np.array_equal(y[1:], x[1:])


def test_rotary_dim_of_the_wrong_type_is_a_type_error(launches):
    with pytest.raises(TypeError, match="rotary_dim must be an int"):
        ropelab.rope(x32(4, 8), rotary_dim=4.0)
    assert launches == []


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(RopeInputError, match="flat"):
        ropelab.rope(x32(2, 4), variant="nope")


def test_partial_overlap_of_out_and_x_is_refused(launches):
    buf = x32(5, 8)
    with pytest.raises(RopeInputError, match="overlaps"):
        ropelab.rope(buf[:4], out=buf[1:])
    assert launches == []


@pytest.mark.parametrize("variant", [v for v, m in kernels.VARIANTS.items() if not m.features])
@pytest.mark.parametrize("kwargs, what", [
    (dict(interleave=False), "NeoX"),
    (dict(rotary_dim=4), "partial"),
    (dict(inverse=True), "inverse"),
])
def test_seed_variants_name_what_they_do_not_support(launches, variant, kwargs, what):
    with pytest.raises(RopeInputError, match=what):
        ropelab.rope(x32(4, 8), variant=variant, **kwargs)
    assert launches == []


@pytest.mark.parametrize("variant", [v for v, m in kernels.VARIANTS.items() if "heads" not in m.features])
def test_multi_head_input_needs_a_variant_that_supports_heads(launches, variant):
    with pytest.raises(RopeInputError, match="more than one head"):
        ropelab.rope(x32(4, 2, 8), variant=variant)
    assert launches == []


def test_device_positions_must_be_int32():
    from numba import cuda

    with pytest.raises(RopeInputError, match="int32"):
        ropelab.rope(x32(4, 8), positions=cuda.to_device(np.arange(4, dtype=np.int64)))


def test_device_positions_are_not_read_on_the_host_unless_asked():
    """Reading device positions is a synchronization: by default a kernel without a position
    limit computes what the math says (a negative position rotates backwards)."""
    from numba import cuda

    from ropelab import reference

    x = cuda.to_device(x32(4, 8))
    pos = np.array([0, -1, 2, 3], np.int32)
    got = ropelab.rope(x, positions=cuda.to_device(pos)).copy_to_host()
    np.testing.assert_allclose(got, reference.rope(x32(4, 8), pos), atol=1e-5)
    # One position policy: host positions get what device positions get (no limit here).
    np.testing.assert_allclose(ropelab.rope(x32(4, 8), positions=pos), got, atol=1e-6)
    ropelab.rope(x, positions=cuda.to_device(pos), check_positions=True)  # no limit: valid
    with pytest.raises(RopeInputError, match="position -1 is out of range"):
        ropelab.rope(x, variant="freq_table", cache=True, max_positions=8,
                     positions=cuda.to_device(pos), check_positions=True)


def test_out_of_range_device_positions_of_a_limited_mode_are_flagged(launches):
    """The cos/sin cache cannot serve a position past its end: the kernel writes NaN for that
    token and records the position; check_errors() raises and clears it."""
    from numba import cuda

    ropelab.check_errors()
    pos = cuda.to_device(np.array([0, 1, 99, 3], np.int32))
    out = ropelab.rope(cuda.to_device(x32(4, 8)), variant="freq_table", positions=pos, cache=True,
                       max_positions=16).copy_to_host()
    assert np.isnan(out[2]).all() and np.isfinite(np.delete(out, 2, axis=0)).all()
    with pytest.raises(ropelab.RopeDeviceError, match="99"):
        ropelab.check_errors()
    ropelab.check_errors()  # read and cleared: nothing left


def test_reduce_angle_refuses_host_positions_past_two_to_the_24(launches):
    pos = np.array([0, 1, 2**24 + 1, 3], np.int64)
    with pytest.raises(RopeInputError, match="2\\*\\*24"):
        ropelab.rope(x32(4, 8), variant="freq_table", positions=pos, reduce_angle=True)
    assert launches == []


# Silent accepts an adversarial run found; each must be a clear error before any launch.
TYPE_CASES = [
    (dict(interleave="False"), TypeError, "interleave must be True or False"),
    (dict(interleave=None), TypeError, "interleave must be True or False"),
    (dict(inverse="no"), TypeError, "inverse must be True or False"),
    (dict(fastmath="no"), TypeError, "fastmath must be True or False"),
    (dict(check_positions=1), TypeError, "check_positions must be True or False"),
    (dict(base="10000"), TypeError, "base must be a number"),
    (dict(base=True), TypeError, "base must be a number"),
    (dict(rotary_dim=4.0), TypeError, "rotary_dim must be an int"),
    (dict(threads_per_block=256.0), TypeError, "threads_per_block must be an int"),
    (dict(stream="0"), TypeError, "stream must be"),
    (dict(stream=True), TypeError, "stream must be"),
    (dict(variant=3), TypeError, "variant must be a string"),  # None is the default (flat or rope_rows)
    (dict(variant="pair_sincos", chunk=4), TypeError,
     "variant 'pair_sincos' has no option chunk; its options .*pairs_per_thread=4"),
    (dict(variant="flat", cache=True), TypeError, "variant 'flat' takes no options"),
    (dict(variant="freq_table", cache=True, max_positions=10.0), TypeError,
     "max_positions must be an int"),
    (dict(variant="freq_table", cache="yes", max_positions=10), TypeError,
     "cache must be True or False"),
    (dict(variant="pair_sincos", pairs_per_thread=2.0), TypeError, "pairs_per_thread must be an int"),
]


@pytest.mark.parametrize("kwargs, exc, match", TYPE_CASES, ids=[str(c[0]) for c in TYPE_CASES])
def test_wrong_types_are_refused_before_launch(launches, kwargs, exc, match):
    x = x32(4, 8)
    before = x.copy()
    with pytest.raises(exc, match=match):
        ropelab.rope(x, **kwargs)
    assert launches == []
    np.testing.assert_array_equal(x, before)


def test_read_only_out_is_refused_before_launch(launches):
    x = x32(4, 8)
    out = np.zeros_like(x)
    out.flags.writeable = False
    with pytest.raises(RopeInputError, match="read-only"):
        ropelab.rope(x, out=out)
    x.flags.writeable = False
    with pytest.raises(RopeInputError, match="read-only"):
        ropelab.rope(x, out=x)  # in place on a read-only x
    assert launches == []
    assert not out.any()


def test_out_overlapping_positions_is_refused(launches):
    from numba import cuda

    buf = cuda.to_device(np.zeros(4 * 8 + 4, np.float32))
    x = cuda.to_device(x32(4, 8))
    out = buf[:32].reshape(4, 8)
    pos = buf[30:34].view(np.int32)
    with pytest.raises(RopeInputError, match="overlaps positions"):
        ropelab.rope(x, out=out, positions=pos)
    assert launches == []


def test_mixing_host_and_device_arrays_is_refused():
    from numba import cuda

    with pytest.raises(RopeInputError, match="both"):
        ropelab.rope(x32(4, 8), out=cuda.device_array((4, 8), np.float32))
