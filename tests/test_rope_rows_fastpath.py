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


# ---- the public calls on the engine's device route, without a GPU --------------------------------

class CAI:
    """A device array seen only through ``__cuda_array_interface__`` (fake memory)."""

    def __init__(self, ptr, shape, typestr="<u2", strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


class Bound(Recorder):
    def __init__(self, plan, caller):
        super().__init__()
        self.plan, self.caller = plan, caller


@pytest.fixture
def device_route(monkeypatch):
    from ropelab.ops import arrays, rope, rows

    bounds = []

    def bind(plan, caller):
        bounds.append(Bound(plan, caller))
        return bounds[-1]

    monkeypatch.setattr(call, "bind", bind)
    monkeypatch.setattr(call, "register_fast_types", lambda: None)
    for module in (rope, rows, qk):
        monkeypatch.setattr(module, "SIMULATED", False)
    monkeypatch.setitem(arrays.FAST_META, CAI, arrays._cai_meta)
    call.clear()
    yield bounds
    call.clear()


# bfloat16 qkv of 4 tokens, 2 Q + 1 K + 1 V heads of 8: rows of 64 bytes; q 32 bytes, k 16.
ROW = (64, 2)


def _q_k(base):
    return CAI(base, (4, 16), strides=ROW), CAI(base + 32, (4, 8), strides=ROW)


def test_rope_qk_on_column_slices_is_validated_once_then_replayed(device_route):
    import ropelab

    pos = CAI(1 << 24, (4,), "<i4")
    q, k = _q_k(1 << 20)
    assert ropelab.rope_qk(q, k, positions=pos, head_dim=8) == (q, k)
    q2, k2 = _q_k(2 << 20)
    ropelab.rope_qk(q2, k2, positions=pos, head_dim=8)
    assert len(device_route) == 1  # the second call hit the engine's cache: no new bind
    assert device_route[0].fired == [([1 << 20, (1 << 20) + 32, 1 << 24], 0),
                                     ([2 << 20, (2 << 20) + 32, 1 << 24], 0)]
    # Same key (same layout, same pointer % 16), but k now inside q's columns: refused.
    with pytest.raises(RopeInputError, match="q and k overlap"):
        ropelab.rope_qk(q2, CAI((2 << 20) + 16, (4, 8), strides=ROW), positions=pos, head_dim=8)
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
