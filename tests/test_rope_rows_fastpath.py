"""The rope_rows call shapes on the engine's fast path (GPU-only in use), checked on the host
with a recording stand-in for the bound launch: the pointers they fire and the overlaps they
refuse.  Budget: well under a second (no kernel runs)."""

import pytest

from ropelab.errors import RopeInputError
from ropelab.ops import call
from ropelab.ops.slots import columns_disjoint

import fake_device
from fake_device import CAI


def test_columns_of_one_qkv_are_disjoint_and_overlapping_columns_are_not():
    assert columns_disjoint(0, 1024, 256, 256, 1024, 128)  # k right after q
    assert columns_disjoint(256, 1024, 256, 0, 1024, 128)  # k before q, wraps the row
    assert not columns_disjoint(0, 1024, 256, 128, 1024, 128)  # k inside q's columns
    assert not columns_disjoint(0, 1024, 256, 256, 2048, 128)  # other row stride


# ---- the public calls on the engine's device route, without a GPU --------------------------------

@pytest.fixture
def device_route(monkeypatch):
    yield from fake_device.route(monkeypatch)


# bfloat16 qkv of 4 tokens, 2 Q + 1 K + 1 V heads of 8: rows of 64 bytes; q 32 bytes, k 16.
ROW = (64, 2)


def _q_k(base):
    return (CAI(base, (4, 16), "<u2", strides=ROW), CAI(base + 32, (4, 8), "<u2", strides=ROW))


def test_rope_qk_on_column_slices_is_validated_once_then_replayed(device_route):
    import ropelab

    pos = CAI(1 << 24, (4,), "<i4")
    q, k = _q_k(1 << 20)
    assert ropelab.rope_qk(q, k, positions=pos, head_dim=8) == (q, k)
    q2, k2 = _q_k(2 << 20)
    ropelab.rope_qk(q2, k2, positions=pos, head_dim=8)
    assert len(device_route) == 1  # the second call hit the engine's cache: no new bind
    assert device_route[0].fired == [((1 << 20, (1 << 20) + 32, 1 << 24), 0),
                                     ((2 << 20, (2 << 20) + 32, 1 << 24), 0)]
    # Same key (same layout, same pointer % 16), but k now inside q's columns: refused.
    with pytest.raises(RopeInputError, match="q overlaps k"):
        ropelab.rope_qk(q2, CAI((2 << 20) + 16, (4, 8), "<u2", strides=ROW), positions=pos,
                        head_dim=8)
    assert len(device_route[0].fired) == 2


def test_rope_on_a_strided_16bit_x_routes_to_rope_rows_unless_a_float32_variant_is_named(
        device_route):
    import ropelab

    pos = CAI(1 << 24, (4,), "<i4")
    q, _ = _q_k(1 << 20)
    with pytest.raises(RopeInputError, match="float32 and contiguous only"):
        ropelab.rope(q, positions=pos, variant="flat", out=q)
    assert device_route == []
    ropelab.rope(q, positions=pos, out=q)
    ropelab.rope(_q_k(2 << 20)[0], positions=pos, out=_q_k(2 << 20)[0])
    assert len(device_route) == 1 and device_route[0].plan.kernel.__name__.startswith("rope_rows")
    # A cos_sin_cache is a fourth kernel array: another call shape, its pointer fired too.
    table = CAI(3 << 20, (64, 16), "<f4")  # a 2-D x is one head of its width
    ropelab.rope(q, positions=pos, out=q, cos_sin_cache=table)
    assert len(device_route) == 2 and device_route[1].fired[-1][0][3] == 3 << 20


# float32 q (2 heads of 32) and k (1 head) as column slices of rows 1024 bytes apart: q 256
# bytes a row, k 128; positions 16 bytes, a cos/sin cache of 32 rows of 32 (4096 bytes).
ROW32 = (1024, 4)


def _qk32(q_ptr, k_ptr, p_ptr, c_ptr):
    return (CAI(q_ptr, (4, 64), "<f4", ROW32), CAI(k_ptr, (4, 32), "<f4", ROW32),
            CAI(p_ptr, (4,), "<i4"), CAI(c_ptr, (32, 32), "<f4"))


def _rope_qk32(arrays, **kw):
    import ropelab

    q, k, pos, cache = arrays
    return ropelab.rope_qk(q, k, positions=pos, head_dim=32, cos_sin_cache=cache, **kw)


def test_a_cached_qk_call_fires_new_pointers_on_the_stream_asked_for(device_route):
    import ropelab

    _rope_qk32(_qk32(1 << 24, (1 << 24) + 256, 1 << 20, 1 << 22))
    moved = _qk32(1 << 25, (1 << 25) + 256, 1 << 21, 1 << 23)
    _rope_qk32(moved, stream=ropelab.RawStream(7))
    assert len(device_route) == 1  # the second call was a hit: no new validation, no new bind
    assert device_route[0].fired == [((1 << 24, (1 << 24) + 256, 1 << 20, 1 << 22), 0),
                                     ((1 << 25, (1 << 25) + 256, 1 << 21, 1 << 23), 7)]


@pytest.mark.parametrize("qp, kp, pp, cp, match", [
    (0, 128, 1 << 20, 1 << 22, "q overlaps k"),  # k inside q's columns
    (0, 0, 1 << 20, 1 << 22, "q overlaps k"),  # k is q's first head
    (0, 256, 1024 + 304, 1 << 22, "q overlaps positions"),  # in a gap inside q's rows
    (0, 256, 1 << 20, 2048, "q overlaps cos_sin_cache"),
    (0, 256, 1 << 20, 3 * 1024 + 256 + 64, "k overlaps cos_sin_cache"),
])
def test_a_cached_qk_call_refuses_overlaps_before_launch(device_route, qp, kp, pp, cp, match):
    base = 1 << 26
    _rope_qk32(_qk32(base, base + 256, base + (1 << 20), base + (1 << 22)))
    with pytest.raises(RopeInputError, match=match):  # the same call shape: a hit
        _rope_qk32(_qk32(qp, kp, pp, cp))
    assert len(device_route) == 1 and len(device_route[0].fired) == 1
    call.clear()
    with pytest.raises(RopeInputError, match=match):  # and the validating path, before a bind
        _rope_qk32(_qk32(qp, kp, pp, cp))
    assert len(device_route) == 1 and len(device_route[0].fired) == 1
