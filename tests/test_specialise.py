"""A kernel shown as one build compiles it (``ropelab.lessons.specialise``): the branches its
build constants decide are resolved, and the text compiles to the same PTX as the package's
kernel for that build.

The PTX half compiles in a child process with the simulator off (``cuda.compile_ptx`` for
compute capability 9.0 needs no GPU, as the census does), and keeps its verdict under a key of
everything it depends on (the kernels' code, the specialised texts, the compiler versions, this
file and the specialiser's): committed in ``tests/specialise_ptx.json`` (``python
tests/test_specialise.py --save``), else in the user cache.  Any change compiles again.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The verdict of the last compile, keyed like the census (tests/test_specialise.py --save).
COMMITTED = ROOT / "tests" / "specialise_ptx.json"  # test data: not shipped in the wheel

# (problem, options, aligned) of FusedProblem / kernels.fused_qknorm_rope.plan: the builds
# notebook 06 shows (one head per warp on 32-bit words; the 16-bit default, half a warp per
# head with 128-bit words), with the build names the notebook's make_kernel calls give.
PROBLEM = dict(tokens=1, heads_q=1, heads_k=1, heads_v=1, head_dim=128, rotary_dim=128,
               interleave=True, storage="bfloat16", eps=1e-6, base=10000.0)
BUILDS = [
    ("fused_qknorm_rope_d128_gptj_bfloat16_full", {"heads_per_warp": 1}, False),
    ("fused_qknorm_rope_d128_gptj_bfloat16_v128_h2_g16_full", {}, True),
]
REGION = "fused_kernel"
# A planted change: each head's sum of squares doubled before its scale (the kernel's norm off
# by sqrt(2)); its PTX must differ from the package kernel's.
PLANTED = re.compile(r"head_scale\(ss, eps\)")


def _plan(options, aligned):
    import numpy as np

    from ropelab.kernels import fused_qknorm_rope
    from ropelab.problem import FusedProblem

    problem = FusedProblem(**PROBLEM, inv_freq=np.ones(64))
    return fused_qknorm_rope.plan(problem, options, aligned=aligned)


def normalized(ptx: str) -> str:
    """PTX without what legitimately differs between two compiles of the same code: the mangled
    names (they carry a per-process function number) and comment lines."""
    names = {}
    ptx = re.sub(r"_Z\w+", lambda m: names.setdefault(m.group(0), f"NAME{len(names)}"), ptx)
    return "\n".join(line for line in ptx.splitlines() if not line.lstrip().startswith("//"))


def child() -> int:
    """(With the simulator off.)  For each build: the package kernel's PTX, the specialised
    text's, and the planted text's (the first build only), normalized."""
    from numba import cuda

    from ropelab.lessons import specialise

    out = {}
    for k, (name, options, aligned) in enumerate(BUILDS):
        plan = _plan(options, aligned)
        kernel, sig = plan.kernel, plan.argtypes()
        text = specialise.specialise(kernel, REGION).text
        found = {"name": kernel.__qualname__}
        variants = {"package": kernel, "specialised": specialise.rebuild(kernel, REGION)}
        if k == 0:
            planted, count = PLANTED.subn("head_scale(ss + ss, eps)", text, count=1)
            assert count == 1, "the planted change found no head_scale call to change"
            variants["planted"] = specialise.rebuild(kernel, REGION, text=planted)
        for label, fn in variants.items():
            ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0), fastmath=plan.fastmath)
            found[label] = normalized(ptx)
        out[name] = found
    print(json.dumps(out))
    return 0


def _key() -> str:
    from ropelab.lessons import branches, specialise
    from ropelab.measure.census import engine

    plans = [_plan(o, a) for _, o, a in BUILDS]
    texts = [specialise.specialise(p.kernel, REGION).text for p in plans]
    own = hashlib.sha256(b"".join(Path(f).read_bytes() for f in
                                  (__file__, specialise.__file__, branches.__file__)))
    # Not engine.cache_key: that one also keys on the census's counting rules, which this
    # comparison does not use.
    head = {"versions": engine.versions(), "cc": [9, 0], "texts": texts, "own": own.hexdigest(),
            "signatures": [str(p.argtypes()) for p in plans],
            "code": engine.code_digest(*[p.kernel for p in plans])}
    return hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()[:16]


def _compiled() -> dict:
    from ropelab.measure.census import engine

    def build(todo):
        (key,) = todo
        env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                            os.environ.get("PYTHONPATH")])))
        proc = subprocess.run([sys.executable, __file__, "--child"], capture_output=True,
                              text=True, env=env, cwd=str(ROOT), timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        # Only what a test reads is kept: whether each pair is equal, and the planted one differs.
        builds = {name: {"name": f["name"], "same": f["package"] == f["specialised"],
                         "planted_differs": (f["planted"] != f["package"]
                                             if "planted" in f else None),
                         "diff": _first_difference(f["package"], f["specialised"])}
                  for name, f in found.items()}
        return {key: {"key": key, "builds": builds}}

    key = _key()
    served = engine.cached("specialise-ptx", {key: None}, build, committed=COMMITTED,
                           label="notebook 06's specialised kernels")
    return served[key]["builds"]


def save() -> int:
    """``python tests/test_specialise.py --save``: compile (unless cached) and keep the verdict
    in ``tests/specialise_ptx.json``, so that CI and a fresh clone compile nothing until a
    kernel, the specialiser, this file or a compiler version changes."""
    from ropelab.measure.census import engine

    builds = _compiled()
    if not (all(b["same"] for b in builds.values()) and builds[BUILDS[0][0]]["planted_differs"]):
        print("not saved: a comparison failed", builds)
        return 1
    engine.write_json(COMMITTED, {"key": _key(), "builds": builds})
    print("wrote", COMMITTED.relative_to(ROOT))
    return 0


def _without_magics(text: str) -> str:
    """A code cell as Python parses it: an IPython magic line (the first cell's ``%pip``) becomes
    ``pass`` at its indentation."""
    return "\n".join(line[:len(line) - len(line.lstrip())] + "pass"
                      if line.lstrip().startswith("%") else line for line in text.splitlines())


def _first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}: package {x!r}, specialised {y!r}"
    return "" if a == b else "one is a prefix of the other"


@pytest.fixture(scope="module")
def compiled():
    return _compiled()


@pytest.mark.parametrize("name", [b[0] for b in BUILDS])
def test_specialised_text_compiles_to_the_package_kernels_ptx(compiled, name):
    found = compiled[name]
    assert found["name"] == name, "the plan builds another kernel than the notebook shows"
    assert found["same"], f"{name}: the specialised text compiles to other PTX: {found['diff']}"


def test_a_planted_change_in_the_text_changes_the_ptx(compiled):
    """The comparison can fail: the text with each head's sum of squares doubled is other code."""
    assert compiled[BUILDS[0][0]]["planted_differs"]


def test_the_committed_verdict_is_current():
    """A kernel, the specialiser or this file changed without ``--save``: CI would compile the
    comparison on every run (about 10 s) instead of reading it."""
    committed = json.loads(COMMITTED.read_text())
    assert committed["key"] == _key(), "run python tests/test_specialise.py --save"


def test_the_builds_notebook_06_shows_are_the_ones_compiled_here():
    """Every ``fused_kernel.make_kernel(...)`` build that notebook 06 prints specialised is one
    of BUILDS (the regions it prints of a build lie inside the body compiled here)."""
    import ast
    import importlib.util

    from ropelab.kernels import fused_qknorm_rope

    spec = importlib.util.spec_from_file_location("course_build", ROOT / "scripts" / "notebooks" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    source = (ROOT / "scripts" / "notebooks" / "src" / "06_fused_qknorm_rope.py").read_text()
    shown = set()
    for kind, text in build.parse_source(source):
        if kind != "code":
            continue
        for node in ast.walk(ast.parse(_without_magics(text))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "make_kernel"):
                kernel = eval(compile(ast.Expression(node), "06", "eval"),
                              {"fused_kernel": fused_qknorm_rope})
                shown.add(kernel.__qualname__)
    assert shown and shown <= {name for name, _, _ in BUILDS}, shown


# --- the text (no compiling) ---------------------------------------------------------------

SAMPLE = """\
def body(x, n):
    a = x[0]
    if WIDE:  # wide accesses
        a = a + 1
    elif PACKED:
        # packed words
        a = a + 2
    else:
        a = a + 3
    if FULL or a < n:
        a = a * 2
    if not HALF:
        a = a + 16  # the step the half warp skips
    b = a if SPLIT else -a
    c = FULL and a > n
    if CACHE:
        if a > n:
            a = 0
    return a
"""


def _text(**constants):
    from ropelab.lessons.branches import specialise_text

    return specialise_text(SAMPLE, constants)


def test_the_branch_taken_stays_dedented_with_its_comments():
    text, deciding = _text(WIDE=False, PACKED=True, FULL=True, HALF=False, SPLIT=True, CACHE=False)
    assert text == (
        "def body(x, n):\n"
        "    a = x[0]\n"
        "    # packed words\n"
        "    a = a + 2\n"
        "    a = a * 2\n"
        "    a = a + 16  # the step the half warp skips\n"
        "    b = a\n"
        "    c = a > n\n"
        "    return a")
    assert deciding == ["WIDE", "PACKED", "FULL", "HALF", "SPLIT", "CACHE"]


def test_an_if_line_comment_stays_and_undecided_operands_stay():
    text, _ = _text(WIDE=True, PACKED=True, FULL=False, HALF=True, SPLIT=False, CACHE=True)
    assert "    # wide accesses\n    a = a + 1\n" in text
    assert "packed" not in text and "a + 3" not in text
    assert "    if a < n:\n        a = a * 2" in text  # FULL = False leaves the test on a
    assert "a + 16" not in text and "b = -a" in text and "c = False" in text
    assert "    if a > n:\n        a = 0" in text  # the CACHE branch, one level out
    compile(text, "specialised", "exec")


def test_unknown_names_and_kept_constants_leave_the_text_as_written():
    from ropelab.lessons.branches import specialise_text

    text, deciding = specialise_text(SAMPLE, {})
    assert text == SAMPLE.rstrip("\n") and deciding == []
    text, _ = specialise_text("if A:\n    x = 1\nelif B:\n    x = 2\nelse:\n    x = 3\n", {"B": True})
    assert text == "if A:\n    x = 1\nelse:\n    x = 2"


def test_a_block_left_empty_gets_a_pass():
    from ropelab.lessons.branches import specialise_text

    text, _ = specialise_text("for i in r:\n    if C:\n        x = 1\ny = 2\n", {"C": False})
    assert text == "for i in r:\n    pass\ny = 2"


def _fused(*args, **kwargs):
    from ropelab.kernels.fused_qknorm_rope import kernel

    return kernel.make_kernel(*args, **kwargs)


@pytest.mark.parametrize("args, kwargs", [
    ((128, True, "bfloat16"), {"heads_per_warp": 1, "full_rotary": True}),
    ((128, True, "bfloat16", 16, 2, 16), {"full_rotary": True}),
], ids=["one_head_words", "half_warp_128bit"])
def test_the_fused_kernel_as_built_reads_no_decided_constant(args, kwargs):
    import ast

    from ropelab.lessons import display, specialise

    kernel = _fused(*args, **kwargs)
    spec = specialise.specialise(kernel, REGION)
    full = display.region_text(kernel, REGION)[1]
    assert len(spec.text.splitlines()) < 0.7 * len(full.splitlines())
    names = {n.id for n in ast.walk(ast.parse(spec.text)) if isinstance(n, ast.Name)}
    flags = {"WIDE16", "V4", "PACKED", "VEC4", "CACHE", "FREQ4", "HALF_WARP", "IN_LANE", "FULL",
             "INTERLEAVE", "SPLIT", "OUT"}
    assert not names & flags, f"still branches on {sorted(names & flags)}"
    assert set(spec.decided) <= flags and {"WIDE16", "CACHE"} <= set(spec.decided)
    # The header names the build and gives each constant the text reads its value.
    header = spec.header()
    assert kernel.__qualname__ in header.replace("\n# ", " ")
    values = specialise.build_values(kernel)
    assert f"E = {values['E']}," in header and "SLOTS" in header
    assert str(spec).startswith(header + "\n@cuda.jit")


def test_a_region_the_build_does_not_run_is_refused():
    from ropelab.lessons import specialise

    shuffled = _fused(128, False, "float32", 16, 1, 32)  # NeoX partners by shuffle: no in-lane pairs
    with pytest.raises(specialise.SpecialiseError, match="runs none of region 'fused_rope_gptj'"):
        specialise.specialise(shuffled, "fused_rope_gptj")


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    sys.exit(child())
if __name__ == "__main__" and sys.argv[1:] == ["--save"]:
    sys.exit(save())
