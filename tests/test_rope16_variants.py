"""float16 / bfloat16 storage in the pair_sincos and pack4 variants.

Each result is judged against the float64 reference (ropelab.reference) with the 16-bit error
model of ropelab.tolerance.rows_atol (float32 math plus half an ulp of output rounding); a
planted error of 10x that bound must fail the same check.  Tiny shapes: the simulator runs them.
"""

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import bf16, reference, scaling, tolerance
from ropelab.errors import RopeInputError
from ropelab.kernels import pack4, pair_sincos
from ropelab.kernels.launch import launch
from ropelab.problem import RopeProblem

STORAGES = ("float16", "bfloat16")


def make(rng, shape, storage):
    x = rng.standard_normal(shape).astype(np.float32)
    return bf16.from_float32(x) if storage == "bfloat16" else x.astype(np.float16)


def as_f64(a, storage):
    a = np.asarray(a)
    f32 = bf16.to_float32(a) if storage == "bfloat16" else a.astype(np.float32)
    return f32.astype(np.float64)


def error_and_bound(got, want, storage, x64, positions, freqs, af=1.0):
    angle = tolerance.max_angle(positions, freqs, af)
    bound = tolerance.rows_atol(np.abs(x64).max(), angle, storage, attention_factor=af)
    return np.abs(as_f64(got, storage) - want).max(), bound


def judged(got, want, storage, x64, positions, freqs, af=1.0):
    err, bound = error_and_bound(got, want, storage, x64, positions, freqs, af)
    assert err <= bound, (storage, err, bound)
    # The same check must catch an error 10x its bound in one element.
    bad = as_f64(got, storage)
    bad.flat[bad.size // 2] += 10 * bound
    assert np.abs(bad - want).max() > bound


# ---- pair_sincos: every feature it has --------------------------------------------------------

CASES = [  # (shape, rotary_dim, interleave, inverse, scaling, options)
    ((5, 3, 16), None, True, False, None, {}),
    ((3, 2, 24), 16, False, False, None, {}),  # NeoX, partial rotary
    ((4, 2, 20), 12, True, True, None, {"pairs_per_thread": 3}),  # inverse, uneven chunks
    ((3, 2, 16), None, False, False, scaling.YaRN(factor=4.0, original_max_positions=64), {}),
    ((2, 1, 16), None, True, False, scaling.Linear(2.0), {}),
]


@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_pair_sincos_16bit_matches_the_judge(rng, storage, case):
    shape, rotary_dim, interleave, inverse, scheme, options = CASES[case]
    x = make(rng, shape, storage)
    before = x.copy()
    pos = rng.integers(0, 3000, shape[0])
    rd = shape[-1] if rotary_dim is None else rotary_dim
    freqs, af = scaling.resolve(scheme, rotary_dim=rd, base=10000.0)
    y = ropelab.rope(x, variant="pair_sincos", positions=pos, rotary_dim=rotary_dim,
                     interleave=interleave, inverse=inverse, scaling=scheme, **options)
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(x, before)  # x was read, not written
    x64 = as_f64(x, storage)
    want = reference.rope(x64, pos, rotary_dim=rotary_dim, interleave=interleave,
                          inverse=inverse, freqs=freqs, attention_factor=af)
    judged(y, want, storage, x64, pos, freqs, af)
    if rd < shape[-1]:  # the pass-through columns are copied bit for bit
        np.testing.assert_array_equal(y[..., rd:], x[..., rd:])


@pytest.mark.parametrize("storage", STORAGES)
def test_pair_sincos_16bit_in_place(rng, storage):
    x = make(rng, (3, 2, 16), storage)
    x64 = as_f64(x, storage)
    pos = np.array([0, 7, 999])
    y = ropelab.rope(x, variant="pair_sincos", positions=pos, out=x)
    assert y is x
    want = reference.rope(x64, pos)
    judged(x, want, storage, x64, pos, reference.inv_freq(16))


# ---- pack4: its scope (one head, full rotary, GPT-J) -------------------------------------------

@pytest.mark.parametrize("storage", STORAGES)
@pytest.mark.parametrize("hidden", [16, 12, 10])  # whole quads per row (vector), odd pairs (scalar)
def test_pack4_16bit_matches_the_judge(rng, storage, hidden):
    x = make(rng, (3, hidden), storage)
    pos = np.array([5, 0, 2047])
    y = ropelab.rope(x, variant="pack4", positions=pos)
    assert y.dtype == x.dtype
    x64 = as_f64(x, storage)
    judged(y, reference.rope(x64, pos), storage, x64, pos, reference.inv_freq(hidden))


@pytest.mark.parametrize("storage", STORAGES)
def test_pack4_16bit_plan_picks_the_64bit_kernel_only_when_legal(storage):
    whole = RopeProblem(4, 1, 16, 16, storage=storage)
    odd = RopeProblem(4, 1, 10, 10, storage=storage)
    vector = pack4.VARIANT.plan(whole, aligned=True)
    assert vector.kernel is pack4.make_vector_kernel(storage)
    assert vector.kernel.__name__ == f"rope_pack4_{storage}"
    assert vector.caller[0] == vector.caller[1] == (np.uint16 if storage == "bfloat16"
                                                    else np.float16)
    # A misaligned array or quads that straddle rows: the per-element fallback, same storage.
    assert pack4.VARIANT.plan(whole, aligned=False).kernel is pack4.make_scalar_kernel(storage)
    assert pack4.VARIANT.plan(odd, aligned=True).kernel is pack4.make_scalar_kernel(storage)
    # The float32 builds are the course's functions, unchanged.
    assert pack4.VARIANT.plan(RopeProblem(4, 1, 16, 16), aligned=True).kernel is pack4.rope_pack4


def test_census_builds_one_kernel_per_storage():
    names = [p.kernel.__name__ for v in (pack4.VARIANT, pair_sincos.VARIANT)
             for p in v.census_plans()]
    assert names == ["rope_pack4", "rope_pack4_float16", "rope_pack4_bfloat16",
                     "rope_pair_sincos", "rope_pair_sincos_float16_words",
                     "rope_pair_sincos_float16", "rope_pair_sincos_bfloat16_words",
                     "rope_pair_sincos_bfloat16"]


@pytest.mark.parametrize("storage", STORAGES)
def test_pair_sincos_word_pairs_only_for_aligned_gptj(rng, storage):
    gptj = RopeProblem(3, 2, 16, 16, storage=storage)
    neox = RopeProblem(3, 2, 16, 16, interleave=False, storage=storage)
    assert pair_sincos.VARIANT.plan(gptj, aligned=True).kernel is \
        pair_sincos.make_kernel(storage, True)
    assert pair_sincos.VARIANT.plan(neox, aligned=True).kernel is pair_sincos.make_kernel(storage)
    assert pair_sincos.VARIANT.plan(RopeProblem(3, 2, 16, 16), aligned=True).kernel is \
        pair_sincos.rope_pair_sincos  # float32: the course's build
    # An unaligned array: the per-element build, launched directly, still matches the judge.
    plan = pair_sincos.VARIANT.plan(gptj, aligned=False)
    assert plan.kernel is pair_sincos.make_kernel(storage)
    x = make(rng, (3, 2, 16), storage)
    pos = np.array([1, 50, 900], np.int32)
    out = cuda.device_array(x.size, x.dtype)
    launch(plan, (cuda.to_device(x.reshape(-1)), out, cuda.to_device(pos)))
    x64 = as_f64(x, storage)
    judged(out.copy_to_host().reshape(x.shape), reference.rope(x64, pos), storage, x64, pos,
           reference.inv_freq(16))


def test_bfloat16_store_rounds_to_nearest_even():
    """Position 0 rotates by nothing: a bfloat16 x must come back bit for bit (the float32
    round trip is exact), through both kernels."""
    x = bf16.from_float32(np.linspace(-3, 3, 32, dtype=np.float32)).reshape(2, 16)
    pos = np.zeros(2, np.int64)
    for variant in ("pair_sincos", "pack4"):
        np.testing.assert_array_equal(ropelab.rope(x, variant=variant, positions=pos), x)


# ---- refusals: clear, before anything runs ---------------------------------------------------

@pytest.mark.parametrize("variant", ["flat", "block2d", "pack4_scalar"])
def test_seed_variants_stay_float32_and_name_the_ones_that_are_not(rng, variant):
    x = make(rng, (2, 8), "bfloat16")
    with pytest.raises(RopeInputError, match="pair_sincos.*pack4"):
        ropelab.rope(x, variant=variant)


def test_16bit_refusals_leave_buffers_unchanged(rng):
    x = make(rng, (3, 2, 16), "float16")
    out = np.zeros((3, 2, 16), np.float32)
    with pytest.raises(RopeInputError, match="dtype"):
        ropelab.rope(x, variant="pair_sincos", out=out)
    assert not out.any()
    with pytest.raises(RopeInputError, match="more than one head"):
        ropelab.rope(x, variant="pack4")
    strided = make(rng, (3, 32), "bfloat16")[:, :16]
    with pytest.raises(RopeInputError, match="C-contiguous"):
        ropelab.rope(strided, variant="pair_sincos")


def test_freq_table_still_routes_16bit_to_rope_rows(rng):
    x = make(rng, (2, 16), "bfloat16")
    pos = np.array([1, 2])
    y = ropelab.rope(x, variant="freq_table", positions=pos)
    x64 = as_f64(x, "bfloat16")
    judged(y, reference.rope(x64, pos), "bfloat16", x64, pos, reference.inv_freq(16))


def test_ropelab_check_runs_the_16bit_builds():
    """``python -m ropelab check`` (the lead's GPU run) judges every storage of pack4."""
    from ropelab import check

    rows = check.run_checks(variants=["pack4"], shapes=[(2, 8)])
    assert sorted(r.storage for r in rows) == ["bfloat16", "float16", "float32"]
    assert all(r.passed for r in rows), check.format_rows(rows)
    sixteen = [r for r in rows if r.storage != "float32"]
    assert all(f"storage={r.storage}" in r.options for r in sixteen)
