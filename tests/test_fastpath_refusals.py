"""After a cache hit, the fast path refuses every call the validating path refuses.

Real CPU torch tensors stand for CUDA tensors through the CPU harness's route
(``ropelab.measure.bench.host_path.host_route``): the real metadata reader builds the keys, the
real validation builds the entries, and a recording Bound counts what would have launched.
Each bad call is first shown refused on a cold cache (the validating path), then on a cache
warmed by a good call of the same shape, where nothing may launch.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ropelab  # noqa: E402
from ropelab import RopeInputError  # noqa: E402
from ropelab.measure.bench.host_path import host_route  # noqa: E402
from ropelab.ops import arrays, call  # noqa: E402

SHAPE = (8, 64)


class _Recording:
    def __init__(self, plan, caller):
        self.plan, self.fired = plan, []

    def fire(self, ptrs, stream):
        self.fired.append(tuple(ptrs))


@pytest.fixture
def route():
    binds = []

    def binder(plan, caller):
        binds.append(_Recording(plan, caller))
        return binds[-1]

    with host_route(binder):
        yield binds


def _launches(binds):
    return sum(len(b.fired) for b in binds)


def _tensors():
    return torch.zeros(SHAPE), torch.zeros(SHAPE), torch.arange(SHAPE[0], dtype=torch.int32)


# A bad scalar of each kind the key must tell apart from the good value it hashes like.
BAD_SCALARS = [
    (dict(base="10000"), TypeError),
    (dict(rotary_dim=64.0), TypeError),
    (dict(interleave=1), TypeError),
    (dict(inverse=0), TypeError),
    (dict(fastmath=None), TypeError),
    (dict(threads_per_block=128.0), TypeError),
    (dict(check_positions=0), TypeError),
    (dict(stream=12345), RopeInputError),
]


@pytest.mark.parametrize("bad, exc", BAD_SCALARS, ids=[next(iter(b)) for b, _ in BAD_SCALARS])
def test_a_wrong_scalar_is_refused_cold_and_after_a_hit(route, bad, exc):
    x, out, pos = _tensors()
    good = dict(variant="flat", positions=pos, out=out, rotary_dim=64, interleave=True,
                inverse=False, threads_per_block=128, check_positions=False)
    with pytest.raises(exc):  # the validating path
        ropelab.rope(x, **{**good, **bad})
    assert _launches(route) == 0
    ropelab.rope(x, **good)
    assert ropelab.rope(x, **good) is out and len(route) == 1 and _launches(route) == 2  # a hit
    with pytest.raises(exc):
        ropelab.rope(x, **{**good, **bad})
    assert _launches(route) == 2


def _overlapping_out(x_buffer):
    return x_buffer[SHAPE[1]:SHAPE[1] + SHAPE[0] * SHAPE[1]].view(SHAPE)  # one row later


def test_overlaps_are_refused_cold_and_after_a_hit(route):
    buf = torch.zeros((SHAPE[0] + 1) * SHAPE[1])
    x = buf[:SHAPE[0] * SHAPE[1]].view(SHAPE)
    _, out, pos = _tensors()
    pos_in_out = out.view(torch.int32)[0, :SHAPE[0]]  # positions inside out's first row
    for kwargs, match in ((dict(out=_overlapping_out(buf), positions=pos), "overlaps x"),
                          (dict(out=out, positions=pos_in_out), "overlaps positions")):
        call.clear()
        with pytest.raises(RopeInputError, match=match):
            ropelab.rope(x, variant="flat", **kwargs)
    ropelab.rope(x, variant="flat", out=out, positions=pos)
    ropelab.rope(x, variant="flat", out=x, positions=pos)  # in place: allowed, cold and hot
    ropelab.rope(x, variant="flat", out=x, positions=pos)
    fired = _launches(route)
    assert fired == 3
    with pytest.raises(RopeInputError, match="overlaps x"):
        ropelab.rope(x, variant="flat", out=_overlapping_out(buf), positions=pos)
    with pytest.raises(RopeInputError, match="overlaps positions"):
        ropelab.rope(x, variant="flat", out=out, positions=pos_in_out)
    assert _launches(route) == fired


def test_a_misaligned_x_never_replays_the_aligned_call(route):
    x, out, pos = _tensors()
    buf = torch.zeros(SHAPE[0] * SHAPE[1] + 1)
    misaligned = buf[1:].view(SHAPE)  # 4 bytes past where x's alignment would be
    assert x.data_ptr() % 16 == 0 and misaligned.data_ptr() % 16 == 4
    ropelab.rope(x, variant="flat", out=out, positions=pos)
    ropelab.rope(x, variant="flat", out=out, positions=pos)
    assert len(route) == 1
    ropelab.rope(misaligned, variant="flat", out=out, positions=pos)
    assert len(route) == 2  # validated again (and planned for its alignment), not replayed
    assert len(call.remembered()) == 2


def test_requires_grad_is_refused_after_a_hit_and_after_a_no_grad_call(route):
    x, out, pos = _tensors()
    needs_grad = torch.zeros(SHAPE, requires_grad=True)
    with pytest.raises(RopeInputError, match="requires grad"):  # the validating path
        ropelab.rope(needs_grad, variant="flat", out=out, positions=pos)
    ropelab.rope(x, variant="flat", out=out, positions=pos)
    ropelab.rope(x, variant="flat", out=out, positions=pos)
    with pytest.raises(RopeInputError, match="requires grad"):  # same shape as the hit
        ropelab.rope(needs_grad, variant="flat", out=out, positions=pos)
    with torch.no_grad():  # allowed there, and remembered
        ropelab.rope(needs_grad, variant="flat", out=out, positions=pos)
        ropelab.rope(needs_grad, variant="flat", out=out, positions=pos)
    fired = _launches(route)
    assert fired == 4
    with pytest.raises(RopeInputError, match="requires grad"):  # the no_grad entry must not replay
        ropelab.rope(needs_grad, variant="flat", out=out, positions=pos)
    assert _launches(route) == fired


def test_the_harness_times_the_hit_and_its_parts():
    from ropelab.measure.bench import host_path

    fast_meta = dict(arrays.FAST_META)
    rows = host_path.measure(number=20, repeat=2)
    names = [name for name, _ in rows]
    assert names[0] == "rope() hit, x/out/positions tensors"
    assert sum(n.startswith("  part: ") for n in names) == 4
    assert all(np.isfinite(us) and us > 0 for _, us in rows)
    assert not call.remembered()  # the route cleans up after itself
    assert arrays.FAST_META == fast_meta
