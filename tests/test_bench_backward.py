"""The backward bench's plumbing on the simulator: byte counts, rows, the ropelab entries on a
tiny shape (they must compute what the public function computes) and the bit comparison."""

import numpy as np
import pytest

from ropelab.measure.bench import backward as bb
from ropelab.measure.bench import backward_calls as calls
from ropelab.shapes import FLUX_1024, FusedShape

TINY = FusedShape("tiny", 3, 2, 1, 1, 64, 64)


def test_byte_counts_follow_the_stated_formula():
    row = 4096 * 72 * 128 * 2  # flux_1024 bf16: 24 + 24 + 24 heads of 128
    qk = 4096 * 48 * 128 * 2
    assert bb.bytes_for("backward", FLUX_1024, 2) == 2 * row + qk
    assert bb.bytes_for("forward+backward", FLUX_1024, 2) == 4 * row + qk
    assert bb.bytes_for("copy", FLUX_1024, 2) == 2 * row


def test_row_reports_the_share_of_the_copy():
    row = bb.make_row("x", TINY, "gptj", "bfloat16", "backward", 2, [2.0, 2.0, 2.0], 10.0)
    assert tuple(row) == bb.BENCH_BACKWARD.columns
    assert row["gbps"] == pytest.approx(bb.bytes_for("backward", TINY, 2) / 2.0 / 1e3)
    assert row["frac_of_copy"] == pytest.approx(row["gbps"] / 10.0)
    skipped = bb.make_row("y", TINY, "neox", "bfloat16", "backward", 2, [], 10.0, note="skipped")
    assert skipped["median_us"] is None and skipped["frac_of_copy"] is None


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("dw", ["two_stage", "atomic"])
def test_entries_compute_what_the_public_function_computes_on_host_arrays(interleave, dw):
    arrays = calls.inputs(TINY)
    host = [a.copy_to_host() for a in arrays]
    hx, hq, hk = calls.ropelab_backward(host, TINY, interleave, dw)()
    dx, dq, dk = calls.ropelab_backward(arrays, TINY, interleave, dw)()
    np.testing.assert_array_equal(dx.copy_to_host(), hx)
    np.testing.assert_array_equal(np.concatenate([dq.copy_to_host(), dk.copy_to_host()]),
                                  np.concatenate([hq, hk]))
    launch = calls.ropelab_backward_kernel(arrays, TINY, interleave, dw)
    launch()
    launch()  # twice: the atomic entry must start from zero each time
    kx, kw = (a.copy_to_host() for a in launch.outputs)
    np.testing.assert_array_equal(kx.view(hx.dtype).reshape(hx.shape), hx)
    np.testing.assert_array_equal(kw, np.concatenate([hq, hk]))
    assert np.abs(hk).max() > 0
    # The sweep's rows: one block (its warps loop), one unit a pass or three: the same bits
    # (the weight gradient's sum order follows the grid, so both rows take the same one).
    one, three = (calls.ropelab_backward_kernel(arrays, TINY, interleave, dw, max_blocks=1,
                                                units_per_pass=u) for u in (1, 3))
    one()
    three()
    (ox, ow), (tx, tw) = ([a.copy_to_host() for a in r.outputs] for r in (one, three))
    assert tx.tobytes() == ox.tobytes() and tw.tobytes() == ow.tobytes()
    np.testing.assert_array_equal(ox, kx)


def test_two_stage_weight_gradient_has_no_bit_differences():
    arrays = calls.inputs(TINY)
    assert calls.bit_differences(calls.ropelab_backward(arrays, TINY, True), runs=3) == (0, 0.0)


@pytest.mark.parametrize("interleave", [True, False])
def test_the_forward_backward_entry_runs_the_one_pass_forward_autograd_runs(interleave):
    """``ropelab:fwd+bwd`` times what ``ropelab.torch_ops`` launches under autograd: the
    out-of-place forward in one pass (the input left as it was), then the backward."""
    import ropelab

    arrays = calls.inputs(TINY)
    before = arrays[0].copy_to_host()
    run = calls.ropelab_forward_backward(arrays, TINY, interleave)
    run()
    assert np.array_equal(arrays[0].copy_to_host(), before)  # qkv is read, never written
    expected = before.copy()
    ropelab.fused_qknorm_rope(expected, q_weight=arrays[2].copy_to_host(),
                              k_weight=arrays[3].copy_to_host(),
                              positions=arrays[4].copy_to_host(), **calls._kwargs(TINY, interleave))
    np.testing.assert_array_equal(run.forward_out.copy_to_host(), expected)
    assert not np.array_equal(expected, before)
