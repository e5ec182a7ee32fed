"""Excerpts by marker: kernel files mark regions with ``# ex: begin NAME`` / ``# ex: end NAME``
and the notebooks show those regions through ``course.excerpt``.  Reads files only (no kernel
runs, no compilation).
"""

import ast
import inspect
import re
from pathlib import Path

import pytest

from ropelab import kernels
from ropelab.lessons import display
from ropelab.kernels import flat, freq_table

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_SOURCES = sorted((ROOT / "scripts" / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
# course.excerpt(<module or object>, "name") and course.specialised(<build>, "name"[, keep=...])
# as the notebooks write them.
ASKED = re.compile(r"(?:excerpt|specialised)\(\s*[\w.]+\s*,\s*[\"']([\w.-]+)[\"']\s*[,)]")


def _asked(path):
    return ASKED.findall(path.read_text())


def test_every_marker_in_the_package_is_balanced_and_unique():
    regions = display.markers()  # raises MarkerError on any imbalance or duplicate
    assert {"rope_flat", "rope_block2d", "rope_pack4", "rope_freq_table", "rope_pair_sincos",
            "fused_kernel"} <= set(regions)
    for name, region in regions.items():
        assert region.last > region.first, f"region {name!r} is empty"


@pytest.mark.parametrize("src", NOTEBOOK_SOURCES, ids=lambda p: p.stem)
def test_every_region_a_notebook_asks_for_exists(src):
    regions = display.markers()
    missing = [name for name in _asked(src) if name not in regions]
    assert not missing, f"{src.name} asks for regions no ropelab file marks: {missing}"


def test_the_variant_notebooks_show_kernels_by_excerpt():
    for src in NOTEBOOK_SOURCES:
        if src.name[:2] in ("01", "02", "03", "04", "05", "06"):
            assert _asked(src), f"{src.name} shows no kernel excerpt"


def test_an_excerpt_is_the_code_that_runs():
    text = display.excerpt(flat, "rope_flat")
    caption, body = text.split("\n", 1)
    assert caption == "# ropelab/kernels/flat.py, region 'rope_flat'"
    tree = ast.parse(body)
    assert [n.name for n in tree.body] == ["rope_flat"]
    # Same statements as the function numba compiles (marker lines are comments).
    assert ast.dump(tree.body[0]) == ast.dump(ast.parse(inspect.getsource(flat.rope_flat)).body[0])


def test_nested_regions_are_dedented_and_outer_ones_drop_inner_markers():
    inner = display.excerpt(flat, "flat_index").split("\n", 1)[1]
    assert inner.startswith("i = uint64(idx)") and "ex:" not in inner
    outer = display.excerpt(flat, "rope_flat")
    assert "ex:" not in outer and inner.splitlines()[1].strip() in outer


def test_excerpt_accepts_a_variant_record_and_a_dispatcher_function():
    by_variant = display.excerpt(kernels.get("flat"), "flat_index")
    assert by_variant == display.excerpt(flat.rope_flat, "flat_index")
    assert "cuda.fma" in display.excerpt(freq_table, "reduced_angle")


def test_a_region_of_another_file_is_refused():
    with pytest.raises(display.MarkerError, match="no region 'rope_block2d' in flat.py"):
        display.excerpt(flat, "rope_block2d")


@pytest.mark.parametrize("text, message", [
    ("# ex: begin a\nx = 1\n", "'begin a' has no 'end a'"),
    ("x = 1\n# ex: end a\n", "'end a' without a 'begin a'"),
    ("# ex: begin a\n# ex: end a\n# ex: begin a\n# ex: end a\n", "begins twice"),
    ("# ex: begin a\n  # ex: begin a\n", "begins twice"),
])
def test_unbalanced_markers_are_refused(text, message):
    with pytest.raises(display.MarkerError, match=re.escape(message)):
        display.scan(text, Path("example.py"))


def test_scan_finds_nested_regions():
    text = "# ex: begin outer\ndef f():\n    # ex: begin inner\n    return 1\n    # ex: end inner\n# ex: end outer\n"
    regions = display.scan(text, Path("example.py"))
    assert (regions["outer"].first, regions["outer"].last) == (1, 5)
    assert (regions["inner"].first, regions["inner"].last) == (3, 4)


def test_markers_do_not_invalidate_the_census_cache():
    # The census keys on the kernels' code as a syntax tree (comments dropped), so adding a
    # marker to a kernel file keeps the committed census current.
    from ropelab.measure.census import engine

    text = (engine.PACKAGE_DIR / "kernels" / "flat.py").read_text()
    marked = "# ex: begin extra_region\n" + text + "    # ex: end extra_region\n"
    assert engine.normalized_source(marked) == engine.normalized_source(text)
    changed = text.replace("THREADS = 256", "THREADS = 128")
    assert engine.normalized_source(changed) != engine.normalized_source(text)
