"""The rules the engine applies to every op, the same way for NumPy and device arrays: overlaps
refused before anything runs (buffers unchanged), zero tokens, the rope_rows routing of
``variant="freq_table"``, one position-array check, and the bounded host tables.  Small shapes:
each kernel that runs is a handful of simulated threads."""

import gc
import weakref

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import RopeInputError, reference, tolerance
from ropelab.kernels import freq_table
from ropelab.ops import call

import fake_device
from fake_device import CAI

HD = 8  # head_dim of the rope_qk cases: q 2 heads, k 1 head, rows of 4 heads (V beside them)


def _qkv(tokens=4):
    return np.random.default_rng(0).standard_normal((tokens, 4 * HD)).astype(np.float32)


def _on(kind, a):
    return cuda.to_device(a) if kind == "device" else a


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else a.copy()


def _refused(launches, match, fn, *buffers):
    """``fn()`` raises RopeInputError matching ``match``, launches nothing, changes nothing."""
    before = [_host(b) for b in buffers]
    with pytest.raises(RopeInputError, match=match):
        fn()
    assert launches == []
    for b, was in zip(buffers, before):
        np.testing.assert_array_equal(_host(b), was)


# ---- overlaps: one rule, NumPy and device arrays alike ---------------------------------------------

@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_rope_qk_refuses_q_and_k_that_share_bytes(launches, kind):
    qkv = _on(kind, _qkv())
    pos = _on(kind, np.arange(4, dtype=np.int32))
    q = qkv[:, :2 * HD]
    for k, what in ((qkv[:, HD:2 * HD], "k inside q's columns"), (q, "k is q"),
                    (qkv[:, :HD], "k is q's first head")):
        _refused(launches, "q overlaps k", lambda: ropelab.rope_qk(q, k, positions=pos,
                                                                   head_dim=HD), qkv)
    # Column slices that do not interleave are fine (k right after q, V after k).
    ropelab.rope_qk(q, qkv[:, 2 * HD:3 * HD], positions=pos, head_dim=HD)
    assert len(launches) == 1


@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_positions_inside_a_written_buffer_are_refused(launches, kind):
    qkv = _on(kind, np.zeros((4, 4 * HD), np.float32))  # zeros: valid positions as int32 too
    q, k = qkv[:, :2 * HD], qkv[:, 2 * HD:3 * HD]
    inside_q = qkv.view(np.int32)[1, :4]
    _refused(launches, "q overlaps positions",
             lambda: ropelab.rope_qk(q, k, positions=inside_q, head_dim=HD), qkv)
    x = _on(kind, np.ones((4, HD), np.float32))
    buf = _on(kind, np.zeros(4 * HD + 2, np.float32))
    _refused(launches, "out overlaps positions", lambda: ropelab.rope(
        x, out=buf[:4 * HD].reshape(4, HD), positions=buf.view(np.int32)[4 * HD - 2:]), buf)


@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_out_inside_the_cos_sin_cache_is_refused(launches, kind):
    cache = _on(kind, freq_table.cos_sin_rows(reference.inv_freq(HD), 16))
    x = _on(kind, np.ones((4, HD), np.float32))
    _refused(launches, "out overlaps cos_sin_cache", lambda: ropelab.rope(
        x, out=cache[4:8], positions=_on(kind, np.arange(4, dtype=np.int32)),
        cos_sin_cache=cache), cache)


@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_a_fused_cos_sin_cache_inside_qkv_is_refused(launches, kind):
    qkv = _on(kind, np.ones((8, 3 * 64), np.float32))
    w = _on(kind, np.ones(64, np.float32))
    kw = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64, q_weight=w, k_weight=w,
              positions=_on(kind, np.zeros(8, np.int32)))
    aliased = qkv.reshape(8 * 3, 64)  # the same bytes as a [24, rotary_dim] table
    _refused(launches, "qkv overlaps cos_sin_cache",
             lambda: ropelab.fused_qknorm_rope(qkv, cos_sin_cache=aliased, **kw), qkv)
    _refused(launches, "qkv overlaps q_weight", lambda: ropelab.fused_qknorm_rope(
        qkv, **{**kw, "q_weight": qkv[0, :64]}), qkv)


@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_out_partly_over_x_is_refused_and_out_x_is_in_place(launches, kind):
    buf = _on(kind, np.ones((5, HD), np.float32))
    _refused(launches, "out overlaps x: .*; pass out=x for in place",
             lambda: ropelab.rope(buf[:4], out=buf[1:]), buf)
    x = buf[:4]
    got = ropelab.rope(x, out=x, positions=_on(kind, np.arange(4, dtype=np.int32)))
    assert got is x and len(launches) == 1
    want = reference.rope(np.ones((4, HD)), np.arange(4))
    assert np.abs(_host(buf)[:4] - want).max() < 1e-5 and (_host(buf)[4] == 1).all()


@pytest.fixture
def device_route(monkeypatch):
    yield from fake_device.route(monkeypatch)


def test_the_device_route_refuses_by_the_same_rule_cold_and_cached(device_route):
    """What NumPy arrays are refused above, device arrays are refused the same way, on the
    validating path and on a cached call shape's new pointers."""
    w, pos = CAI(1 << 20, (64,)), CAI(2 << 20, (8,), "<i4")
    kw = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64, q_weight=w, k_weight=w,
              positions=pos)
    table = CAI(3 << 20, (24, 64))
    ropelab.fused_qknorm_rope(CAI(4 << 20, (8, 192)), cos_sin_cache=table, **kw)
    assert len(device_route) == 1 and len(device_route[0].fired) == 1
    for cached in (True, False):
        if not cached:
            call.clear()
        with pytest.raises(RopeInputError, match="qkv overlaps cos_sin_cache"):
            ropelab.fused_qknorm_rope(CAI(3 << 20, (8, 192)), cos_sin_cache=table, **kw)
    assert len(device_route) == 1 and len(device_route[0].fired) == 1  # no bind, no launch


# ---- zero tokens are a valid call of every op ---------------------------------------------------

@pytest.mark.parametrize("kind", ["numpy", "device"])
def test_zero_tokens_run_nothing_on_the_rope_rows_ops(launches, kind):
    empty16 = _on(kind, np.zeros((0, 2 * HD), np.float16))
    got = ropelab.rope(empty16, positions=_on(kind, np.zeros(0, np.int32)))
    assert got.shape == (0, 2 * HD) and got.dtype == np.float16
    assert ropelab.rope(_on(kind, np.zeros((0, 2, HD), np.uint16))).shape == (0, 2, HD)
    qkv = _on(kind, np.zeros((0, 4 * HD), np.float32))
    q, k = qkv[:, :2 * HD], qkv[:, 2 * HD:3 * HD]
    assert ropelab.rope_qk(q, k, positions=_on(kind, np.zeros(0, np.int32)),
                           head_dim=HD) == (q, k)
    table = _on(kind, freq_table.cos_sin_rows(reference.inv_freq(HD), 4))
    out = _on(kind, np.zeros((0, HD), np.float32))
    assert ropelab.rope(_on(kind, np.zeros((0, HD), np.float32)), out=out,
                        cos_sin_cache=table) is out
    assert launches == []
    with pytest.raises(RopeInputError, match="shape \\(0,\\)"):  # still fully checked
        ropelab.rope_qk(q, k, positions=np.zeros(1, np.int32), head_dim=HD)


# ---- freq_table on a row-strided x runs on rope_rows ------------------------------------------

@pytest.mark.parametrize("options", [{}, dict(cache=True, max_positions=64)])
def test_freq_table_runs_a_column_slice_of_qkv_on_rope_rows(options):
    qkv = _qkv()
    before = qkv.copy()
    x = qkv[:, HD:3 * HD]  # two heads of a packed row: row-strided
    pos = np.array([0, 5, 17, 63])
    got = ropelab.rope(x, variant="freq_table", positions=pos, **options)
    want = reference.rope(x.astype(np.float64), pos)  # a 2-D x is one head of its width
    bound = tolerance.rows_atol(float(np.abs(x).max()), 63.0, "float32")
    assert got.flags.c_contiguous and np.abs(got - want).max() <= bound
    np.testing.assert_array_equal(qkv, before)  # out of place: the input is untouched
    with pytest.raises(RopeInputError, match="reduce_angle"):  # not one of rope_rows's modes
        ropelab.rope(x, variant="freq_table", positions=pos, reduce_angle=True)


# ---- one position-array check ---------------------------------------------------------------------

@pytest.mark.parametrize("storage", [np.float32, np.float16])
def test_float_positions_are_the_same_refusal_for_every_storage(launches, storage):
    x = np.ones((4, HD), storage)
    for positions in (np.arange(4.0), cuda.to_device(np.arange(4, dtype=np.float32))):
        with pytest.raises(RopeInputError, match="positions must be integers"):
            ropelab.rope(x, positions=positions)
    assert launches == []


def test_host_positions_may_be_strided_device_positions_must_be_contiguous_int32(launches):
    x = np.random.default_rng(1).standard_normal((4, HD)).astype(np.float32)
    every_other = np.arange(8, dtype=np.int64)[::2]
    np.testing.assert_array_equal(ropelab.rope(x, positions=every_other),
                                  ropelab.rope(x, positions=np.array([0, 2, 4, 6])))
    assert len(launches) == 2
    dev = cuda.to_device(x)
    for positions, match in ((cuda.to_device(np.arange(8, dtype=np.int32))[::2], "contiguous"),
                             (cuda.to_device(np.arange(4, dtype=np.int64)), "int32")):
        with pytest.raises(RopeInputError, match=match):
            ropelab.rope(dev, positions=positions)
    assert len(launches) == 2


# ---- the host tables: one builder, one bounded cache, the same bits -------------------------------

def test_host_tables_are_built_once_per_key_and_bounded():
    freqs = reference.inv_freq(HD)
    first = freq_table.tables("cos_sin_rows", freqs.tobytes(), 3)
    assert freq_table.tables("cos_sin_rows", freqs.tobytes(), 3) is first  # one upload
    theta = np.outer(np.arange(3, dtype=np.float64), freqs)
    want = np.concatenate([np.cos(theta), np.sin(theta)], axis=1).astype(np.float32)
    np.testing.assert_array_equal(first[0], want.reshape(-1))  # rounded once, from float64
    ref = weakref.ref(first[0])
    del first
    for n in range(4, 4 + 3 * freq_table.MAX_HOST_TABLES):
        freq_table.tables("cos_sin_rows", freqs.tobytes(), n)
        assert freq_table.host_tables_held() <= freq_table.MAX_HOST_TABLES
    gc.collect()
    assert ref() is None, "an evicted host table is still alive"
    np.testing.assert_array_equal(freq_table.tables("inv_freq", freqs.tobytes())[0],
                                  freqs.astype(np.float32))


def test_cached_calls_that_make_their_output_or_default_their_positions(device_route,
                                                                        monkeypatch):
    """The short paths of a cached call: out made (positions defaulted to 0 .. tokens-1), and
    out given with defaulted positions: each fires what the first call fired."""
    from ropelab.ops import memory

    fresh = iter(range(8 << 20, 16 << 20, 1 << 20))
    monkeypatch.setattr(memory, "maker", lambda info: (
        lambda like: CAI(next(fresh), info.shape), memory.cai_pointer))
    monkeypatch.setattr(call, "arange_positions", lambda tokens: CAI(3 << 20, (tokens,), "<i4"))
    x, out = CAI(1 << 20, (4, 8)), CAI(2 << 20, (4, 8))
    made = [ropelab.rope(x, variant="pack4") for _ in range(2)]
    assert made[0] is not made[1] and made[0].__cuda_array_interface__["shape"] == (4, 8)
    fired = device_route[0].fired
    assert len(device_route) == 1 and len(fired) == 2
    ptr = [m.__cuda_array_interface__["data"][0] for m in made]
    assert [f[0] for f in fired] == [(1 << 20, p, 3 << 20) for p in ptr]
    for _ in range(2):
        assert ropelab.rope(x, out=out, variant="pack4") is out
    assert len(device_route) == 2
    assert [f[0] for f in device_route[1].fired] == [(1 << 20, 2 << 20, 3 << 20)] * 2
