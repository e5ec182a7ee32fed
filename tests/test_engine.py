"""The one call engine (ropelab.ops.call): its cache key, its stream and position rules, its
bounded tables, the device route driven without a GPU, and the refusals of silent wrong
results.  The GPU-only halves are in test_gpu_public_path.py."""

import weakref

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab.target import SIMULATED
from ropelab import RopeInputError, kernels, scaling
from ropelab.kernels import launch as launch_module
from ropelab.ops import call, streams
from ropelab.ops.arrays import FAST_META

import fake_device
from fake_device import CAI


def x32(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# ---- the cache key carries the alignment the kernels need ---------------------------------------

class _FakeDeviceArray:
    """Stands for a device array on the fast path: a pointer and a metadata key."""

    def __init__(self, ptr, meta=((4, 192), True, "bfloat16", 0)):
        self.ptr, self.meta = ptr, meta


class _Entry:
    bound = None

    def __init__(self):
        self.runs = []

    def run(self, arrays, ptrs, stream):
        self.runs.append(list(ptrs))
        return "replayed"


@pytest.fixture
def fake_fast_type(monkeypatch):
    monkeypatch.setitem(FAST_META, _FakeDeviceArray, lambda a: (a.ptr, a.meta))
    call.clear()
    yield
    call.clear()


def test_a_misaligned_bf16_qkv_never_replays_an_aligned_call(fake_fast_type):
    """A key that recorded only ``all pointers % 16 == 0`` would let a bf16 qkv 2 bytes off a
    word boundary replay the launch validated for one 8 bytes off (both "not 16-aligned"), and
    the kernel die on a misaligned address: each pointer's ``% 16`` is in the key."""
    scalars = call.typed(("fused_qknorm_rope", 1, 1, 1, 64))
    weights = (_FakeDeviceArray(4096), _FakeDeviceArray(8192), _FakeDeviceArray(12288))
    result, key = call.fast(scalars, (_FakeDeviceArray(1000 * 16 + 8), *weights), None)
    assert result is call.MISS and key is not None
    entry = _Entry()
    call.remember(key, entry)  # what the validating path does for the word-aligned qkv
    assert call.fast(scalars, (_FakeDeviceArray(2000 * 16 + 8), *weights), None)[0] == "replayed"
    result, misaligned_key = call.fast(scalars, (_FakeDeviceArray(2000 * 16 + 2), *weights), None)
    assert result is call.MISS and misaligned_key != key  # -> validation, which refuses it
    assert entry.runs == [[2000 * 16 + 8, 4096, 8192, 12288]]


def test_the_fused_validating_path_refuses_the_misaligned_bf16_qkv():
    from ropelab.ops.arrays import ArrayInfo
    from ropelab.ops.fused import check_qkv

    info = ArrayInfo((2, 192), np.dtype(np.uint16), (384, 2), 16 * 99 + 2, True, False, "torch",
                     "bfloat16")
    with pytest.raises(RopeInputError, match="4-byte aligned"):
        check_qkv(info, (1, 1, 1), 64)


def test_a_key_differs_by_argument_type_and_unhashable_arguments_skip_the_cache(fake_fast_type):
    a = _FakeDeviceArray(0, ((4, 8), True, "float32", 0))
    k4 = call.fast(call.typed(("rope", "flat", 4)), (a, None, None), None)[1]
    k4f = call.fast(call.typed(("rope", "flat", 4.0)), (a, None, None), None)[1]
    assert k4 != k4f
    assert call.fast(call.typed(("rope", {"rope_type": "linear"})), (a, None, None), None) == \
        (call.MISS, None)


def test_host_and_simulator_arrays_never_take_the_fast_path():
    assert call.fast(("rope",), (x32(2, 4), None, None), None) == (call.MISS, None)
    if SIMULATED:  # on a GPU cuda.to_device gives a device array, which has a fast path
        assert call.fast(("rope",), (cuda.to_device(x32(2, 4)), None, None), None) \
            == (call.MISS, None)


# ---- streams are validated before any launch -----------------------------------------------------

class _Protocol:
    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        return self.value


@pytest.mark.parametrize("stream, exc, match", [
    (12345, RopeInputError, "RawStream"),  # used to segfault in the driver
    (-1, RopeInputError, "non-negative"),
    (2.0, TypeError, "stream must be"),
    ("0", TypeError, "stream must be"),
    (np.True_, TypeError, "stream must be"),
    (_Protocol((0, -1)), RopeInputError, "non-negative"),
    (_Protocol((0, "x")), TypeError, "int stream handle"),
    (_Protocol((0, None)), TypeError, "int stream handle"),
    (_Protocol((0,)), TypeError, "tuple of two ints"),
    (_Protocol(None), TypeError, "tuple of two ints"),
    (_Protocol((1, 5)), RopeInputError, "version 1"),
    (object(), TypeError, "stream must be"),
])
def test_bad_streams_are_refused_before_any_launch(launches, stream, exc, match):
    x = x32(2, 8)
    before = x.copy()
    with pytest.raises(exc, match=match):
        ropelab.rope(x, stream=stream)
    with pytest.raises(exc, match=match):
        w = np.ones(64, np.float32)
        ropelab.fused_qknorm_rope(np.ones((1, 192), np.float32), num_heads_q=1, num_heads_k=1,
                                  num_heads_v=1, head_dim=64, q_weight=w, k_weight=w,
                                  positions=np.zeros(1, np.int32), stream=stream)
    assert launches == [] and np.array_equal(x, before)


def test_known_raw_handles_vouched_handles_and_numba_streams_are_accepted():
    for handle in (0, 1, 2, np.int64(2)):
        assert streams.resolve(handle) == int(handle)
    assert streams.resolve(ropelab.RawStream(12345)) == 12345
    assert streams.resolve(_Protocol((0, 777))) == 777  # the protocol object vouches
    with pytest.raises(RopeInputError):
        ropelab.RawStream(-5)
    with pytest.raises(TypeError):
        ropelab.RawStream("12345")
    # A numba stream, the simulator's included (it used to be refused there).
    x = x32(3, 8)
    got = ropelab.rope(x, stream=cuda.stream())
    np.testing.assert_allclose(got, ropelab.rope(x), atol=0)


# ---- check_errors and the positions check see every stream ----------------------------------------

def test_check_errors_and_check_positions_synchronize_the_whole_context(monkeypatch):
    """A copy on the legacy stream does not wait for a non-blocking side stream: both reads
    synchronize the context first (the GPU half: test_gpu_public_path)."""
    synced = []
    real = cuda.synchronize
    monkeypatch.setattr(cuda, "synchronize", lambda: (synced.append(1), real())[1])
    launch_module.error_word()
    ropelab.check_errors()
    assert synced == [1]
    if not ropelab.SIMULATED:
        plan = kernels.get("freq_table").plan(ropelab.RopeProblem(3, 1, 8, 8),
                                              dict(cache=True, max_positions=4))
        call.check_device_positions(cuda.to_device(np.arange(3, dtype=np.int32)),
                                    plan.position_limit, plan.limit_reason)
        assert synced == [1, 1]


# ---- the table cache is bounded and keyed by value ------------------------------------------------

def test_cycling_100_cache_sizes_keeps_a_bounded_number_of_device_tables():
    """Tables keyed by id() and never freed would leak GPU memory in a serving loop."""
    x = x32(1, 4)
    pos = np.zeros(1, np.int32)
    first = None
    for m in range(2, 102):
        ropelab.rope(x, variant="freq_table", positions=pos, cache=True, max_positions=m)
        if first is None:
            first = [weakref.ref(t) for t in launch_module._tables.values()]
        assert launch_module.live_tables() <= launch_module.MAX_TABLES
    import gc

    gc.collect()
    assert first and all(r() is None for r in first), "an evicted device table is still alive"


def test_a_table_rebuilt_with_the_same_values_reuses_its_device_copy():
    t = np.arange(12, dtype=np.float32).reshape(3, 4)
    copy = launch_module.device_table(t)
    assert launch_module.device_table(t.copy()) is copy  # another object, the same value
    assert launch_module.device_table(t + 1) is not copy


# ---- silent wrong results are refused --------------------------------------------------------------

def _fused(**kw):
    w = np.ones(64, np.float32)
    args = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64, q_weight=w,
                k_weight=w, positions=np.zeros(1, np.int32))
    args.update(kw)
    return ropelab.fused_qknorm_rope(args.pop("qkv", np.ones((1, 192), np.float32)), **args)


@pytest.mark.parametrize("variant", ["flat", "pack4", "pair_sincos"])
def test_a_base_that_overflows_float32_is_refused(launches, variant):
    with pytest.raises(RopeInputError, match="fit float32"):
        ropelab.rope(x32(2, 8), variant=variant, base=1e39)
    with pytest.raises(RopeInputError, match="fit float32"):
        _fused(base=1e39)
    assert launches == []


def test_an_eps_that_rounds_to_zero_is_refused_but_zero_is_allowed(launches):
    with pytest.raises(RopeInputError, match="rounds to 0"):
        _fused(eps=1e-50)
    assert launches == []
    _fused(eps=0.0)


def test_scaling_that_overflows_the_angles_is_refused(launches):
    with pytest.raises(RopeInputError, match="overflows float32"):
        ropelab.rope(x32(2, 8), variant="freq_table", scaling=scaling.Linear(1e-38))
    assert launches == []


# ---- wrong refusals fixed --------------------------------------------------------------------------

def test_rope_type_default_is_plain_rope_even_for_the_seed_variants():
    x = x32(3, 8)
    for variant in ("flat", "block2d", "pack4"):
        got = ropelab.rope(x, variant=variant, scaling={"rope_type": "default"})
        np.testing.assert_array_equal(got, ropelab.rope(x, variant=variant))


def test_numpy_bools_are_bools_for_yarn_truncate():
    a = scaling.YaRN(4.0, 64, truncate=np.False_)
    assert a == scaling.YaRN(4.0, 64, truncate=False) and a.truncate is False


@pytest.mark.parametrize("field, value", [
    ("qkv", np.ones((1, 192), np.float64)),
    ("q_weight", np.ones(64, np.float64)),
    ("positions", np.zeros(1, np.float32)),
])
def test_fused_wrong_dtypes_are_rope_input_errors(launches, field, value):
    with pytest.raises(RopeInputError, match="dtype|float32|integers"):
        _fused(**{field: value})
    assert launches == []


def test_rope_accepts_zero_tokens_like_the_fused_op(launches):
    got = ropelab.rope(np.zeros((0, 2, 8), np.float32), variant="freq_table")
    assert got.shape == (0, 2, 8) and launches == []
    out = np.zeros((0, 8), np.float32)
    assert ropelab.rope(np.zeros((0, 8), np.float32), out=out) is out
    with pytest.raises(TypeError, match="options"):  # still fully checked
        ropelab.rope(np.zeros((0, 8), np.float32), variant="flat", cache=True)
    dev = ropelab.rope(cuda.to_device(np.zeros((0, 8), np.float32)))
    assert dev.shape == (0, 8)


def test_one_position_policy_for_both_ops():
    """Host positions: any int32 without a limit (negative rotates backwards), [0, limit) with a
    cos/sin cache; the same rule in rope and fused_qknorm_rope."""
    pos = np.array([-3], np.int32)
    ropelab.rope(x32(1, 8), positions=pos)
    _fused(positions=pos)
    with pytest.raises(RopeInputError, match="position -3 is out of range"):
        ropelab.rope(x32(1, 8), variant="freq_table", cache=True, max_positions=8, positions=pos)
    with pytest.raises(RopeInputError, match="position -3 is out of range"):
        _fused(positions=pos, cache=True, max_positions=8)
    with pytest.raises(RopeInputError, match="int32"):
        _fused(positions=np.array([2**31], np.int64))


# ---- a new variant is one module plus one registry line -------------------------------------------

def test_a_throwaway_variant_appears_in_check_the_bench_plan_and_the_census(monkeypatch):
    from dataclasses import replace

    from ropelab import check
    from ropelab.kernels import flat
    from ropelab.measure import bench, census

    throwaway = replace(flat.VARIANT, name="throwaway", summary="flat under another name")
    monkeypatch.setitem(kernels.VARIANTS, "throwaway", throwaway)
    monkeypatch.setitem(kernels.MODULES, "throwaway", flat)

    rows = check.run_checks(variants=["throwaway"], shapes=[(1, 6)])
    assert rows and {r.variant for r in rows} == {"throwaway"} and all(r.passed for r in rows)
    assert "throwaway" in {e.name for e in bench.plan(baselines=False)}
    assert "throwaway" in {t["variant"] for t in census.targets()}
    got = ropelab.rope(x32(2, 6), variant="throwaway")
    np.testing.assert_array_equal(got, ropelab.rope(x32(2, 6), variant="flat"))


# ---- the device route and the fast path, driven on the simulator with a recording binder ---------

@pytest.fixture
def device_route(monkeypatch):
    """The GPU route of every op without a GPU (see tests/fake_device.py)."""
    yield from fake_device.route(monkeypatch)


def test_the_second_call_of_a_shape_takes_the_fast_path_on_new_pointers(device_route):
    x, out, pos = CAI(1 << 20, (4, 8)), CAI(2 << 20, (4, 8)), CAI(3 << 20, (4,), "<i4")
    ropelab.rope(x, out=out, positions=pos, variant="pack4")
    assert len(device_route) == 1 and device_route[0].fired == [((1 << 20, 2 << 20, 3 << 20), 0)]
    x2, out2 = CAI(5 << 20, (4, 8)), CAI(6 << 20, (4, 8))
    assert ropelab.rope(x2, out=out2, positions=pos, variant="pack4",
                        stream=ropelab.RawStream(77)) is out2
    assert len(device_route) == 1  # no new validation, no new bind
    assert device_route[0].fired[-1] == ((5 << 20, 6 << 20, 3 << 20), 77)
    ropelab.rope(x2, out=x2, positions=pos, variant="pack4")  # in place: allowed
    with pytest.raises(RopeInputError, match="overlaps x"):
        ropelab.rope(x2, out=CAI((5 << 20) + 64, (4, 8)), positions=pos, variant="pack4")
    with pytest.raises(RopeInputError, match="overlaps positions"):
        ropelab.rope(x2, out=CAI((3 << 20) - 16, (4, 8)), positions=pos, variant="pack4")
    with pytest.raises(RopeInputError, match="RawStream"):
        ropelab.rope(x2, out=out2, positions=pos, variant="pack4", stream=999)
    assert len(device_route[0].fired) == 3


def test_the_fused_fast_path_rechecks_alignment_through_its_key(device_route):
    kw = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64,
              q_weight=CAI(1 << 20, (64,), "<u2"), k_weight=CAI(2 << 20, (64,), "<u2"),
              positions=CAI(3 << 20, (2,), "<i4"))
    for start in ((4 << 20) + 8, (5 << 20) + 8):  # word-aligned, not 16-aligned
        ropelab.fused_qknorm_rope(CAI(start, (2, 256), "<u2"), **kw)
    assert len(device_route) == 1 and len(device_route[0].fired) == 2  # the second: cached
    # 2 bytes off a word (uint16 qkv is bfloat16 bits): refused, not replayed (it used to
    # replay the cached launch and kill the context with a misaligned address).
    with pytest.raises(RopeInputError, match="4-byte aligned"):
        ropelab.fused_qknorm_rope(CAI((6 << 20) + 2, (2, 256), "<u2"), **kw)
    assert len(device_route) == 1 and len(device_route[0].fired) == 2


def test_16bit_pack4_device_route_binds_per_alignment_and_itemsize(device_route):
    from ropelab.kernels import pack4

    pos = CAI(3 << 20, (4,), "<i4")
    ropelab.rope(CAI(1 << 20, (4, 8), "<u2"), out=CAI(2 << 20, (4, 8), "<u2"), positions=pos,
                 variant="pack4")
    assert device_route[0].plan.kernel is pack4.make_vector_kernel("bfloat16")
    assert device_route[0].caller == ((32, 2), (32, 2), (4, 4))  # 2-byte elements
    # 2 bytes off a 16-byte boundary: a new validation that picks the per-element kernel, never
    # a replay of the 64-bit one.
    ropelab.rope(CAI((5 << 20) + 2, (4, 8), "<u2"), out=CAI(6 << 20, (4, 8), "<u2"),
                 positions=pos, variant="pack4")
    assert len(device_route) == 2
    assert device_route[1].plan.kernel is pack4.make_scalar_kernel("bfloat16")
