"""The PTX instruction census: counting rules on hand-written PTX, and the real kernels.

The real census compiles every registered kernel twice in a child process (simulator off, no
driver needed): done once for the session (conftest.census_pair), with the determinism test's
second, independent compile running beside it.
"""

import pytest

from ropelab import kernels
from ropelab.measure import census as ptx

SYNTHETIC = """
.visible .entry k(
\t.param .u64 k_param_0,
\t.param .f32 k_param_1
)
{
\t.local .align 4 .b8 \t__local_depot0[28];
\t.reg .pred \t%p<3>;
\tld.param.u64 \t%rd1, [k_param_0];      // a parameter load is an instruction too
\tdiv.s64 \t%rd2, %rd1, %rd3;
\trem.u32 \t%r1, %r2, %r3;
\tdiv.approx.ftz.f32 \t%f1, %f2, %f3;
\tdiv.rn.f32 \t%f1, %f2, %f3;
\tsin.approx.ftz.f32 \t%f4, %f1;
\tcos.approx.ftz.f32 \t%f5, %f1;
\tex2.approx.ftz.f32 \t%f6, %f1;
\tld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd1];
\tld.global.nc.u32 \t%r4, [%rd1];
\tst.global.f32 \t[%rd1], %f1;
\tst.local.u32 \t[%rd1], %r4;
\tcvt.f64.f32 \t%fd1, %f1;
\tfma.rn.f64 \t%fd2, %fd1, %fd1, %fd1;
\tsetp.ge.s64 \t%p1, %rd1, %rd2;
\t@%p1 bra \t$L__BB0_2;
$L__BB0_2:
\tret;
}
"""


def test_count_ptx_follows_the_documented_rules():
    c = ptx.count_ptx(SYNTHETIC)
    assert c["instructions"] == 17
    assert c["int_divrem"] == 2
    assert c["int_divrem_ops"] == {"div.s64": 1, "rem.u32": 1}
    assert c["fdiv_approx"] == 1
    assert c["sfu"] == {"sin": 1, "cos": 1, "ex2": 1}
    assert c["f64"] == 2
    assert c["ld_global"] == {"128": 1, "32": 1}
    assert c["st_global"] == {"32": 1}
    assert (c["ld_local"], c["st_local"], c["local_bytes"]) == (0, 1, 28)
    assert c["calls"] == 0


def test_count_sass_reads_nvdisasm_lines():
    sass = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   MUFU.SIN R4, R3 ;
        /*0020*/                   MUFU.COS R5, R3 ;
        /*0030*/                   LDG.E.128 R8, desc[UR4][R2.64] ;
        /*0040*/                   LDG.E R6, desc[UR4][R2.64] ;
        /*0050*/              @!P0 STG.E.128 desc[UR4][R2.64], R8 ;
        /*0060*/                   DMUL R10, R10, R12 ;
        /*0070*/                   NOP;
    """
    c = ptx.count_sass(sass)
    assert c["sass_instructions"] == 7
    assert c["sass_mufu"] == {"SIN": 1, "COS": 1}
    assert c["sass_ldg"] == {"128": 1, "32": 1}
    assert c["sass_stg"] == {"128": 1}
    assert c["sass_f64"] == 1


@pytest.fixture(scope="module")
def doc(fresh_census):
    return fresh_census  # ptx.census(use_cache=False), compiled once per session (conftest)


def _row(doc, variant, fastmath=True):
    return ptx.row(doc, variant, fastmath, kernel=kernels.get(variant).kernel.__name__)


def test_every_registered_kernel_compiles_in_both_builds(doc):
    assert not [r for r in doc["rows"] if r["error"]], "a kernel failed to compile"
    names = {r["variant"] for r in doc["rows"]}
    assert set(kernels.VARIANTS) <= names
    assert doc["cc"] == "9.0"
    for r in doc["rows"]:
        assert r["instructions"] > 0


def test_flat_and_pack4_divide_block2d_does_not(doc):
    assert _row(doc, "flat")["int_divrem"] > 0
    assert _row(doc, "pack4")["int_divrem"] > 0
    assert _row(doc, "block2d")["int_divrem"] == 0


def test_fastmath_builds_use_the_special_function_unit(doc):
    for name in ("flat", "block2d", "pack4"):
        r = _row(doc, name)
        assert r["sfu"].get("sin", 0) >= 1 and r["sfu"].get("cos", 0) >= 1, name
        assert _row(doc, name, fastmath=False)["sfu"].get("sin", 0) == 0, name


def test_no_shipped_fastmath_build_has_float64(doc):
    shipped = [r for r in doc["rows"] if r["shipped"] and r["fastmath"]]
    assert shipped
    offenders = [(r["variant"], r["kernel"], r["f64"]) for r in shipped if r["f64"]]
    assert not offenders


def test_precise_sinf_pulls_float64_and_is_labelled(doc):
    r = _row(doc, "flat", fastmath=False)
    assert r["f64"] > 0
    assert r["f64_note"] == ptx.LIBDEVICE_F64_NOTE


def test_census_is_deterministic_and_cached(doc, census_pair, monkeypatch):
    # again: a second ptx.census(use_cache=False), compiled in another interpreter with
    # ROPELAB_CACHE=cache_dir (empty before it), side by side with doc's (conftest.census_pair).
    again, cache_dir = census_pair["second"], census_pair["cache_dir"]
    monkeypatch.setenv("ROPELAB_CACHE", str(cache_dir))
    if again["key"] != doc["key"]:
        pytest.skip("a kernel source changed between the two compiles (someone is editing)")
    assert again["rows"] == doc["rows"]
    assert again["key"] == ptx.cache_key()
    cached = list(cache_dir.glob("census-*.json"))
    assert len(cached) == 1
    assert ptx.census()["rows"] == again["rows"]  # served from the cache file


def test_format_table_lists_every_row(doc):
    text = ptx.format_table(doc)
    assert len([line for line in text.splitlines() if line.startswith("flat ")]) == 2
    assert ptx.LIBDEVICE_F64_NOTE in text
