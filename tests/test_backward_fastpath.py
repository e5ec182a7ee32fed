"""The public fused backward on the engine's device route, checked on the host with a recording
stand-in for the bound launches (no kernel runs, no GPU): a cached call shape is not
re-validated, fires main then reduce on fresh outputs, and every refusal still happens."""

import numpy as np
import pytest

import ropelab
from ropelab.errors import RopeInputError
from ropelab.ops import arrays, call, fused_backward, memory

import fake_device
from fake_device import RecordingBound as Bound


def CAI(ptr, shape, typestr="<u2"):  # bfloat16 bits unless said otherwise
    return fake_device.CAI(ptr, shape, typestr)


class Buffer:
    """What the fake allocator hands out: a pointer and a shape, sliceable like an array."""

    def __init__(self, ptr, n):
        self.ptr, self.n = ptr, n
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False),
                                         "strides": None, "version": 3}

    def __getitem__(self, s):
        start, stop, _ = s.indices(self.n)
        return Buffer(self.ptr + 4 * start, stop - start)


@pytest.fixture
def route(monkeypatch):
    record = {"bounds": [], "allocs": [], "fills": [], "validations": 0}
    next_ptr = [1 << 30]

    def bind(plan, caller):
        record["bounds"].append(Bound(plan, caller))
        return record["bounds"][-1]

    def fresh(n_bytes, shape):
        p = next_ptr[0]
        next_ptr[0] += (n_bytes + 4095) // 4096 * 4096
        record["allocs"].append(p)
        return CAI(p, shape) if shape is not None else Buffer(p, n_bytes // 4)

    def maker(info):
        return (lambda x: fresh(int(np.prod(info.shape)) * 2, info.shape),
                lambda a: a.__cuda_array_interface__["data"][0])

    def buffer_maker(info, n, zero, dtype=None):
        return lambda x: fresh(np.dtype(dtype or info.dtype).itemsize * n, None)

    real_build = fused_backward.build_problem

    def counting_build(*a, **kw):
        record["validations"] += 1
        return real_build(*a, **kw)

    monkeypatch.setattr(call, "bind", bind)
    monkeypatch.setattr(call, "register_fast_types", lambda: None)
    monkeypatch.setattr(call, "SIMULATED", False)
    monkeypatch.setattr(memory, "zero_fill",
                        lambda p, words, h: record["fills"].append((p, words, h)))
    monkeypatch.setattr(memory, "maker", maker)
    monkeypatch.setattr(memory, "buffer_maker", buffer_maker)
    monkeypatch.setattr(fused_backward, "SIMULATED", False)
    monkeypatch.setattr(fused_backward, "build_problem", counting_build)
    monkeypatch.setitem(arrays.FAST_META, fake_device.CAI, arrays.cai_meta)
    call.clear()
    yield record
    call.clear()


# bfloat16 (uint16 bits) qkv of 4 tokens, 2 Q + 1 K + 1 V heads of 64: rows of 256 elements.
TOKENS, ROW, HD = 4, 256, 64


def _args(base, **extra):
    kw = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=HD,
              q_weight=CAI(base + (1 << 20), (HD,)), k_weight=CAI(base + (2 << 20), (HD,)),
              positions=CAI(base + (3 << 20), (TOKENS,), "<i4"))
    kw.update(extra)
    return CAI(base, (TOKENS, ROW)), CAI(base + (4 << 20), (TOKENS, ROW)), kw


def _call(base, **extra):
    qkv, grad, kw = _args(base, **extra)
    return ropelab.fused_qknorm_rope_backward(qkv, grad, **kw)


def test_the_second_call_is_not_revalidated_and_fires_main_then_reduce(route):
    out1 = _call(1 << 24)
    assert route["validations"] == 1 and len(route["bounds"]) == 2
    main, reduce = route["bounds"]
    assert main.plan.kernel.__name__ == "fused_qknorm_rope_backward"
    assert reduce.plan.kernel.__name__ == "reduce_partials"
    out2 = _call(2 << 24)
    assert route["validations"] == 1 and len(route["bounds"]) == 2  # a hit: no check, no bind
    rows = main.plan.grid[0]
    for base, (dqkv, dq, dk), k in ((1 << 24, out1, 0), (2 << 24, out2, 1)):
        sums = dq.ptr - rows * 2 * HD * 4
        assert main.fired[k] == ((base, base + (4 << 20), dqkv.__cuda_array_interface__["data"][0],
                                  base + (1 << 20), base + (2 << 20), base + (3 << 20), sums), 0)
        assert reduce.fired[k] == ((sums, dq.ptr), 0)
        assert dk.ptr == dq.ptr + 4 * HD and dq.n == dk.n == HD
    assert out1[0] is not out2[0] and out1[1].ptr != out2[1].ptr  # fresh outputs each call
    assert route["fills"] == []  # two-stage writes every partial row: nothing to zero


def test_atomic_mode_zero_fills_dw_on_the_launch_stream_and_has_no_reduce(route):
    for base in (1 << 24, 2 << 24):
        qkv, grad, kw = _args(base, dw="atomic")
        _, dq, dk = ropelab.fused_qknorm_rope_backward(qkv, grad, stream=ropelab.RawStream(55),
                                                       **kw)
        assert route["fills"][-1] == (dq.ptr, 2 * HD, 55)
        assert route["bounds"][0].fired[-1][0][6] == dq.ptr and route["bounds"][0].fired[-1][1] == 55
    assert route["validations"] == 1 and len(route["bounds"]) == 1


@pytest.mark.parametrize("change, match", [
    (lambda q, g, kw: (CAI((9 << 24) + 2, (TOKENS, ROW)), g, kw), "4-byte aligned"),
    (lambda q, g, kw: (q, CAI((9 << 24) + 2, (TOKENS, ROW)), kw), "4-byte aligned"),
    (lambda q, g, kw: (q, g, {**kw, "head_dim": 64.0}), "head_dim"),
    (lambda q, g, kw: (q, g, {**kw, "interleave": 1}), "interleave"),
    (lambda q, g, kw: (q, g, {**kw, "dw": "fast"}), "dw must be one of"),
    (lambda q, g, kw: (q, CAI(9 << 24, (TOKENS, ROW), "<f2"), kw), "grad must have"),
    (lambda q, g, kw: (q, g, {**kw, "positions": CAI(9 << 24, (TOKENS,), "<i8")}), "int32"),
    (lambda q, g, kw: (q, g, {**kw, "stream": 12345}), "RawStream"),
])
def test_every_refusal_still_happens_after_a_hit(route, change, match):
    _call(1 << 24)
    _call(2 << 24)
    fired = [len(b.fired) for b in route["bounds"]]
    qkv, grad, kw = change(*_args(3 << 24))
    with pytest.raises((RopeInputError, TypeError), match=match):
        ropelab.fused_qknorm_rope_backward(qkv, grad, **kw)
    assert [len(b.fired) for b in route["bounds"][:2]] == fired  # nothing launched


def test_a_16byte_misaligned_weight_rebinds_the_scalar_kernel_instead_of_replaying(route):
    _call(1 << 24)
    qkv, grad, kw = _args(2 << 24)
    kw["q_weight"] = CAI((2 << 24) + (1 << 20) + 4, (HD,))  # word-aligned, not 8-byte aligned
    ropelab.fused_qknorm_rope_backward(qkv, grad, **kw)
    assert route["validations"] == 2 and len(route["bounds"]) == 4
    assert route["bounds"][0].plan.kernel is not route["bounds"][2].plan.kernel


def test_host_arrays_keep_the_validating_route(route):
    from ropelab import check as ropelab_check

    rng = np.random.default_rng(0)
    qkv, wq, wk, pos = ropelab_check.random_inputs(rng, 2, (1, 1, 0), 64, "float32")
    for _ in range(2):
        ropelab.fused_qknorm_rope_backward(qkv, qkv.copy(), num_heads_q=1, num_heads_k=1,
                                           num_heads_v=0, head_dim=64, q_weight=wq, k_weight=wk,
                                           positions=pos)
    assert route["validations"] == 2 and route["bounds"] == []
