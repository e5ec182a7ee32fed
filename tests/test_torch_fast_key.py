"""The torch ops' kernels call the engine's fast path themselves (``ropelab.ops.call.fast``) with
scalars computed once per config (``ropelab.torch_ops.args.fast_scalars``), so that a repeated
training call skips the public functions' keyword binding.  That only works while those
scalars are exactly the ones the public function builds: a mismatch would never raise, it
would send every call down the validating path (slow) or, worse, hit another call shape's
entry.  These tests pin the equality for the fused forward (in place and into ``out``) and
its backward, over configs that change every scalar's value and type."""

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ropelab.ops import call, fused, fused_backward  # noqa: E402
from ropelab.scaling import YaRN  # noqa: E402
from ropelab.torch_ops import fused_op  # noqa: E402
from ropelab.torch_ops.args import config_of, fast_scalars  # noqa: E402

HEADS = dict(num_heads_q=2, num_heads_k=1, num_heads_v=1, head_dim=64)
CONFIGS = [
    {},
    dict(eps=1e-5, base=500000.0, interleave=False),
    dict(rotary_dim=32, fastmath=False, warps_per_block=2, heads_per_warp=1),
    dict(cache=True, max_positions=64),
    dict(yarn=YaRN.from_ramp(4.0, 2, 20)),
    dict(eps=1, base=10000),  # ints where floats are usual: their types are in the key
]


def _config(options: dict) -> str:
    """The config string the wrapper ``rt.fused_qknorm_rope`` builds for these options."""
    defaults = {n: p.default for n, p in
                inspect.signature(fused_op.fused_qknorm_rope).parameters.items()}
    values = dict(defaults, **HEADS, **options)
    return config_of(fused_op._FUSED_OPTIONS, tuple(values[n] for n in fused_op._FUSED_OPTIONS))


def _key_scalars(monkeypatch, public, arrays: dict, options: dict):
    """The scalars ``public`` hands ``call.fast`` for these arguments (the call then runs on
    the host, where nothing is remembered)."""
    seen = []
    real = call.fast

    def spy(scalars, arrays, stream):
        seen.append(scalars)
        return real(scalars, arrays, stream)

    monkeypatch.setattr(call, "fast", spy)
    public(**arrays, **options)
    monkeypatch.setattr(call, "fast", real)
    assert len(seen) == 1
    return seen[0]


def _inputs(tokens=3):
    rng = np.random.default_rng(0)
    width = 4 * HEADS["head_dim"]
    qkv = rng.standard_normal((tokens, width)).astype(np.float32)
    w = np.ones(HEADS["head_dim"], np.float32)
    return qkv, w, np.arange(tokens, dtype=np.int32)


@pytest.mark.parametrize("options", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("separate", [False, True])
def test_forward_scalars_are_the_public_functions(monkeypatch, options, separate):
    config = _config(options)
    qkv, w, pos = _inputs()
    arrays = dict(qkv=qkv, q_weight=w, k_weight=w, positions=pos)
    if separate:
        arrays["out"] = np.empty_like(qkv)
    public = _key_scalars(monkeypatch, fused.fused_qknorm_rope, arrays,
                          fused_op.options_for(fused_op._public_fused, config))
    ours = fast_scalars(fused_op._public_fused, fused.fast_scalars, config, separate)
    assert ours == public


@pytest.mark.parametrize("options", CONFIGS, ids=range(len(CONFIGS)))
def test_backward_scalars_are_the_public_functions(monkeypatch, options):
    config = _config(options)
    qkv, w, pos = _inputs()
    arrays = dict(qkv=qkv, grad=np.ones_like(qkv), q_weight=w, k_weight=w, positions=pos)
    public = _key_scalars(monkeypatch, fused_backward.fused_qknorm_rope_backward, arrays,
                          fused_op._backward_options(config))
    assert fused_op._backward_scalars(config) == public


def test_a_wrong_scalar_changes_the_key():
    """The comparison above can fail: one option changed gives other scalars."""
    a = fast_scalars(fused_op._public_fused, fused.fast_scalars, _config({}), True)
    b = fast_scalars(fused_op._public_fused, fused.fast_scalars, _config(dict(eps=1e-5)), True)
    c = fast_scalars(fused_op._public_fused, fused.fast_scalars, _config({}), False)
    assert a != b and a != c
