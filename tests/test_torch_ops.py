"""ropelab's torch custom ops on CPU tensors (the host path; the simulator without a GPU).

What is checked: the ops give what the public functions give; options, 16-bit and strided
tensors pass through to ropelab unchanged (it accepts or refuses them); bad input raises before
anything changes; ``torch.library.opcheck``; ``rope``'s gradient against torch autograd of the
float64 formula, with a planted backward that forgets the inverse; the in-place fused op
refuses to drop a gradient (the fused gradient: tests/test_torch_fused_backward.py); ``torch.compile(fullgraph=True)`` forward and backward equal eager.
Small shapes throughout: each op call runs simulated kernels.
"""

import subprocess
import sys

import numpy as np
import pytest

import ropelab
from ropelab import check as ropelab_check
from ropelab import scaling

torch = pytest.importorskip("torch")
rt = pytest.importorskip("ropelab.torch_ops")
torch_args = pytest.importorskip("ropelab.torch_ops.args")

YARN = scaling.YaRN(4.0, original_max_positions=64)  # attention factor != 1: it must reach dx


def _pos(tokens, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 200, tokens).astype(np.int32))


def _bits(t):
    """A tensor's elements as NumPy (bfloat16 as its uint16 patterns), for exact comparison."""
    return (t.view(torch.uint16) if t.dtype == torch.bfloat16 else t).detach().numpy().copy()


def _outcome(fn):
    """What a call did: ("ok", result as NumPy) or ("raised", exception type, message)."""
    try:
        result = fn()
    except (TypeError, ValueError) as exc:
        return ("raised", type(exc), str(exc))
    return ("ok", _bits(result) if isinstance(result, torch.Tensor) else np.asarray(result))


def _same_outcome(a, b):
    assert a[0] == b[0], (a, b)
    if a[0] == "ok":
        np.testing.assert_array_equal(a[1], b[1])
    else:
        assert a[1:] == b[1:]


# ---- the ops give what the public functions give ------------------------------------------------

@pytest.mark.parametrize("kwargs", [
    dict(variant="flat"),
    dict(variant="pair_sincos", interleave=False, rotary_dim=8, heads=2),
    dict(variant="freq_table", scaling=YARN, cache=True, max_positions=256, heads=2),
    dict(variant="freq_table", scaling={"rope_type": "linear", "factor": 2.0}, inverse=True),
])
def test_rope_op_equals_the_public_call(kwargs):
    kwargs = dict(kwargs)
    heads = kwargs.pop("heads", None)
    shape = (5, heads, 16) if heads else (5, 16)
    x = torch.randn(shape)
    pos = _pos(5)
    want = ropelab.rope(x.numpy(), positions=pos.numpy(), **kwargs)
    got = rt.rope(x, positions=pos, **kwargs)
    np.testing.assert_array_equal(got.numpy(), want)
    out = torch.zeros(shape)
    assert rt.rope(x, positions=pos, out=out, **kwargs) is out
    np.testing.assert_array_equal(out.numpy(), want)
    assert rt.rope(x, positions=pos, out=x, **kwargs) is x  # in place
    np.testing.assert_array_equal(x.numpy(), want)


def test_fused_op_equals_the_public_call_in_bfloat16():
    rng = np.random.default_rng(3)
    qkv, wq, wk, pos = ropelab_check.random_inputs(rng, 3, (2, 1, 1), 64, "bfloat16")
    kw = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64, interleave=False,
              yarn={"factor": 2.0, "low": 4.0, "high": 20.0})
    want = ropelab.fused_qknorm_rope(qkv.copy(), q_weight=wq, k_weight=wk, positions=pos, **kw)
    bf16 = lambda a: torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)  # noqa: E731
    tq = bf16(qkv)
    assert rt.fused_qknorm_rope(tq, q_weight=bf16(wq), k_weight=bf16(wk),
                                positions=torch.from_numpy(pos), **kw) is tq
    np.testing.assert_array_equal(_bits(tq), want)
    # a strided view of a wider tensor (a slice of a wider projection), in place as torch's
    # own ops take one: its columns get the same bits, the other columns stay
    wide = torch.full((3, 2 * qkv.shape[1]), 5.0, dtype=torch.bfloat16)
    view = wide[:, ::2]
    view.copy_(bf16(qkv))
    with torch.no_grad():
        assert rt.fused_qknorm_rope(view, q_weight=bf16(wq), k_weight=bf16(wk),
                                    positions=torch.from_numpy(pos), **kw) is view
    np.testing.assert_array_equal(_bits(view), want)
    assert bool((wide[:, 1::2] == 5).all())


def test_a_compiled_in_place_fused_op_on_a_strided_view_equals_eager():
    w = torch.ones(64, dtype=torch.bfloat16)
    kw = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64, q_weight=w,
              k_weight=w, positions=_pos(4))

    def step(wide):
        rt.fused_qknorm_rope(wide[:, ::2], **kw)  # the view the graph hands the op
        return wide * 1

    base = torch.randn(4, 2 * 4 * 64).to(torch.bfloat16)
    with torch.no_grad():
        compiled = torch.compile(step, fullgraph=True)(base.clone())
        eager = step(base.clone())
    assert torch.equal(compiled, eager) and not torch.equal(eager, base)


def test_16_bit_and_strided_tensors_reach_ropelab_unchanged():
    # Whatever ropelab does with a column slice of a packed row or with 16-bit storage (refuse
    # today; accept once it supports them), the op does the same.
    wide = torch.randn(4, 24)
    pos = _pos(4)
    for x in (wide[:, :16], wide[:, :16].to(torch.float16), wide[:, :16].to(torch.bfloat16)):
        _same_outcome(_outcome(lambda: rt.rope(x, variant="pair_sincos", positions=pos)),
                      _outcome(lambda: ropelab.rope(torch_args.host_view(x), variant="pair_sincos",
                                                    positions=pos.numpy())))


def test_bad_input_raises_before_anything_changes():
    x = torch.randn(4, 16)
    before = x.clone()
    with pytest.raises(ropelab.RopeInputError, match="rotary_dim"):
        rt.rope(x, variant="pair_sincos", rotary_dim=3, out=x)
    with pytest.raises(TypeError, match="unknown|option"):
        rt.rope(x, variant="pair_sincos", no_such_option=1, out=x)
    with pytest.raises(TypeError, match="scaling"):
        rt.rope(x, variant="pair_sincos", scaling=object(), out=x)
    assert torch.equal(x, before)


def test_options_survive_the_config_string():
    for scheme in (YARN, scaling.YaRN.from_ramp(2.0, 3.0, 9.0), scaling.Linear(2.0),
                   scaling.NTK(3.0), scaling.Llama3(8.0, 1.0, 4.0, 8192),
                   {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64}):
        back = rt.decode(rt.encode(scaling=scheme, base=np.float32(500.0), cache=np.True_))
        assert back == {"scaling": scheme, "base": 500.0, "cache": True}


# ---- opcheck -------------------------------------------------------------------------------------

def test_opcheck_every_op():
    pos = _pos(3)
    config = rt.encode(variant="pair_sincos", interleave=False)
    x = torch.randn(3, 2, 8)
    torch.library.opcheck(torch.ops.ropelab.rope.default, (x, pos, config))
    torch.library.opcheck(torch.ops.ropelab.rope.default, (x.clone().requires_grad_(), None, config))
    torch.library.opcheck(torch.ops.ropelab.rope_out.default, (x, pos, torch.empty_like(x), config))
    qkv, w = torch.randn(3, 3 * 64), torch.rand(64) + 0.5
    fused = rt.encode(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64)
    torch.library.opcheck(torch.ops.ropelab.fused_qknorm_rope.default, (qkv, w, w, pos, fused))


# ---- autograd ------------------------------------------------------------------------------------

def reference_rope(x, positions, *, base=10000.0, rotary_dim=None, interleave=True,
                   inverse=False, scaling=None):
    """RoPE's formula in torch float64 (differentiable by torch's autograd)."""
    rotary_dim = rotary_dim or x.shape[-1]
    freqs, attention = ropelab.scaling.resolve(scaling, rotary_dim=rotary_dim, base=base)
    angle = positions.double()[:, None] * torch.from_numpy(freqs)[None, :]
    angle = -angle if inverse else angle
    cos, sin = attention * torch.cos(angle), attention * torch.sin(angle)
    if x.dim() == 3:
        cos, sin = cos[:, None, :], sin[:, None, :]
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if interleave:
        a, b = rot[..., 0::2], rot[..., 1::2]
        rot = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    else:
        a, b = rot[..., :rotary_dim // 2], rot[..., rotary_dim // 2:]
        rot = torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return torch.cat((rot, rest), dim=-1)


def assert_gradient_matches_reference(shape, **kwargs):
    """dL/dx from the op's backward against torch autograd of the float64 formula."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(shape, generator=gen, requires_grad=True)
    upstream = torch.randn(shape, generator=gen)
    pos = _pos(shape[0], seed=1)
    (rt.rope(x, positions=pos, **kwargs) * upstream).sum().backward()
    x64 = x.detach().double().requires_grad_()
    options = {k: v for k, v in kwargs.items() if k in ("base", "rotary_dim", "interleave",
                                                        "inverse", "scaling")}
    (reference_rope(x64, pos, **options) * upstream.double()).sum().backward()
    err = (x.grad.double() - x64.grad).abs().max().item()
    assert err < 1e-5 * max(1.0, x64.grad.abs().max().item()), f"gradient error {err:.3g}"


GRADIENT_CASES = [
    dict(variant="flat"),  # a seed variant: no inverse rotation, its backward is freq_table's
    dict(variant="pair_sincos", interleave=False, rotary_dim=8),
    dict(variant="freq_table", scaling=YARN, cache=True, max_positions=256),
    dict(variant="pair_sincos", inverse=True),
]


@pytest.mark.parametrize("kwargs", GRADIENT_CASES)
def test_rope_gradient_matches_float64_autograd(kwargs):
    shape = (4, 16) if kwargs["variant"] == "flat" else (4, 2, 16)
    assert_gradient_matches_reference(shape, **kwargs)


def test_a_backward_that_forgets_the_inverse_fails(monkeypatch):
    monkeypatch.setattr(rt.rope_op, "backward_config", lambda config: config)  # the forward rotation again
    with pytest.raises(AssertionError, match="gradient error"):
        assert_gradient_matches_reference((4, 2, 16), variant="pair_sincos")


def test_backward_is_a_kernel_launch_with_the_inverse_rotation(monkeypatch):
    calls = []
    public = rt.rope_op._public_rope

    def spy(**kwargs):
        calls.append((kwargs["variant"], kwargs["inverse"]))
        return public(**kwargs)

    monkeypatch.setattr(rt.rope_op, "_public_rope", spy)
    x = torch.randn(4, 16, requires_grad=True)
    rt.rope(x, variant="flat").sum().backward()
    assert calls == [("flat", False), (rt.BACKWARD_FALLBACK, True)]


def test_in_place_fused_op_refuses_a_tensor_that_requires_grad():
    """The mutating op has no gradient (the wrapper goes out of place instead: see
    tests/test_torch_fused_backward.py)."""
    qkv, w = torch.randn(2, 3 * 64), torch.rand(64) + 0.5
    before = qkv.clone()
    kw = dict(num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
              positions=torch.zeros(2, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="no gradient"):  # the op itself, past the wrapper
        torch.ops.ropelab.fused_qknorm_rope(qkv, w.clone().requires_grad_(), w, kw["positions"],
                                            rt.encode(num_heads_q=1, num_heads_k=1,
                                                      num_heads_v=1, head_dim=64))
    assert torch.equal(qkv, before)
    with torch.no_grad():  # inference on trainable weights is fine
        rt.fused_qknorm_rope(qkv, q_weight=w.clone().requires_grad_(), k_weight=w, **kw)
    assert not torch.equal(qkv, before)


def test_rope_out_refuses_a_tensor_that_requires_grad():
    x = torch.randn(4, 16, requires_grad=True)
    with pytest.raises(RuntimeError, match="no gradient"):
        rt.rope(x, out=torch.empty(4, 16))


# ---- torch.compile -------------------------------------------------------------------------------

# Built outside the compiled functions (see ropelab.torch_ops); torch before 2.12 cannot take a
# frozen dataclass into a compiled graph at all, so there the Hugging Face dict form is used.
_TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
LINEAR = scaling.Linear(2.0) if _TORCH >= (2, 12) else {"rope_type": "linear", "factor": 2.0}


def _layer(x, pos, qkv, w):
    y = rt.rope(x * 2.0, variant="pair_sincos", positions=pos, scaling=LINEAR, interleave=False)
    z = y + 1.0
    rt.rope(z, variant="freq_table", positions=pos, out=z)  # in place
    rt.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
                         q_weight=w, k_weight=w, positions=pos)
    return y, z, qkv * 1.0


def _loss(x, pos, upstream):
    return (rt.rope(x, variant="pair_sincos", positions=pos, rotary_dim=8) * upstream).sum()


def test_compiled_fullgraph_equals_eager_forward_and_backward():
    pos = _pos(3)
    x, qkv, w = torch.randn(3, 2, 16), torch.randn(3, 3 * 64), torch.rand(64) + 0.5
    compiled = torch.compile(_layer, fullgraph=True)  # fullgraph: a graph break is an error
    eager = _layer(x, pos, qkv.clone(), w)
    qkv_compiled = qkv.clone()
    got = compiled(x, pos, qkv_compiled, w)
    for a, b in zip(got, eager):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    torch.testing.assert_close(qkv_compiled, eager[2], rtol=0, atol=0)  # mutated in place

    upstream = torch.randn(3, 2, 16)
    grads = []
    # AOTAutograd traces the backward here; the same backward through Inductor is notebook 07's
    # cell (nbval checks "bit for bit: True"), so a cold Inductor cache compiles it once per run.
    for fn in (_loss, torch.compile(_loss, fullgraph=True, backend="aot_eager")):
        xg = x.clone().requires_grad_()
        fn(xg, pos, upstream).backward()
        grads.append(xg.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)
    assert grads[0].abs().max() > 0


def _public_layer(x, pos, qkv, w):
    y = ropelab.rope(x, variant="pair_sincos", positions=pos,
                     scaling={"rope_type": "linear", "factor": 2.0})  # a dict built in the graph
    ropelab.fused_qknorm_rope(qkv, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
                              q_weight=w, k_weight=w, positions=pos)
    return y


def test_public_functions_compile_to_the_ops_once_torch_ops_is_imported():
    if not hasattr(torch.compiler, "substitute_in_graph"):
        pytest.skip("torch < 2.5 has no substitute_in_graph")
    pos = _pos(3)
    x, qkv, w = torch.randn(3, 2, 16), torch.randn(3, 3 * 64), torch.rand(64) + 0.5
    qkv_eager = qkv.clone()
    want = rt.rope(x, variant="pair_sincos", positions=pos, scaling=LINEAR)
    rt.fused_qknorm_rope(qkv_eager, num_heads_q=1, num_heads_k=1, num_heads_v=1, head_dim=64,
                         q_weight=w, k_weight=w, positions=pos)
    got = torch.compile(_public_layer, fullgraph=True, backend="aot_eager")(x, pos, qkv, w)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(qkv, qkv_eager, rtol=0, atol=0)


def test_import_ropelab_does_not_import_torch():
    code = "import sys, ropelab; assert 'torch' not in sys.modules, 'ropelab imported torch'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={"ROPELAB_QUIET": "1", **__import__("os").environ}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# ---- the GPU bench's host side -------------------------------------------------------------------

def test_torch_bench_refuses_the_simulator_and_formats_rows():
    from ropelab.measure import bench
    from ropelab.measure.bench import torch_ops as torch_bench

    if ropelab.SIMULATED:
        with pytest.raises(bench.BenchError, match="simulator"):
            torch_bench.run()
    row = {c: None for c in bench.TORCH_OPS.columns}
    row.update(call="op_compiled", case="flux_1024 bfloat16 gptj", median_us=30.5,
               frac_of_copy=0.95, vs_public=1.012, host_us=41.0, host_bound=False)
    text = bench.format_rows([row], "torch_ops")
    assert "op_compiled" in text and "1.012" in text and "95.0%" in text


def test_torch_bench_cases_dry_run_on_cpu_tensors():
    """Every launcher the GPU bench times runs (on tiny CPU tensors), and the public call, the
    eager op and the compiled op write the same result."""
    from ropelab.measure.bench import torch_ops as torch_bench
    from ropelab.shapes import FusedShape

    label, dtype, layout, nbytes, calls, out = torch_bench.rope_case("float32", (4, 2, 16), "cpu")
    assert (label, dtype, layout, nbytes) == ("4x2x16", "float32", "neox", 2 * 4 * 32 * 4 + 16)
    results = {}
    for name in ("public", "op_eager", "op_compiled"):
        out.zero_()
        calls[name]()
        results[name] = out.clone()
    assert results["public"].abs().max() > 0
    for name in ("op_eager", "op_compiled"):
        torch.testing.assert_close(results[name], results["public"], rtol=0, atol=0)

    tiny = FusedShape("tiny", 2, 1, 1, 1, 64, 64)
    label, dtype, layout, nbytes, calls, qkv = torch_bench.fused_case(True, tiny, "cpu")
    assert (label, dtype, layout, nbytes) == ("tiny", "bfloat16", "neox", 2 * 2 * 2 * 64 * 2)
    for name in ("public", "op_eager", "op_compiled"):
        before = qkv.clone()
        calls[name]()
        assert not torch.equal(qkv, before), name  # each call rotated qkv again, in place
    calls["torch_copy"]()


def test_public_rope_refuses_a_tensor_that_requires_grad_instead_of_detaching_it():
    # A raw launch is invisible to autograd: the eager public call must say so, never return a
    # result without a grad_fn.  Under no_grad the same tensor is just a (CPU) tensor again.
    x = torch.randn(4, 2, 8, requires_grad=True)
    with pytest.raises(ropelab.RopeInputError, match="torch_ops"):
        ropelab.rope(x, variant="freq_table")
    with pytest.raises(ropelab.RopeInputError, match="requires grad"):
        ropelab.fused_qknorm_rope(torch.randn(2, 3 * 8, requires_grad=True), num_heads_q=1,
                                  num_heads_k=1, num_heads_v=1, head_dim=8,
                                  q_weight=np.ones(8, np.float32), k_weight=np.ones(8, np.float32),
                                  positions=np.arange(2, dtype=np.int32))
    with torch.no_grad(), pytest.raises(TypeError, match="CPU torch tensor"):
        ropelab.rope(x, variant="freq_table")


def test_bf16_tensor_through_the_torch_op_gets_16bit_rope_and_its_gradient():
    # The op's default variant is ropelab's default choice: a 16-bit tensor runs rope_rows, and
    # the backward (inverse rotation) runs there too.
    x32 = torch.randn(6, 2, 16)
    x = x32.to(torch.bfloat16).requires_grad_(True)
    pos = torch.arange(6, dtype=torch.int32) * 7
    y = rt.rope(x, positions=pos)
    assert y.dtype == torch.bfloat16
    ref = torch.from_numpy(ropelab.reference.rope(x.detach().float().numpy(), pos.numpy()))
    assert (y.float() - ref).abs().max().item() < 0.05
    g = torch.randn_like(x32)
    (y.float() * g).sum().backward()
    back = torch.from_numpy(ropelab.reference.rope(g.to(torch.bfloat16).float().numpy(),
                                                   pos.numpy(), inverse=True))
    assert (x.grad.float() - back).abs().max().item() < 0.05


# ---- rt.rope takes the public keyword cos_sin_cache (it raised TypeError) -------------------------

def _cos_sin(rows, rotary_dim, seed=5):
    """A float32 [rows, rotary_dim] cos/sin table (cos half, sin half) of random angles."""
    ang = np.random.default_rng(seed).uniform(-3, 3, (rows, rotary_dim // 2))
    return torch.from_numpy(np.concatenate([np.cos(ang), np.sin(ang)], 1).astype(np.float32))


def test_rope_takes_a_cos_sin_cache_with_its_gradient():
    x = torch.randn(4, 2, 16, requires_grad=True)
    pos = torch.tensor([3, 0, 7, 1], dtype=torch.int32)
    cache = _cos_sin(8, 16)
    want = ropelab.rope(x.detach().numpy(), positions=pos.numpy(), cos_sin_cache=cache.numpy())
    y = rt.rope(x, positions=pos, cos_sin_cache=cache)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    g = torch.randn(4, 2, 16)
    (y * g).sum().backward()
    # The rotation by the table's (cos, sin) is orthogonal: dL/dx is g rotated back.
    want_dx = ropelab.rope(g.numpy(), positions=pos.numpy(), cos_sin_cache=cache.numpy(),
                           inverse=True)
    np.testing.assert_allclose(x.grad.numpy(), want_dx, atol=1e-6)
    out = torch.empty(4, 2, 16)
    with torch.no_grad():
        assert rt.rope(x, positions=pos, cos_sin_cache=cache, out=out) is out
    np.testing.assert_array_equal(out.numpy(), want)
    with pytest.raises(ropelab.RopeInputError, match="cos_sin_cache requires grad"):
        rt.rope(x, positions=pos, cos_sin_cache=cache.clone().requires_grad_())
    compiled = torch.compile(lambda t: rt.rope(t, positions=pos, cos_sin_cache=cache),
                             fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x.detach()), y.detach(), rtol=0, atol=0)


# ---- issue 25: host cost of the ops --------------------------------------------------------------

def test_eager_calls_run_the_kernel_function_and_dispatch_when_observed(monkeypatch):
    """An eager wrapper call with nothing watching skips torch's dispatcher; under a dispatch
    mode (here torch's own operator logging mode) the op is dispatched and seen."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    x, pos = torch.randn(3, 16), _pos(3)
    want = rt.rope(x, positions=pos)
    with Log():
        got = rt.rope(x, positions=pos)
    assert any("ropelab.rope" in name for name in seen), seen
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_configs_and_decodes_are_remembered_and_bounded(monkeypatch):
    calls = []
    real = torch_args.encode
    monkeypatch.setattr(torch_args, "encode", lambda **o: calls.append(o) or real(**o))
    monkeypatch.setattr(torch_args, "_configs", {})
    a = torch_args.config_of(("base", "interleave"), (500.0, True))
    b = torch_args.config_of(("base", "interleave"), (500.0, True))
    c = torch_args.config_of(("base", "interleave"), (500.0, 1))  # 1 == True, but not a bool
    assert a == b and a != c and len(calls) == 2
    assert torch_args.decoded(a) is torch_args.decoded(a)  # parsed once
    monkeypatch.setattr(torch_args, "MAX_CONFIGS", 2)
    for base in (1.0, 2.0, 3.0):
        torch_args.config_of(("base",), (base,))
    assert len(torch_args._configs) <= 2


def test_in_place_ops_bump_the_version_of_what_they_write():
    """A backward that saved the tensor before the op wrote it must fail, not use new values."""
    w = torch.randn(3, 16, requires_grad=True)
    x = torch.randn(3, 16)
    y = w * x  # saves x
    rt.rope(x, positions=_pos(3), out=x)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


# ---- gradcheck: float32, the README's tolerances ------------------------------------------------

def _rope_gradcheck():
    pos = torch.tensor([0, 3, 5], dtype=torch.int32)
    x = torch.randn(3, 2, 16, generator=torch.Generator().manual_seed(0), requires_grad=True)
    return torch.autograd.gradcheck(
        lambda t: rt.rope(t, variant="pair_sincos", positions=pos, fastmath=False), (x,),
        eps=1e-2, atol=1e-3, rtol=1e-3, raise_exception=False)


def test_float32_gradcheck_with_the_documented_tolerances(monkeypatch):
    assert _rope_gradcheck()
    # The fused op's line in the README (eps=1e-2, atol=rtol=1e-2) passes too, but its ~900
    # simulated launches take minutes here: its gradients are tested against float64 autograd
    # in tests/test_torch_fused_backward.py instead.
    with pytest.raises(ropelab.RopeInputError, match="float32"):  # refused, not cast
        rt.rope(torch.randn(3, 16, dtype=torch.float64), positions=_pos(3))
    monkeypatch.setattr(rt.rope_op, "backward_config", lambda config: config)  # the forward rotation again
    assert not _rope_gradcheck()
