"""The PTX instruction census: counting rules on hand-written PTX, and the real kernels.

The real census compiles every registered kernel twice in a child process (simulator off, no
driver needed).  The tests of the kernels' counts read the census as users get it (the committed
data/census/census.json when current).  The determinism guard compiles, fresh, the builds whose
input digest changed and a fixed sample (one build per registry), and compares them with the
committed census (test_census_guard.py plants stale entries to see it fail).
"""

import io

import pytest

from ropelab import kernels
from ropelab.measure import census as ptx
from ropelab.measure.census import engine, guard, registered

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
    assert c["shfl_ops"] == {} and c["cvt_packed"] == {} and c["atomics"] == {}


def test_count_ptx_counts_atomics_by_state_space():
    body = ("\tatom.global.add.f32 \t%f1, [%rd1], %f2;\n"
            "\t@%p1 red.global.add.f32 \t[%rd1], %f2;\n"
            "\tatom.shared.add.u32 \t%r1, [%r2], 1;\n"
            "\tld.global.f32 \t%f3, [%rd1];\n")
    c = ptx.count_ptx(body)
    assert c["atomics"] == {"global": 2, "shared": 1}
    assert c["ld_global"] == {"32": 1} and c["instructions"] == 4


def test_count_ptx_counts_shuffles_by_mode_and_packed_conversions():
    body = ("\tshfl.sync.bfly.b32 \t%r1, %r2, 16, 31, -1;\n"
            "\t@%p1 shfl.sync.idx.b32 \t%r3, %r2, 0, 31, -1;\n"
            "\tshfl.sync.bfly.b32 \t%r1, %r2, 8, 31, -1;\n"
            "\tcvt.rn.bf16x2.f32 \t%r4, %f1, %f2;\n"
            "\tcvt.rn.f32.s32 \t%f3, %r5;\n")
    c = ptx.count_ptx(body)
    assert c["shfl_ops"] == {"bfly": 2, "idx": 1}
    assert c["cvt_packed"] == {"bf16x2": 1}
    assert c["instructions"] == 5


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
def doc(census_doc):
    return census_doc  # ptx.census(): the committed census when current (conftest)


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


@pytest.fixture(scope="module")
def fresh():
    """The builds the guard compiles (stale ones and the sample), fresh, in the census child:
    with SASS counts where nvdisasm is installed, so both committed files are checked."""
    sass = ptx.sass_tools_missing() is None
    inputs = registered.row_inputs(sass)
    committed = engine.read_json(registered.committed_file(sass))
    todo = guard.to_compile(committed, inputs, guard.sample(committed))
    return sass, registered.compile_fresh(todo, sass)


def test_the_committed_census_is_what_the_compiler_makes_of_the_code(fresh):
    sass, rows = fresh
    assert len(rows) >= 4  # the sample: one build per registry
    for with_sass in sorted({False, sass}):
        committed = engine.read_json(registered.committed_file(with_sass))
        problems = guard.verify(committed, registered.row_inputs(with_sass), rows)
        assert problems == [], (f"{registered.committed_file(with_sass).name} is stale: "
                                "python -m ropelab census --save (and --sass --save "
                                "data/census/census-sass.json)\n" + "\n".join(problems))


def test_census_is_written_to_the_user_cache_and_served_from_it(doc, tmp_path, monkeypatch):
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path))
    monkeypatch.setattr(engine, "PROGRESS_STREAM", io.StringIO())
    monkeypatch.setattr(ptx.registered, "DATA_FILE", tmp_path / "no-committed-file.json")
    rows = [{k: v for k, v in r.items() if k not in ("f64_note", "input")} for r in doc["rows"]]
    monkeypatch.setattr(engine, "run_child", lambda *a, **k: [dict(r) for r in rows])
    again = ptx.census(use_cache=False)  # "compiled" (the child's rows, as it would print them)
    assert again["rows"] == doc["rows"] and again["key"] == doc["key"] == ptx.cache_key()
    assert [p.name for p in tmp_path.glob("census-*.json")] == [f"census-{doc['key']}.json"]
    monkeypatch.setattr(engine, "run_child", lambda *a, **k: pytest.fail("recompiled"))
    assert ptx.census()["rows"] == doc["rows"]  # served from the user cache file


def test_a_rebuild_compiles_only_the_builds_whose_input_changed(doc, tmp_path, monkeypatch):
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path))
    monkeypatch.setattr(engine, "PROGRESS_STREAM", io.StringIO())  # the build's line, kept
    stale = {**doc, "key": "from-older-code", "rows": [dict(r) for r in doc["rows"]]}
    changed = stale["rows"][3]
    changed["input"], changed["instructions"] = "0" * 16, -1  # as if its kernel had been edited
    monkeypatch.setattr(ptx.registered, "DATA_FILE", engine.write_json(tmp_path / "c.json", stale))
    asked = []

    def child(client, payload, **kwargs):
        asked.append(payload["only"])
        fresh = {registered.build_id(r): r for r in doc["rows"]}
        return [{k: v for k, v in fresh[tuple(i)].items() if k not in ("input", "f64_note")}
                for i in payload["only"]]

    monkeypatch.setattr(engine, "run_child", child)
    again = ptx.census()
    assert asked == [[list(registered.build_id(changed))]]  # one build of 80
    assert "the code changed since c.json was saved" in engine.PROGRESS_STREAM.getvalue()
    assert again["key"] == doc["key"] and again["rows"] == doc["rows"]


def test_committed_census_is_current():
    # Notebooks print these counts and CI must not compile them: after a kernel change, run
    # `python -m ropelab census --save` (and the --sass one) and commit data/census/.
    for sass in (False, True):
        committed = engine.read_json(ptx.registered.committed_file(sass))
        assert committed is not None and committed["key"] == ptx.cache_key(sass), (
            f"{ptx.registered.committed_file(sass).name} is stale: regenerate it with "
            f"python -m ropelab census {'--sass ' if sass else ''}--save "
            f"{ptx.registered.committed_file(sass) if sass else ''}")


def test_the_key_follows_the_compiled_code_not_the_comments():
    text = ("def k(x):\n    \"\"\"Doc.\"\"\"\n    # ex: begin body\n    x[0] = 1  # why\n"
            "    # ex: end body\n")
    plain = "def k(x):\n    x[0] = 1\n"
    assert engine.normalized_source(text) == engine.normalized_source(plain)
    assert engine.normalized_source(plain) != engine.normalized_source(plain.replace("1", "2"))

    def factory(step):
        def kernel(x):
            x[0] = step
        return kernel

    assert engine.code_digest(factory(1)) == engine.code_digest(factory(1))
    assert engine.code_digest(factory(1)) != engine.code_digest(factory(2))  # closure constant
    assert ptx.cache_key() == ptx.cache_key() != ptx.cache_key(sass=True)


def test_format_table_lists_every_row(doc):
    text = ptx.format_table(doc)
    assert len([line for line in text.splitlines() if line.startswith("flat ")]) == 2
    assert ptx.LIBDEVICE_F64_NOTE in text


def test_attempt_keeps_the_error_of_one_kernel():
    def broken():
        raise ValueError("no such kernel\nsecond line")

    assert engine.attempt({"kernel": "k"}, broken) == {"kernel": "k",
                                                       "error": "ValueError: no such kernel"}
    assert engine.attempt({"kernel": "k"}, lambda: {"instructions": 3}) == {
        "kernel": "k", "instructions": 3, "error": None}
