"""The serving bench's host side (ropelab.measure.bench.serving): on CPU tensors every launcher
it times runs and writes the caches the op writes (the fused op + torch scatter bit for bit,
the compiled torch chain within rounding); the byte model; the verdict lines; the refusal on
the simulator."""

import pytest

torch = pytest.importorskip("torch")

import ropelab  # noqa: E402
from ropelab.measure import bench  # noqa: E402
from ropelab.measure.bench import serving, serving_cases  # noqa: E402


def test_every_launcher_writes_the_ops_caches():
    case = serving.DRY_CASES[0]
    rows = serving.dry_run(cases=(case,))
    got = {(r["cache_dtype"], r["call"]): r for r in rows}
    assert len(got) == 6
    for dtype in serving.CACHE_DTYPES:
        assert got[dtype, "fused+scatter"]["cache_bytes_differing"] == 0
        assert got[dtype, "fused+scatter"]["cache_max_diff"] == 0
        chain = got[dtype, "compiled_chain"]
        # Another formula (rsqrt, a cos/sin table): at most one step of the cache's format.
        step = 1.0 if dtype == "fp8" else 2.0**-6
        assert chain["cache_max_diff"] <= step, chain


def test_the_comparison_sees_a_changed_byte():
    case = serving.DRY_CASES[1]
    t = serving_cases.tensors(case, True, "cpu")
    other = {k: v.clone() for k, v in t.items()}
    assert serving.compare(other, t, True) == (0, 0.0)
    other["v_cache"].view(-1)[5] ^= 0x11
    differing, worst = serving.compare(other, t, True)
    assert differing == 1 and worst > 0


def test_byte_model():
    case = serving_cases.CASES[0]  # qwen3-8b prefill: 4096 tokens, 32/8/8 heads of 128
    t = 4096
    read = t * 48 * 128 * 2
    assert serving_cases.byte_model(case, 2) == read + t * 32 * 128 * 2 + t * 16 * 128 * 2 \
        + t * 12 + 2 * 128 * 2
    assert serving_cases.byte_model(case, 2) - serving_cases.byte_model(case, 1) == t * 16 * 128


def test_verdicts_and_the_table():
    base = {c: None for c in bench.kinds.SERVING.columns}
    rows = [dict(base, case="prefill x", cache_dtype="fp8", regime="prefill", call=c,
                 median_us=m, frac_of_copy=f, vs_op=v)
            for c, m, f, v in (("op", 10.0, 0.93, 1.0), ("copy", 9.3, 1.0, 0.93),
                               ("fused+scatter", 30.0, 0.31, 3.0),
                               ("compiled_chain", 40.0, 0.23, 4.0))]
    text = serving.verdicts(rows)
    assert "op 93.0% of copy" in text and "fused+scatter 3.00x op (met" in text
    assert "compiled_chain 4.00x op (MISSED, target 5.0x)" in text
    assert "vs op" in bench.format_rows(rows, "serving")


def test_the_bench_refuses_the_simulator():
    if ropelab.SIMULATED:
        with pytest.raises(bench.BenchError, match="simulator"):
            serving.run()
