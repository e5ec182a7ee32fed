"""The rope_rows fast-path entries (GPU-only in use) checked on the host with a recording
stand-in for the bound launch: the pointers they fire and the overlaps they refuse.
Budget: well under a second (no kernel runs)."""

import pytest

from ropelab import rows_checks, rows_launch
from ropelab.errors import RopeInputError


class Recorder:
    def __init__(self):
        self.fired = []

    def fire(self, ptrs, handle):
        self.fired.append((ptrs, handle))


def _qk_entry():
    e = rows_launch._QKCall()
    e.bound = Recorder()
    e.current = lambda: 7
    # q: 4 rows of 256 bytes every 1024; k: 4 rows of 128 bytes every 1024; positions 16 bytes
    e.spans = (3 * 1024 + 256, 3 * 1024 + 128, 16)
    e.rows = (1024, 256, 1024, 128)
    return e


def test_columns_of_one_qkv_are_disjoint_and_overlapping_columns_are_not():
    assert rows_checks.columns_disjoint(0, 1024, 256, 256, 1024, 128)  # k right after q
    assert rows_checks.columns_disjoint(256, 1024, 256, 0, 1024, 128)  # k before q, wraps the row
    assert not rows_checks.columns_disjoint(0, 1024, 256, 128, 1024, 128)  # k inside q's columns
    assert not rows_checks.columns_disjoint(0, 1024, 256, 256, 2048, 128)  # other row stride


def test_qk_entry_fires_new_pointers_on_the_current_stream():
    e = _qk_entry()
    e.fire(0, 256, 1 << 20, None, None)
    e.fire(1 << 21, (1 << 21) + 256, 1 << 20, 555, 3)
    assert e.bound.fired == [((0, 256, 1 << 20), 7),
                             ((1 << 21, (1 << 21) + 256, 1 << 20, 555), 3)]


@pytest.mark.parametrize("qp, kp, pp, match", [
    (0, 128, 1 << 20, "q and k overlap"),
    (0, 256, 1024 + 300, "positions overlap"),
])
def test_qk_entry_refuses_overlaps_before_launch(qp, kp, pp, match):
    e = _qk_entry()
    with pytest.raises(RopeInputError, match=match):
        e.fire(qp, kp, pp, None, None)
    assert e.bound.fired == []


def test_rows_entry_allocates_out_uses_the_arange_and_checks_overlap():
    e = rows_launch._RowsCall()
    e.bound = Recorder()
    e.x_span = e.out_span = 4096
    e.pos_nbytes = 64
    e.alloc = lambda x: "new"
    e.ptr_of = lambda a: 1 << 30
    e.same_layout = True
    e.arange = 999
    e.current = lambda: 0
    e.check = False
    assert e.run("x", 0, None, 0, None, 0, None) == "new"
    assert e.bound.fired[-1] == ((0, 1 << 30, 999), 0)
    assert e.run("x", 0, "out", 1 << 20, "pos", 1 << 21, None, 4242) == "out"
    assert e.bound.fired[-1] == ((0, 1 << 20, 1 << 21, 4242), 0)
    with pytest.raises(RopeInputError, match="partially overlaps"):
        e.run("x", 0, "out", 2048, None, 0, None)
    with pytest.raises(RopeInputError, match="overlaps positions"):
        e.run("x", 0, "out", 1 << 20, "pos", (1 << 20) + 100, None)
    assert len(e.bound.fired) == 2
