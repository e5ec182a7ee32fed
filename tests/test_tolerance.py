"""Tolerances per accuracy mode: each holds on real output and catches an error ten times itself.

For every mode of :mod:`ropelab.tolerance` a kernel runs twice on the same tiny input: as shipped
(it must pass) and with a planted defect of about ten times the mode's budget (it must fail).
The recorded H200 precision run is checked against the same models.  Budget: about 10 s on the
simulator (each launch is a few hundred threads).
"""

import dataclasses

import numpy as np
import pytest
from numba import cuda

import ropelab
from reference_check import error_and_tolerance
from ropelab import reference
from ropelab.measure import records
from ropelab.kernels import flat, freq_table
from ropelab.kernels.launch import launch as launch_plan
from ropelab.problem import RopeProblem
from ropelab.tolerance import REDUCED_MAX_POSITION, Mode, max_angle, mode_for, rope_atol

sim_only = pytest.mark.skipif(not ropelab.SIMULATED, reason="plants its defect in the simulator")

HEAD = 8  # 4 pairs with frequencies 1, 0.1, 0.01, 0.001 (base 1e4)


def launch(module, x, pos, options=None, fastmath=True, tables=None):
    """Run a variant on a [tokens, HEAD] input through its plan; ``tables`` replaces the plan's
    tables (to plant a defect in them).  Returns the output."""
    problem = RopeProblem(x.shape[0], 1, x.shape[1], x.shape[1])
    plan = module.VARIANT.plan(problem, options or {}, fastmath=fastmath)
    if tables is not None:
        plan = dataclasses.replace(plan, tables=tables)
    out = cuda.to_device(np.zeros(x.size, np.float32))
    launch_plan(plan, (cuda.to_device(x.ravel()), out, cuda.to_device(pos)))
    return out.copy_to_host().reshape(x.shape)


def ratio(x, got, pos, **options):
    """max error / tolerance for the mode of the given options."""
    err, tol = error_and_tolerance(x, got, pos, **options)
    return err / tol


def test_mode_for_each_option():
    assert mode_for(fastmath=True) is Mode.FAST
    assert mode_for(fastmath=False) is Mode.PRECISE
    assert mode_for(fastmath=True, cache=True, max_positions=10) is Mode.CACHE
    assert mode_for(fastmath=False, reduce_angle=True) is Mode.REDUCED
    assert mode_for(fastmath=True, pairs_per_thread=3) is Mode.FAST  # other variants' options


def test_one_entry_point_with_fastmath_as_shorthand():
    assert rope_atol(2.0, 300.0, fastmath=True) == rope_atol(2.0, 300.0, mode=Mode.FAST)
    assert rope_atol(2.0, 300.0, fastmath=False) == rope_atol(2.0, 300.0, mode="precise")
    with pytest.raises(TypeError, match="exactly one"):
        rope_atol(1.0, 1.0)
    with pytest.raises(TypeError, match="exactly one"):
        rope_atol(1.0, 1.0, mode=Mode.FAST, fastmath=True)


def test_models_differ_where_the_modes_do():
    # At angle 1e5 rad: the angle-scaled budgets are loose, the cache's and reduce_angle's are not.
    fast, precise, cache, reduced = (rope_atol(1.0, 1e5, mode=m) for m in Mode)
    assert fast > precise > 1e-2 > 1e-5 > reduced > cache
    assert cache == rope_atol(1.0, 0.0, mode=Mode.CACHE) == rope_atol(1.0, 1e6, mode=Mode.CACHE)
    # reduce_angle's budget barely moves with the angle up to its limit.
    assert rope_atol(1.0, REDUCED_MAX_POSITION, mode=Mode.REDUCED) < 1.2 * rope_atol(1.0, 1.0, mode=Mode.REDUCED)
    assert rope_atol(3.0, 10.0, mode=Mode.CACHE, attention_factor=1.5) == 4.5 * cache


def test_reduce_angle_has_no_budget_past_2_to_the_24():
    assert REDUCED_MAX_POSITION == freq_table.REDUCE_LIMIT == 2**24  # the model's and the API's
    rope_atol(1.0, 1e7, mode=Mode.REDUCED, max_position=2**24)
    with pytest.raises(ValueError, match="up to 16777216"):
        rope_atol(1.0, 1e7, mode=Mode.REDUCED, max_position=2**24 + 1)
    rope_atol(1.0, 1e7, mode=Mode.FAST, max_position=2**30)  # the angle-scaled models have none


def _options(text: str) -> dict:
    if text == "-":
        return {}
    return {k: v == "True" for k, v in (kv.split("=") for kv in text.split(","))}


def test_recorded_gpu_errors_are_within_each_mode_and_the_budgets_are_not_loose():
    """Every row of the H200 precision record (positions 0 .. 131072) within its mode's budget,
    and for every mode some row above a twentieth of it: a tenfold regression would show."""
    record = records.load("precision")
    worst = {}
    for row in record["rows"]:
        mode = mode_for(fastmath=row["fastmath"], **_options(row["options"]))
        tol = rope_atol(row["max_abs_x"], row["max_angle_rad"], mode=mode, max_position=row["pos_hi"])
        assert row["max_abs_err"] <= tol, row
        worst[mode] = max(worst.get(mode, 0.0), row["max_abs_err"] / tol)
    assert set(worst) == set(Mode)
    for mode, r in worst.items():
        assert r > 0.05, (mode, r)


# ---- planted errors: the same input, as shipped and with a defect ----------------------------

def test_fast_math_budget_catches_a_perturbed_output(rng):
    x = rng.standard_normal((20, HEAD)).astype(np.float32)
    pos = rng.integers(0, 1000, 20).astype(np.int32)
    got = launch(flat, x, pos)
    assert ratio(x, got, pos, fastmath=True) <= 1
    _, tol = error_and_tolerance(x, got, pos, fastmath=True)
    planted = got.copy()
    planted[7, 3] += np.float32(10 * tol)
    assert 8 < ratio(x, planted, pos, fastmath=True) < 12


def test_precise_budget_catches_frequencies_off_by_80_ulps(rng):
    x = rng.standard_normal((64, HEAD)).astype(np.float32)
    pos = rng.integers(0, 1000, 64).astype(np.int32)
    freqs = reference.inv_freq(HEAD)
    assert ratio(x, launch(freq_table, x, pos, fastmath=False), pos, fastmath=False) <= 1
    # A frequency table 80 float32 epsilons too large (a wrong base or a float32 pow would do it).
    off = ((freqs * (1 + 80 * 2.0**-24)).astype(np.float32),)
    assert 5 < ratio(x, launch(freq_table, x, pos, fastmath=False, tables=off), pos,
                     fastmath=False) < 20


def test_cache_budget_catches_a_table_built_in_float32(rng):
    n = 2048
    x = rng.standard_normal((64, HEAD)).astype(np.float32)
    pos = rng.integers(n // 2, n, 64).astype(np.int32)
    cache = dict(cache=True, max_positions=n)
    assert ratio(x, launch(freq_table, x, pos, cache), pos, variant_options=cache) <= 1
    # The same table with its angles formed in float32 (position * float32 frequency, rounded).
    theta32 = np.outer(np.arange(n, dtype=np.float32), reference.inv_freq(HEAD).astype(np.float32))
    built32 = (np.cos(theta32), np.sin(theta32))
    assert 5 < ratio(x, launch(freq_table, x, pos, cache, tables=built32), pos,
                     variant_options=cache) < 40


@sim_only
def test_reduce_angle_budget_catches_the_fma_split_into_multiply_and_add(rng, monkeypatch):
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    from ropelab.sim import fma as shim

    x = rng.standard_normal((64, HEAD)).astype(np.float32)
    pos = rng.integers(1024, 3072, 64).astype(np.int32)
    opts = dict(reduce_angle=True)
    assert ratio(x, launch(freq_table, x, pos, opts), pos, variant_options=opts) <= 1
    # The simulator's own fma (a*b + c, rounded twice) loses the product's rounding error.
    monkeypatch.setattr(FakeCUDAModule, "fma", shim._original)
    assert 5 < ratio(x, launch(freq_table, x, pos, opts), pos, variant_options=opts) < 100


def test_reduce_angle_meets_its_claim_up_to_2_to_the_24(rng):
    """Position independent accuracy up to 2**24 (inclusive): past it float32 positions round."""
    tokens = 300
    edges = [REDUCED_MAX_POSITION, REDUCED_MAX_POSITION - 1, 2**23, 2**23 + 1, 131071, 4097, 0]
    pos = np.concatenate([edges, rng.integers(0, REDUCED_MAX_POSITION + 1, tokens - len(edges))])
    pos = pos.astype(np.int32)
    x = rng.standard_normal((tokens, 2, HEAD)).astype(np.float32)
    opts = dict(reduce_angle=True)
    for layout in (dict(), dict(interleave=False, inverse=True)):
        got = ropelab.rope(x, variant="freq_table", positions=pos, **opts, **layout)
        err, tol = error_and_tolerance(x, got, pos, variant_options=opts, **layout)
        assert err <= tol, (layout, err, tol)
        assert tol < 2e-5 * np.abs(x).max()  # the claim is a tight one, not the angle-scaled budget
    # The plain table at these positions is off by radians: the budget is what separates them.
    plain = ropelab.rope(x, variant="freq_table", positions=pos)
    err, _ = error_and_tolerance(x, plain, pos, variant_options=opts)
    assert err > 100 * tol
    assert max_angle(pos, reference.inv_freq(HEAD)) == REDUCED_MAX_POSITION
