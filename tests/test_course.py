"""ropelab.course: thread maps traced from the real kernels, and the notebook checks.

Budget: a few seconds on the simulator (a few hundred CUDA threads per trace).
"""

import numpy as np
import pytest

import ropelab
from ropelab import course, kernels, reference
from ropelab.problem import RopeProblem

SIM_ONLY = pytest.mark.skipif(not ropelab.SIMULATED, reason="in-process trace needs the simulator")


@pytest.mark.parametrize("variant", list(kernels.VARIANTS))
@pytest.mark.parametrize("tokens, hidden, tpb", [(3, 10, 8), (2, 14, None), (5, 6, 4)])
def test_every_float_is_written_by_exactly_one_launched_thread(variant, tokens, hidden, tpb):
    if variant == "block2d" and tpb is not None and tpb < hidden // 2:
        tpb = None  # fine either way, but keep block2d on its own default here
    tmap = course.trace_threads(variant, tokens, hidden, threads_per_block=tpb)
    assert tmap.block.shape == tmap.thread.shape == (tokens, hidden)
    assert (tmap.block >= 0).all(), "some float was never written"
    assert (tmap.block < tmap.grid[0]).all() and (tmap.thread < tmap.block_dim[0]).all()
    # Both floats of a pair come from the same thread: a pair is rotated as a unit.
    assert (tmap.block[:, 0::2] == tmap.block[:, 1::2]).all()
    assert (tmap.thread[:, 0::2] == tmap.thread[:, 1::2]).all()
    assert 0 < tmap.busy <= tmap.launched


def test_flat_map_is_the_row_major_pair_index():
    tmap = course.trace_threads("flat", 3, 10, threads_per_block=8)
    pair_number = np.arange(3 * 5).reshape(3, 5).repeat(2, axis=1)
    np.testing.assert_array_equal(tmap.global_thread(), pair_number)
    assert (tmap.grid, tmap.block_dim) == ((2, 1), (8, 1))
    assert (tmap.launched, tmap.busy, tmap.elements_per_thread) == (16, 15, 2.0)


def test_block2d_map_is_block_per_token_thread_per_pair():
    tmap = course.trace_threads("block2d", 4, 12)
    np.testing.assert_array_equal(tmap.block, np.arange(4)[:, None].repeat(12, axis=1))
    np.testing.assert_array_equal(tmap.thread, np.arange(6).repeat(2)[None].repeat(4, axis=0))
    assert tmap.block_dim == (32, 1)  # six pairs, rounded up to a warp
    assert tmap.busy == 24 and tmap.launched == 128


def test_block2d_strides_when_the_block_is_narrower_than_the_row():
    tmap = course.trace_threads("block2d", 2, 20, threads_per_block=4)
    # 10 pairs, 4 threads: thread t handles pairs t, t + 4, t + 8.
    np.testing.assert_array_equal(tmap.thread[0, 0::2], np.arange(10) % 4)
    assert tmap.elements_per_thread == 5.0


@pytest.mark.parametrize("variant", ["pack4", "pack4_scalar"])
def test_pack4_gives_each_thread_four_floats_and_a_tail(variant):
    if variant not in kernels.VARIANTS:
        pytest.skip(f"{variant} not registered")
    tmap = course.trace_threads(variant, 2, 10, threads_per_block=8)  # 5 pairs: odd, a tail
    g = tmap.global_thread()
    np.testing.assert_array_equal(g[0], [0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(g[1], [3, 3, 3, 3, 4, 4, 4, 4, 5, 5])


def test_trace_does_not_change_what_the_kernel_computes(rng):
    # The watched arrays are a recording layer only: the same launch on them gives the reference.
    problem = RopeProblem(3, 1, 10, 10)
    x = rng.standard_normal(30).astype(np.float32)
    out = course._WatchedArray(np.zeros(30, np.float32), np.full((30, 4), -1), None)
    if not ropelab.SIMULATED:
        pytest.skip("needs the simulator in this process")
    kernels.get("flat").launch(problem, course._WatchedArray(x, None, None), out,
                               course._WatchedArray(np.arange(3, dtype=np.int32), None, None))
    want = reference.rope(x.reshape(3, 10))
    assert np.abs(out.data.reshape(3, 10) - want).max() < 1e-5


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown variant"):
        course.trace_threads("nope", 2, 4)


def test_check_passes_a_correct_result_and_fails_a_wrong_one(rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    pos = np.array([0, 3, 9, 100])
    good = course.check("ref", x, reference.rope(x, pos).astype(np.float32), pos)
    assert good.passed and good.line.endswith("PASS") and "4x12" in good.line
    assert "e-" in good.line and str(good.max_error) not in good.line  # no raw error in the line
    wrong = reference.rope(x, pos + 1)
    bad = course.check("shifted", x, wrong, pos)
    assert not bad.passed and bad.line.endswith("FAIL")
    nan = course.check("nan", x, np.full_like(x, np.nan), pos)
    assert not nan.passed


def test_check_uses_reference_options(rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    pos = np.array([1, 2])
    neox = reference.rope(x, pos, interleave=False)
    assert course.check("neox", x, neox, pos, interleave=False).passed
    assert not course.check("neox", x, neox, pos).passed


def test_plot_thread_map_labels_every_float():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tmap = course.trace_threads("flat", 2, 6, threads_per_block=4)
    ax = course.plot_thread_map(tmap, label="global")
    labels = [t.get_text() for t in ax.texts]
    assert labels == [str(v) for v in tmap.global_thread().ravel()]
    plt.close(ax.figure)


def test_source_is_the_kernel_text():
    text = course.source(kernels.get("flat").KERNEL)
    assert text.startswith("def rope_flat(") and "cuda.grid(1)" in text
