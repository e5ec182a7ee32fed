"""Every kernel variant against the float64 reference, on shapes that do not fill whole blocks.

Runs on the simulator without a GPU (where the math is float64, so it checks indexing and
formulas) and on a GPU when one is present (where it also checks float32 precision).
"""

import numpy as np
import pytest

from reference_check import assert_matches_reference as check

import ropelab
from ropelab import kernels, reference

VARIANTS = list(kernels.VARIANTS)
# tokens x hidden: 1 and 3 tokens, 257 and 67 (not multiples of any block), widths from one
# pair up to 2048 (1024 pairs: the largest one-pass block2d row).  The simulator runs ~10^4
# threads a second, so the widest rows go with few tokens: 67 x 130 (65 pairs, an odd count)
# still spans many blocks of every 1-D grid with a partial last block (flat: 4355 threads in 18
# blocks of 256) and rows that start at varying offsets inside a block, for a quarter of the
# threads 257 x 130 took.
SHAPES = [(1, 2), (3, 6), (257, 6), (1, 130), (3, 130), (67, 130), (1, 2048), (3, 2048)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("tokens, hidden", SHAPES)
def test_variant_matches_reference(rng, variant, tokens, hidden):
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    pos = rng.integers(0, 4096, tokens).astype(np.int32)
    got = ropelab.rope(x, variant=variant, positions=pos)
    assert got.shape == x.shape and got.dtype == np.float32
    check(x, got, pos)


@pytest.mark.parametrize("variant", VARIANTS)
def test_default_positions_are_row_numbers(rng, variant):
    x = rng.standard_normal((9, 10)).astype(np.float32)
    got = ropelab.rope(x, variant=variant)
    check(x, got, np.arange(9))
    np.testing.assert_array_equal(got[0], x[0])  # position 0 is the identity


@pytest.mark.parametrize("variant", VARIANTS)
def test_precise_math_path_matches_reference(rng, variant):
    x = rng.standard_normal((5, 64)).astype(np.float32)
    pos = rng.integers(0, 2000, 5).astype(np.int32)
    check(x, ropelab.rope(x, variant=variant, positions=pos, fastmath=False), pos, fastmath=False)


@pytest.mark.parametrize("variant", VARIANTS)
def test_three_d_input_with_one_head(rng, variant):
    x = rng.standard_normal((4, 1, 18)).astype(np.float32)
    pos = rng.integers(0, 100, 4).astype(np.int32)
    got = ropelab.rope(x, variant=variant, positions=pos)
    assert got.shape == (4, 1, 18)
    check(x, got, pos)


@pytest.mark.parametrize("variant", VARIANTS)
def test_out_argument_and_in_place(rng, variant):
    x = rng.standard_normal((6, 20)).astype(np.float32)
    pos = rng.integers(0, 300, 6).astype(np.int32)
    expected = ropelab.rope(x, variant=variant, positions=pos)
    out = np.full_like(x, np.nan)
    assert ropelab.rope(x, variant=variant, positions=pos, out=out) is out
    np.testing.assert_array_equal(out, expected)
    y = x.copy()
    ropelab.rope(y, variant=variant, positions=pos, out=y)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_arrays_in_device_array_out(rng, variant):
    from numba import cuda

    x = rng.standard_normal((5, 12)).astype(np.float32)
    pos = rng.integers(0, 300, 5).astype(np.int32)
    d_out = ropelab.rope(cuda.to_device(x), variant=variant, positions=cuda.to_device(pos))
    assert not isinstance(d_out, np.ndarray)
    np.testing.assert_array_equal(d_out.copy_to_host(),
                                  ropelab.rope(x, variant=variant, positions=pos))


@pytest.mark.parametrize("variant", VARIANTS)
def test_in_place_on_device_leaves_neighbours_alone(rng, variant):
    """x is a window into a larger device buffer: the kernel may touch the window only."""
    from numba import cuda

    tokens, hidden, pad = 3, 10, 7
    buf = rng.standard_normal(tokens * hidden + 2 * pad).astype(np.float32)
    d_buf = cuda.to_device(buf)
    window = d_buf[pad:pad + tokens * hidden].reshape(tokens, hidden)
    ropelab.rope(window, variant=variant, out=window)
    after = d_buf.copy_to_host()
    np.testing.assert_array_equal(after[:pad], buf[:pad])
    np.testing.assert_array_equal(after[-pad:], buf[-pad:])
    np.testing.assert_array_equal(after[pad:-pad].reshape(tokens, hidden),
                                  ropelab.rope(buf[pad:-pad].reshape(tokens, hidden), variant=variant))


@pytest.mark.parametrize("variant", VARIANTS)
def test_odd_block_sizes_and_wide_rows(rng, variant):
    x = rng.standard_normal((3, 70)).astype(np.float32)
    pos = rng.integers(0, 500, 3).astype(np.int32)
    for threads in (1, 33, 96):
        check(x, ropelab.rope(x, variant=variant, positions=pos, threads_per_block=threads), pos)


def test_block2d_rows_wider_than_one_block(rng):
    # 1100 pairs > 1024 threads: the seed's v2 cannot launch this; ours strides.
    x = rng.standard_normal((2, 2200)).astype(np.float32)
    pos = np.array([3, 4000], np.int32)
    from ropelab.kernels import block2d
    from ropelab.problem import RopeProblem

    assert block2d.launch_config(RopeProblem(2, 1, 2200, 2200))[1] == 1024
    check(x, ropelab.rope(x, variant="block2d", positions=pos), pos)


def test_pack4_uses_float4_only_when_rows_are_whole_quads_and_aligned(rng):
    from numba import cuda

    from ropelab.kernels import pack4
    from ropelab.problem import RopeProblem

    even = RopeProblem(3, 1, 12, 12)
    odd = RopeProblem(3, 1, 10, 10)
    assert pack4.VARIANT.plan(even, aligned=True).kernel is pack4.rope_pack4
    assert pack4.VARIANT.plan(odd, aligned=True).kernel is pack4.rope_pack4_scalar  # quads straddle rows
    assert pack4.VARIANT.plan(even, aligned=False).kernel is pack4.rope_pack4_scalar
    # the public call decides "aligned" from the arrays' addresses
    buf = cuda.to_device(np.zeros(64, np.float32))
    from ropelab.ops.arrays import inspect_array

    assert inspect_array(buf[1:37], "x").ptr % 16 == 4  # a 4-byte offset: no float4


@pytest.mark.parametrize("vector", [True, False])
def test_pack4_both_kernels_match_reference(rng, vector):
    from numba import cuda

    from ropelab.kernels import pack4
    from ropelab.problem import RopeProblem

    x = rng.standard_normal((37, 12)).astype(np.float32)  # 37 x 3 quads: not whole blocks
    pos = rng.integers(0, 3000, 37).astype(np.int32)
    out = cuda.to_device(np.full(x.size, np.nan, np.float32))
    plan = pack4.VARIANT.plan(RopeProblem(37, 1, 12, 12), threads=32, aligned=vector)
    assert plan.kernel is (pack4.rope_pack4 if vector else pack4.rope_pack4_scalar)
    ropelab.kernels.launch.launch(plan, (cuda.to_device(x.reshape(-1)), out, cuda.to_device(pos)))
    check(x, out.copy_to_host().reshape(x.shape), pos)
