"""ropelab.sim.fma: the simulator's cuda.fma rounded once, checked against exact rational arithmetic.

The judge here, :func:`round_exact`, rounds a Fraction to a binary format by integer arithmetic
and shares nothing with the shim (which uses TwoSum and rounding to odd in float64).
Budget: about 5 s (tens of thousands of Fraction evaluations, one tiny simulated kernel).
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from numba import cuda

import ropelab
from ropelab import sim
from ropelab.sim import fma as shim

sim_only = pytest.mark.skipif(not ropelab.SIMULATED, reason="tests the simulator's shim")

# (significand bits including the leading one, smallest normal exponent, largest exponent)
F32 = (24, -126, 127)
F64 = (53, -1022, 1023)


def round_exact(q: Fraction, fmt) -> float:
    """``q`` rounded to nearest-even in the binary format ``fmt``, as a Python float (inf on overflow)."""
    bits, emin, emax = fmt
    if q == 0:
        return 0.0
    sign, q = (-1.0 if q < 0 else 1.0), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2**(e-1) < q < 2**(e+1)
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, emin)  # below the normal range the quantum stays that of 2**emin (subnormals)
    quantum = Fraction(2) ** (e - bits + 1)
    n, rest = divmod(q, quantum)
    n = int(n)
    if rest * 2 > quantum or (rest * 2 == quantum and n % 2):
        n += 1
    value = n * quantum
    if value >= Fraction(2) ** (emax + 1):
        return sign * math.inf
    return sign * float(value)  # value has at most `bits` significant bits: the float is exact


def exact_fma(a, b, c, fmt) -> float:
    a, b, c = float(a), float(b), float(c)
    q = Fraction(a) * Fraction(b) + Fraction(c)
    if q == 0:  # IEEE 754 (round to nearest): -0 only when the product and c are both -0
        negative_product = math.copysign(1.0, a) * math.copysign(1.0, b) < 0
        return -0.0 if (a * b == 0 and c == 0 and negative_product and math.copysign(1.0, c) < 0) else 0.0
    return round_exact(q, fmt)


def same(x, y) -> bool:
    """Equal as floats, counting the sign of zero."""
    x, y = float(x), float(y)
    return x == y and math.copysign(1.0, x) == math.copysign(1.0, y)


def test_the_judge_rounds_ties_to_even_and_handles_subnormals_and_overflow():
    one = Fraction(1)
    assert round_exact(one + Fraction(1, 2**24), F32) == 1.0  # tie -> even (1)
    assert round_exact(one + Fraction(3, 2**24), F32) == 1.0 + 2.0**-22  # tie -> even (up)
    assert round_exact(one + Fraction(1, 2**24) + Fraction(1, 2**60), F32) == 1.0 + 2.0**-23
    assert round_exact(Fraction(3, 2**151), F32) == 2.0**-149  # 0.75 of the smallest subnormal
    assert round_exact(Fraction(1, 2**151), F32) == 0.0  # a quarter of it
    assert round_exact(Fraction(2) ** 128, F32) == math.inf
    assert round_exact(Fraction(2) ** 128 - Fraction(2) ** 104, F32) == np.finfo(np.float32).max
    assert round_exact(Fraction(2) ** 128 - Fraction(2) ** 103, F32) == math.inf  # tie above max
    assert round_exact(-Fraction(1, 3), F64) == -1.0 / 3.0


def random_f32(rng, n, lo=-40, hi=40):
    """Random float32 with random significands and exponents 2**lo .. 2**hi, both signs."""
    m = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return (m * np.exp2(rng.integers(lo, hi, n))).astype(np.float32)


def double_rounding_cases(rng, n):
    """Cases where rounding a*b + c first to float64 then to float32 can go wrong.

    ``a * b = +-(ulp(c) / 2) * (1 - 2**-2k)``, with ``a = +-2**m * (1 + 2**-k)`` and
    ``b = 1 - 2**-k`` (both float32 for k <= 23): the exact sum lies just off the midpoint
    ``c +- ulp(c)/2`` by less than float64 can hold (k >= 15), so float64 lands on the midpoint.
    """
    cases = []
    for _ in range(n):
        c = np.float32(rng.uniform(1.0, 2.0) * 2.0 ** int(rng.integers(-30, 30)))
        c = c if rng.random() < 0.5 else -c
        k = int(rng.integers(15, 24))
        half_ulp = float(np.spacing(np.abs(c))) / 2
        sign = 1.0 if rng.random() < 0.5 else -1.0
        a = np.float32(sign * half_ulp * (1 + 2.0**-k))
        b = np.float32(1 - 2.0**-k)
        cases.append((a, b, c))
    return cases


def test_the_documented_double_rounding_example():
    a, b, c = np.float32(-(2.0**-24) * (1 + 2.0**-15)), np.float32(1 - 2.0**-15), np.float32(1 + 2.0**-23)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == np.float32(1.0)  # double rounding goes down ...
    assert shim.fma32(a, b, c) == np.float32(1 + 2.0**-23) == exact_fma(a, b, c, F32)  # ... it must go up


def test_float32_double_rounding_cases(rng):
    cases = double_rounding_cases(rng, 3000)
    naive_wrong = 0
    for a, b, c in cases:
        want = exact_fma(a, b, c, F32)
        got = shim.fma32(a, b, c)
        assert isinstance(got, np.float32)
        assert same(got, want), (a, b, c, got, want)
        naive_wrong += float(np.float32(np.float64(a) * np.float64(b) + np.float64(c))) != want
    assert naive_wrong > 300  # the cases are adversarial: a naive cast misses a good share of them


def test_float32_random_and_cancelling_cases(rng):
    n = 20000
    a, b = random_f32(rng, n), random_f32(rng, n)
    c = random_f32(rng, n)
    # Half the cases cancel: c is -a*b rounded to float32, so the result is the product's error.
    cancel = rng.random(n) < 0.5
    c[cancel] = -(a[cancel].astype(np.float64) * b[cancel]).astype(np.float32)
    for i in range(n):
        want = exact_fma(a[i], b[i], c[i], F32)
        assert same(shim.fma32(a[i], b[i], c[i]), want), (a[i], b[i], c[i])


@pytest.mark.parametrize("a, b, c", [
    (2.0**-75, 2.0**-75, 0.0),  # the product underflows float32 to 0 ...
    (2.0**-75, 2.0**-75, 2.0**-149),  # ... and sits below half the smallest subnormal
    (1.5 * 2.0**-75, 2.0**-74, -(2.0**-149)),  # subnormal result
    (2.0**98, 2.0**30, -np.finfo(np.float32).max),  # the product overflows float32, the sum does not
    (2.0**100, 2.0**30, 0.0),  # overflow to inf
    (-0.0, 1.0, -0.0),  # -0 + -0 = -0
    (0.0, -1.0, 0.0),  # -0 + +0 = +0
    (3.0, 2.0**-30, -3.0 * 2.0**-30),  # exact zero from a nonzero product
    (math.inf, 0.0, 1.0),  # nan
    (math.inf, 1.0, -math.inf),  # nan
    (math.inf, 2.0, 1.0),  # inf
])
def test_float32_edge_cases(a, b, c):
    a, b, c = np.float32(a), np.float32(b), np.float32(c)
    got = shim.fma32(a, b, c)
    if any(map(math.isinf, (float(a), float(b), float(c)))):
        want = float(a) * float(b) + float(c)
        assert (math.isnan(got) and math.isnan(want)) or got == want
    else:
        assert same(got, exact_fma(a, b, c, F32))


def random_f64(rng, n, lo=-300, hi=300):
    m = rng.uniform(1.0, 2.0, n) * rng.choice([-1.0, 1.0], n)
    return m * np.exp2(rng.integers(lo, hi, n).astype(np.float64))


def test_float64_operands_are_rounded_once(rng):
    n = 3000
    a, b = random_f64(rng, n, -150, 150), random_f64(rng, n, -150, 150)
    c = -(a * b)  # cancelling: the result is the exact rounding error of a * b
    c[::2] = random_f64(rng, n // 2 + n % 2, -300, 300)
    lost = 0
    for i in range(n):
        want = exact_fma(a[i], b[i], c[i], F64)
        got = shim.fma64(a[i], b[i], c[i])
        assert same(got, want), (a[i], b[i], c[i])
        lost += (a[i] * b[i] + c[i]) != want
    assert lost > n // 4  # a*b + c in float64 would have been wrong on the cancelling half


def test_float64_exact_path_corner_cases():
    big = 2.0**1000
    # exact a*b = 2**1024 (beyond float64) and c brings it back into range: 2**1024 - max = 2**971
    assert shim._fma64_exact(big, 2.0**24, -np.finfo(np.float64).max) == 2.0**971
    assert shim._fma64_exact(big, 2.0**30, 0.0) == math.inf
    assert shim._fma64_exact(-big, 2.0**30, 0.0) == -math.inf
    top = np.finfo(np.float64).max  # exact results within half an ulp of it round to it
    assert shim._fma64_exact(2.0**969, 1.0, top) == top
    assert same(shim._fma64_exact(-0.0, 1.0, -0.0), -0.0)
    assert same(shim._fma64_exact(0.0, -1.0, 0.0), 0.0)


def test_mixed_operands_take_the_float64_signature():
    # numba types cuda.fma(float32, float32, float64) with its float64 signature; so does the shim.
    a, b = np.float32(1 + 2.0**-23), np.float32(1 - 2.0**-23)
    got = shim.fma(None, a, b, -1.0)
    assert isinstance(got, np.float64) and got == -(2.0**-46)
    assert isinstance(shim.fma(None, a, b, np.float32(-1.0)), np.float32)


def fma_kernel(a, b, c, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.fma(a[i], b[i], c[i])


def split_error_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        p = a[i] * b[i]
        out[i] = cuda.fma(a[i], b[i], -p)  # the product's rounding error, exactly


@sim_only
def test_install_is_idempotent_and_replaces_the_simulators_fma():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    assert sim.install() == sim.install()
    assert FakeCUDAModule.fma is shim.fma
    assert shim._original is not None and shim._original is not shim.fma
    # What it replaced rounds twice: it loses the error term the shim keeps.
    a, b = np.float32(1 + 2.0**-23), np.float32(1 + 2.0**-23)
    assert shim._original(None, a, b, -(a * b)) == 0.0
    assert shim.fma(None, a, b, -(a * b)) == np.float32(2.0**-46)


def test_cuda_fma_inside_a_kernel_is_rounded_once(rng):
    # On a GPU this checks the fma instruction; on the simulator, that the shim is what runs.
    cases = double_rounding_cases(rng, 40)
    a, b, c = (np.array(col, np.float32) for col in zip(*cases))
    out = np.zeros(len(cases), np.float32)
    cuda.jit(fma_kernel)[1, 64](a, b, c, out)
    want = np.array([exact_fma(*abc, F32) for abc in cases], np.float32)
    np.testing.assert_array_equal(out, want)

    x, y = random_f32(rng, 40, -10, 10), random_f32(rng, 40, -10, 10)
    err = np.zeros(40, np.float32)
    cuda.jit(split_error_kernel)[1, 64](x, y, err)
    product = x.astype(np.float64) * y
    np.testing.assert_array_equal(err, (product - product.astype(np.float32)).astype(np.float32))
    assert np.count_nonzero(err) > 30  # the errors are there, not rounded away
