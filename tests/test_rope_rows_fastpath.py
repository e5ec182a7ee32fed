"""The rope_rows call shapes on the engine's fast path (GPU-only in use), checked on the host
with a recording stand-in for the bound launch: the pointers they fire and the overlaps they
refuse.  Budget: well under a second (no kernel runs)."""

import pytest

from ropelab.errors import RopeInputError
from ropelab.ops import call, qk
from ropelab.ops.rows_checks import columns_disjoint


class Recorder:
    def __init__(self):
        self.fired = []

    def fire(self, ptrs, handle):
        self.fired.append((list(ptrs), handle))


def _qk_entry(with_cache=False):
    e = call.DeviceCall()
    e.bound = Recorder()
    e.current = lambda: 7
    # q: 4 rows of 256 bytes every 1024; k: 4 rows of 128 bytes every 1024; positions 16 bytes
    e.extents = (3 * 1024 + 256, 3 * 1024 + 128, 16) + ((4096,) if with_cache else ())
    e.pairs = tuple(qk.overlap_rules(qk.columns_rule((1024, 256, 1024, 128)), with_cache))
    e.defaults, e.alloc, e.result, e.before = (), None, 0, None
    return e


def test_columns_of_one_qkv_are_disjoint_and_overlapping_columns_are_not():
    assert columns_disjoint(0, 1024, 256, 256, 1024, 128)  # k right after q
    assert columns_disjoint(256, 1024, 256, 0, 1024, 128)  # k before q, wraps the row
    assert not columns_disjoint(0, 1024, 256, 128, 1024, 128)  # k inside q's columns
    assert not columns_disjoint(0, 1024, 256, 256, 2048, 128)  # other row stride


def test_qk_entry_fires_new_pointers_on_the_current_stream():
    e = _qk_entry(with_cache=True)
    e.run(("q", "k", "p", None), [0, 256, 1 << 20, 0], None)
    e.run(("q", "k", "p", "c"), [1 << 21, (1 << 21) + 256, 1 << 20, 1 << 22], 0)
    assert e.bound.fired == [([0, 256, 1 << 20, 0], 7),
                             ([1 << 21, (1 << 21) + 256, 1 << 20, 1 << 22], 0)]


@pytest.mark.parametrize("qp, kp, pp, cp, match", [
    (0, 128, 1 << 20, 1 << 22, "q and k overlap"),
    (0, 256, 1024 + 300, 1 << 22, "positions overlap q"),
    (0, 256, 1 << 20, 2048, "cos_sin_cache overlaps q"),
])
def test_qk_entry_refuses_overlaps_before_launch(qp, kp, pp, cp, match):
    e = _qk_entry(with_cache=True)
    with pytest.raises(RopeInputError, match=match):
        e.run(("q", "k", "p", "c"), [qp, kp, pp, cp], None)
    assert e.bound.fired == []
