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
    ("float16", dict(x=x32(4, 8).astype(np.float16)), "dtype"),
    ("1-D", dict(x=x32(8)), "ndim 1"),
    ("4-D", dict(x=x32(2, 2, 2, 2)), "ndim 4"),
    ("odd hidden", dict(x=x32(4, 7)), "must be even"),
    ("empty", dict(x=x32(0, 8)), "empty"),
    ("non-contiguous", dict(x=x32(4, 16)[:, ::2]), "C-contiguous"),
    ("transposed", dict(x=x32(8, 4).T), "C-contiguous"),
    ("not an array", dict(x=[[1.0, 2.0]]), "NumPy array or a CUDA array"),
    ("out shape", dict(out=np.zeros((4, 6), np.float32)), "shape"),
    ("out dtype", dict(out=np.zeros((4, 8), np.float64)), "dtype"),
    ("out strided", dict(out=np.zeros((4, 16), np.float32)[:, ::2]), "C-contiguous"),
    ("positions length", dict(positions=np.arange(3, dtype=np.int32)), r"shape \(4,\)"),
    ("positions float", dict(positions=np.arange(4, dtype=np.float32)), "integers"),
    ("positions negative", dict(positions=np.array([0, 1, -2, 3], np.int32)), ">= 0"),
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


def test_rotary_dim_of_the_wrong_type_is_a_type_error(launches):
    with pytest.raises(TypeError, match="rotary_dim must be an int"):
        ropelab.rope(x32(4, 8), rotary_dim=4.0)
    assert launches == []


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(ValueError, match="flat"):
        ropelab.rope(x32(2, 4), variant="nope")


def test_partial_overlap_of_out_and_x_is_refused(launches):
    buf = x32(5, 8)
    with pytest.raises(RopeInputError, match="overlaps"):
        ropelab.rope(buf[:4], out=buf[1:])
    assert launches == []


@pytest.mark.parametrize("variant", [v for v, m in kernels.VARIANTS.items() if not m.FEATURES])
@pytest.mark.parametrize("kwargs, what", [
    (dict(interleave=False), "NeoX"),
    (dict(rotary_dim=4), "partial"),
    (dict(inverse=True), "inverse"),
])
def test_seed_variants_name_what_they_do_not_support(launches, variant, kwargs, what):
    with pytest.raises(RopeInputError, match=what):
        ropelab.rope(x32(4, 8), variant=variant, **kwargs)
    assert launches == []


@pytest.mark.parametrize("variant", [v for v, m in kernels.VARIANTS.items() if "heads" not in m.FEATURES])
def test_multi_head_input_needs_a_variant_that_supports_heads(launches, variant):
    with pytest.raises(RopeInputError, match="more than one head"):
        ropelab.rope(x32(4, 2, 8), variant=variant)
    assert launches == []


def test_device_positions_must_be_int32():
    from numba import cuda

    with pytest.raises(RopeInputError, match="int32"):
        ropelab.rope(x32(4, 8), positions=cuda.to_device(np.arange(4, dtype=np.int64)))


def test_device_positions_are_checked_for_negatives():
    from numba import cuda

    with pytest.raises(RopeInputError, match=">= 0"):
        ropelab.rope(x32(4, 8), positions=cuda.to_device(np.array([0, -1, 2, 3], np.int32)))


def test_mixing_host_and_device_arrays_is_refused():
    from numba import cuda

    with pytest.raises(RopeInputError, match="both"):
        ropelab.rope(x32(4, 8), out=cuda.device_array((4, 8), np.float32))
