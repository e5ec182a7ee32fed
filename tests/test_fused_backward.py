"""The fused QK-RMSNorm + RoPE backward: its float64 reference against torch autograd, the Numba
kernel against the reference (every storage, both layouts, partial rotary, YaRN, both caches,
both weight-gradient modes), a planted error per output, determinism and input checking.

Simulator shapes stay tiny (3 tokens, a few heads, head_dim 64 or 128): each case runs a few
hundred Python threads.  Budget: about 100 s on 2 cores.
"""

import numpy as np
import pytest

import ropelab
from ropelab import bf16, reference, scaling, tolerance
from ropelab.kernels.fused_qknorm_rope import backward as kmod, backward_host, backward_reduce
from ropelab.ops.fused_backward import fused_qknorm_rope_backward as backward

torch = pytest.importorskip("torch")

STORAGES = ["float32", "float16", "bfloat16"]
YARN = dict(factor=8.0, low=3.0, high=11.0, attention_factor=1.3)


# ---- the reference against torch autograd of the forward formula ---------------------------------

def torch_forward(x, wq, wk, pos, hq, hk, hv, d, rotary_dim, interleave, freqs, att, eps):
    """The fused forward written in torch float64, independently of ropelab.reference."""
    t = x.shape[0]
    heads = x.reshape(t, hq + hk + hv, d)
    qk = heads[:, :hq + hk]
    w = torch.cat([wq.expand(hq, d), wk.expand(hk, d)])
    z = qk * torch.rsqrt((qk * qk).mean(-1, keepdim=True) + eps) * w
    ang = pos[:, None, None] * freqs[None, None, :]
    c, s = att * torch.cos(ang), att * torch.sin(ang)
    half = rotary_dim // 2
    if interleave:
        a, b = z[..., 0:rotary_dim:2], z[..., 1:rotary_dim:2]
        rot = torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2)
    else:
        a, b = z[..., :half], z[..., half:rotary_dim]
        rot = torch.cat([a * c - b * s, a * s + b * c], dim=-1)
    y = torch.cat([rot, z[..., rotary_dim:]], dim=-1)
    return torch.cat([y, heads[:, hq + hk:]], dim=1).reshape(x.shape)


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("rotary_dim", [16, 8])
@pytest.mark.parametrize("yarn", [None, YARN])
def test_reference_backward_matches_torch_autograd(rng, interleave, rotary_dim, yarn):
    t, hq, hk, hv, d, eps = 4, 3, 2, 1, 16, 1e-5
    x = rng.standard_normal((t, (hq + hk + hv) * d)) * 2
    wq, wk = rng.uniform(-1.5, 1.5, d), rng.uniform(-1.5, 1.5, d)
    pos = rng.integers(-20, 3000, t)
    grad = rng.standard_normal(x.shape)
    freqs, att = scaling.resolve(scaling.as_fused_yarn(yarn), rotary_dim=rotary_dim, base=1e4)
    tx, twq, twk = (torch.tensor(a, requires_grad=True) for a in (x, wq, wk))
    y = torch_forward(tx, twq, twk, torch.tensor(pos, dtype=torch.float64), hq, hk, hv, d,
                      rotary_dim, interleave, torch.tensor(freqs), att, eps)
    y.backward(torch.tensor(grad))
    dx, dq, dk = reference.fused_qknorm_rope_backward(
        x, grad, num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d, q_weight=wq,
        k_weight=wk, positions=pos, eps=eps, rotary_dim=rotary_dim, interleave=interleave,
        freqs=freqs, attention_factor=att)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(dq, twq.grad.numpy(), rtol=1e-10, atol=1e-11)
    np.testing.assert_allclose(dk, twk.grad.numpy(), rtol=1e-10, atol=1e-11)
    # and the torch forward is the reference's forward (the same function was differentiated)
    np.testing.assert_allclose(y.detach().numpy(), reference.fused_qknorm_rope(
        x, num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d, q_weight=wq, k_weight=wk,
        positions=pos, eps=eps, rotary_dim=rotary_dim, interleave=interleave, freqs=freqs,
        attention_factor=att), rtol=1e-12, atol=1e-12)


# ---- the kernel against the reference ---------------------------------------------------------------

def make_case(rng, storage, *, tokens=3, hq=2, hk=1, hv=1, d=64, max_pos=3000):
    x = (rng.standard_normal((tokens, (hq + hk + hv) * d)) * 2).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    wq = rng.uniform(-1.5, 1.5, d).astype(np.float32)
    wk = rng.uniform(-1.5, 1.5, d).astype(np.float32)
    arrays = [x, g, wq, wk]
    if storage == "float16":
        arrays = [a.astype(np.float16) for a in arrays]
    elif storage == "bfloat16":
        arrays = [bf16.from_float32(a) for a in arrays]
    pos = rng.integers(0, max_pos, tokens).astype(np.int32)
    return arrays, pos, dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=d)


def decode(a, storage):
    return bf16.to_float32(a).astype(np.float64) if storage == "bfloat16" else a.astype(np.float64)


def judge(storage, arrays, pos, heads, *, rotary_dim=None, interleave=True, yarn=None,
          fastmath=True, cache=False, eps=1e-6, chain=None):
    """The float64 gradients and the tolerances of :func:`ropelab.tolerance.backward_atol`."""
    x, g, wq, wk = (decode(a, storage) for a in arrays)
    d = heads["head_dim"]
    rd = d if rotary_dim is None else rotary_dim
    freqs, att = scaling.resolve(scaling.as_fused_yarn(yarn), rotary_dim=rd, base=1e4)
    ref = reference.fused_qknorm_rope_backward(
        x, g, q_weight=wq, k_weight=wk, positions=pos, eps=eps, rotary_dim=rd,
        interleave=interleave, freqs=freqs, attention_factor=att, **heads)
    nqk = heads["num_heads_q"] + heads["num_heads_k"]
    xs = x.reshape(x.shape[0], -1, d)[:, :nqk]
    r = np.sqrt((xs**2).mean(-1) + eps)
    units = x.shape[0] * max(heads["num_heads_q"], heads["num_heads_k"])
    atols = tolerance.backward_atol(
        head_dim=d, dy_max=np.abs(g).max(), n_max=np.abs(xs / r[..., None]).max(),
        w_max=max(np.abs(wq).max(), np.abs(wk).max()), inv_r_max=(1 / r).max(),
        dx_max=np.abs(ref[0]).max(), units=units,
        angle=tolerance.max_angle(pos, freqs), storage=storage, fastmath=fastmath,
        attention_factor=att, cache=cache, chain=chain)
    return ref, atols


def mismatches(got, ref, atols, storage):
    """Names of the outputs outside their tolerance (empty: all pass)."""
    dx, dq, dk = got
    bad = []
    if not np.all(np.abs(decode(dx, storage) - ref[0]) <= atols[0]):
        bad.append("dx")
    if not np.all(np.abs(dq - ref[1]) <= atols[1]):
        bad.append("dq_weight")
    if not np.all(np.abs(dk - ref[2]) <= atols[1]):
        bad.append("dk_weight")
    return bad


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize("rotary_dim", [None, 32])
def test_kernel_matches_reference(rng, storage, interleave, rotary_dim):
    arrays, pos, heads = make_case(rng, storage)
    x, g, wq, wk = arrays
    got = backward(x, g, q_weight=wq, k_weight=wk, positions=pos, rotary_dim=rotary_dim,
                   interleave=interleave, **heads)
    ref, atols = judge(storage, arrays, pos, heads, rotary_dim=rotary_dim, interleave=interleave)
    assert got[0].dtype == x.dtype and got[1].dtype == np.float32
    assert mismatches(got, ref, atols, storage) == []
    nqk = (heads["num_heads_q"] + heads["num_heads_k"]) * heads["head_dim"]
    np.testing.assert_array_equal(got[0][:, nqk:], g[:, nqk:])  # V: the gradient passes through


@pytest.mark.parametrize("option", ["yarn", "cache", "user_cache", "gqa_128", "atomic", "no_fastmath",
                                    "odd_pairs"])
def test_kernel_options_match_reference(rng, option):
    storage = "bfloat16" if option != "no_fastmath" else "float32"
    shape = dict(hq=3, hk=1, hv=2, d=128) if option == "gqa_128" else {}
    arrays, pos, heads = make_case(rng, storage, **shape)
    x, g, wq, wk = arrays
    kw, jw = {}, {}
    if option == "yarn":
        kw = jw = dict(yarn=YARN)
    elif option == "cache":
        kw, jw = dict(cache=True, max_positions=3000), dict(cache=True)
    elif option == "user_cache":
        ang = np.outer(np.arange(3000), reference.inv_freq(64, 1e4))
        kw = dict(cos_sin_cache=np.concatenate([np.cos(ang), np.sin(ang)], 1).astype(np.float32))
        jw = dict(cache=True)
    elif option == "atomic":
        kw = dict(dw="atomic", interleave=False, rotary_dim=32)
        jw = dict(interleave=False, rotary_dim=32)
    elif option == "no_fastmath":
        kw = jw = dict(fastmath=False)
    elif option == "odd_pairs":  # GPT-J rotary_dim 6: a lane's second pair passes through
        kw = jw = dict(rotary_dim=6)
    got = backward(x, g, q_weight=wq, k_weight=wk, positions=pos, **heads, **kw)
    ref, atols = judge(storage, arrays, pos, heads, **jw)
    assert mismatches(got, ref, atols, storage) == []


def test_grid_stride_loop_covers_every_unit(rng):
    """Fewer warps than (token, head) units: each warp loops; every head still gets its dx."""
    arrays, pos, heads = make_case(rng, "float32", tokens=5, hq=2, hk=2, hv=1)
    x, g, wq, wk = arrays
    got = backward(x, g, q_weight=wq, k_weight=wk, positions=pos, warps_per_block=2,
                   max_blocks=2, **heads)
    ref, atols = judge("float32", arrays, pos, heads, chain=25)
    assert mismatches(got, ref, atols, "float32") == []


@pytest.mark.parametrize("output", ["dx", "dq_weight", "dk_weight"])
def test_planted_error_in_each_output_is_caught(rng, output):
    """The check that passes the kernel fails on an output off by a small, plausible bug: one
    element off by 1% of that output's largest value (a wrong sign or dim is far larger).
    Precise sin/cos and positions below 50: the budget a GPU run would be held to here."""
    arrays, pos, heads = make_case(rng, "float32", max_pos=50)
    x, g, wq, wk = arrays
    got = list(backward(x, g, q_weight=wq, k_weight=wk, positions=pos, fastmath=False, **heads))
    ref, atols = judge("float32", arrays, pos, heads, fastmath=False)
    assert mismatches(got, ref, atols, "float32") == []
    which = ["dx", "dq_weight", "dk_weight"].index(output)
    planted = got[which].copy()
    flat = planted.reshape(-1)
    flat[3] += np.float32(0.01 * np.abs(ref[which]).max())
    got[which] = planted
    assert mismatches(got, ref, atols, "float32") == [output]


def test_two_stage_is_bitwise_repeatable_and_agrees_with_atomic(rng):
    arrays, pos, heads = make_case(rng, "float32", tokens=4, hq=2, hk=2, hv=0)
    x, g, wq, wk = arrays
    kw = dict(q_weight=wq, k_weight=wk, positions=pos, warps_per_block=2, max_blocks=3, **heads)
    first = backward(x, g, **kw)
    second = backward(x, g, **kw)
    for a, b in zip(first, second):
        assert a.tobytes() == b.tobytes()
    atomic = backward(x, g, dw="atomic", **kw)
    np.testing.assert_array_equal(atomic[0], first[0])  # dx does not depend on the mode
    ref, atols = judge("float32", arrays, pos, heads, chain=20)
    assert mismatches(atomic, ref, atols, "float32") == []


@pytest.mark.parametrize("phases, rows", [(32, 70), (5, 70), (3, 3)])
def test_reduction_sums_rows_in_a_fixed_order(phases, rows):
    """The second stage alone, in blocks of ``phases`` x 32 threads: rows summed as thread rows
    t, t + phases, ..., then the ``phases`` thread sums in order: the same float32 result as
    that order computed in NumPy."""
    from numba import cuda

    from ropelab.kernels.launch import launch
    from ropelab.kernels.plan import Plan

    rng = np.random.default_rng(3)
    width = 40
    partial = (rng.standard_normal(rows * width) * 10 ** rng.uniform(-3, 3, rows * width)).astype(np.float32)
    dw = cuda.device_array(width, np.float32)
    plan = Plan(backward_reduce.make_reduce(phases), True, grid=(2,), block=(32 * phases,),
                caller=(np.dtype(np.float32),) * 2)
    launch(plan, [cuda.to_device(partial), dw])
    p = partial.reshape(rows, width)
    want = np.zeros(width, np.float32)
    for t in range(phases):
        s = np.zeros(width, np.float32)
        for b in range(t, rows, phases):
            s = s + p[b]
        want = want + s
    assert dw.copy_to_host().tobytes() == want.tobytes()


@pytest.mark.parametrize("units, height", [(12, 2), (8 * 40, 32), (8 * 32, 32), (8 * 31 + 1, 32)])
def test_the_reduction_block_is_as_tall_as_the_rows_up_to_32(units, height):
    """One thread row per partial row up to REDUCE_PHASES: with one row a phase the order is the
    plain one, so a small problem adds its rows exactly as a 32-row block would, without the
    idle rows (on the simulator each idle thread is a Python thread)."""
    from types import SimpleNamespace

    problem = SimpleNamespace(tokens=units, heads_q=1, heads_k=0, heads_v=0, head_dim=64,
                              interleave=True, storage="float32", rotary_dim=64, eps=1e-6,
                              attention_factor=1.0, inv_freq=np.ones(32))
    main, reduce = backward_host.plans(problem, max_blocks=1000)
    assert backward_host.partial_rows(main) == -(-units // kmod.WARPS_PER_BLOCK)
    assert reduce.block == (32 * height, 1, 1)
    assert reduce.kernel is backward_reduce.make_reduce(height)  # the height is compiled in
    if height == backward_reduce.REDUCE_PHASES:
        assert reduce.kernel is backward_reduce.reduce_partials


# ---- input checking ---------------------------------------------------------------------------------

def test_bad_inputs_are_refused_before_anything_runs(rng):
    arrays, pos, heads = make_case(rng, "float32")
    x, g, wq, wk = arrays
    kw = dict(q_weight=wq, k_weight=wk, positions=pos, **heads)
    with pytest.raises(ropelab.RopeInputError, match="grad must have"):
        backward(x, g[:, :-64], **kw)
    with pytest.raises(ropelab.RopeInputError, match="grad must have"):
        backward(x, g.astype(np.float16), **kw)
    with pytest.raises(ropelab.RopeInputError, match="dw must be"):
        backward(x, g, dw="tree", **kw)
    with pytest.raises(ropelab.RopeInputError, match="excludes cache"):
        backward(x, g, cos_sin_cache=np.zeros((8, 64), np.float32), cache=True, max_positions=8, **kw)
    with pytest.raises(ropelab.RopeInputError, match=r"cos_sin_cache must be \[max_pos, rotary_dim\]"):
        backward(x, g, cos_sin_cache=np.zeros((8, 32), np.float32), **kw)
    with pytest.raises(ropelab.RopeInputError, match="positions 0 .. 7"):
        backward(x, g, cos_sin_cache=np.zeros((8, 64), np.float32), **kw)
    with pytest.raises(ropelab.RopeInputError, match="out of range"):
        backward(x, g, cache=True, max_positions=16, **kw)  # positions up to 3000


def test_no_tokens_gives_zero_weight_gradients():
    heads = dict(num_heads_q=1, num_heads_k=1, num_heads_v=0, head_dim=64)
    x = np.zeros((0, 128), np.float32)
    w = np.ones(64, np.float32)
    dx, dq, dk = backward(x, x.copy(), q_weight=w, k_weight=w, positions=np.zeros(0, np.int32),
                          **heads)
    assert dx.shape == (0, 128) and not dq.any() and not dk.any()


def test_device_arrays_and_the_error_word_of_the_cache(rng):
    """Simulated device arrays take the device route; a device position past the cache makes
    that token's Q and K gradients NaN and is reported by check_errors, as in the forward."""
    from numba import cuda

    arrays, pos, heads = make_case(rng, "bfloat16", max_pos=16)
    pos[1] = 20  # no row for it
    dev = [cuda.to_device(a) for a in arrays]
    ropelab.check_errors()  # start clean
    dx, dq, dk = backward(dev[0], dev[1], q_weight=dev[2], k_weight=dev[3],
                          positions=cuda.to_device(pos), cache=True, max_positions=16, **heads)
    got = bf16.to_float32(dx.copy_to_host())
    nqk = 3 * 64
    assert np.isnan(got[1, :nqk]).all() and not np.isnan(got[[0, 2]]).any()
    assert np.array_equal(dx.copy_to_host()[:, nqk:], arrays[1][:, nqk:])  # V passes through
    with pytest.raises(ropelab.RopeDeviceError, match="20"):
        ropelab.check_errors()


@pytest.mark.parametrize("hq,hk,hv", [(0, 2, 1), (2, 0, 0)])
def test_one_kind_of_head_only(rng, hq, hk, hv):
    arrays, pos, heads = make_case(rng, "float32", hq=hq, hk=hk, hv=hv)
    x, g, wq, wk = arrays
    got = backward(x, g, q_weight=wq, k_weight=wk, positions=pos, **heads)
    ref, atols = judge("float32", arrays, pos, heads)
    assert mismatches(got, ref, atols, "float32") == []
    assert not (got[1] if hq == 0 else got[2]).any()  # no head of that kind: a zero gradient


def test_unaligned_device_arrays_take_the_scalar_build_with_the_same_result(rng, monkeypatch):
    """A bfloat16 qkv 4 bytes past an 8-byte boundary cannot use the 64-bit accesses: the
    scalar build runs, and computes the same bits as the vector build (same arithmetic)."""
    from numba import cuda

    chosen = []
    plans = backward_host.plans
    monkeypatch.setattr(backward_host, "plans",
                        lambda *a, **k: chosen.append(k["aligned"]) or plans(*a, **k))

    arrays, pos, heads = make_case(rng, "bfloat16")
    x, g, wq, wk = arrays
    want = backward(x, g, q_weight=wq, k_weight=wk, positions=pos, **heads)
    buf = np.zeros(x.size + 2, np.uint16)
    buf[2:] = x.reshape(-1)
    dev_x = cuda.to_device(buf)[2:].reshape(x.shape)  # 4 bytes in
    got = backward(dev_x, cuda.to_device(g), q_weight=cuda.to_device(wq),
                   k_weight=cuda.to_device(wk), positions=cuda.to_device(pos), **heads)
    assert chosen == [True, False]  # the host call, then the unaligned device call
    assert got[0].copy_to_host().tobytes() == want[0].tobytes()
    assert got[1].copy_to_host().tobytes() == want[1].tobytes()


@pytest.mark.parametrize("units_per_pass", [2, 3])
@pytest.mark.parametrize("storage,interleave", [("float32", True), ("bfloat16", False),
                                                ("float16", True)])
def test_units_loaded_together_give_the_same_bits(rng, monkeypatch, units_per_pass, storage,
                                                  interleave):
    """A warp that loads several units before computing any of them (more bytes in flight)
    visits the units in the same order and does the same arithmetic on each: the same bits as
    one unit a pass, through a grid-stride loop whose last pass is partial and mixes Q, K and
    V heads (25 units, 4 warps)."""
    arrays, pos, heads = make_case(rng, storage, tokens=5, hq=2, hk=2, hv=1)
    x, g, wq, wk = arrays
    kw = dict(q_weight=wq, k_weight=wk, positions=pos, warps_per_block=2, max_blocks=2,
              interleave=interleave, **heads)
    want = backward(x, g, **kw)
    plans = backward_host.plans
    built = []
    monkeypatch.setattr(backward_host, "plans", lambda *a, **k: built.append(
        plans(*a, **k, units_per_pass=units_per_pass)) or built[-1])
    got = backward(x, g, **kw)
    assert f"_u{units_per_pass}" in built[0][0].kernel.__qualname__
    for a, b in zip(got, want):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    ref, atols = judge(storage, arrays, pos, heads, interleave=interleave, chain=25)
    assert mismatches(got, ref, atols, storage) == []


def test_the_grid_is_one_wave_of_the_build_that_runs():
    """More units a pass take more registers, so fewer blocks fit on an SM: without a GPU the
    grid follows the table of the build's own units, and a cap still wins."""
    from ropelab.problem import FusedProblem

    p = FusedProblem(4096, 24, 24, 24, 128, 128, True, "bfloat16", 1e-6, 1e4,
                     inv_freq=np.ones(64))
    one = backward_host.plans(p)[0].grid[0]
    two = backward_host.plans(p, units_per_pass=2)[0].grid[0]
    assert one == backward_host.H200_SMS * backward_host.blocks_per_sm(128, 1)
    assert two == backward_host.H200_SMS * backward_host.blocks_per_sm(128, 2) < one
    assert backward_host.plans(p, units_per_pass=2, max_blocks=7)[0].grid[0] == 7
    assert backward_host.blocks_per_sm(512, 1) == backward_host.BLOCKS_PER_SM_FEWEST
