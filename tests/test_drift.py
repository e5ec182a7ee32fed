"""Prose cannot drift from the records.

* (a) Each stored notebook's Markdown is its source's Markdown with the ``{{ key }}``
  placeholders rendered from today's ``data/`` (a record that changes fails this until the
  notebook is rebuilt), and each cell's metadata names the records its numbers came from.
* (b) No measured-looking number (a percentage, us/ms/ns, GB/s, TB/s, an "N x" speedup, "N
  points", "N times slower") sits in a notebook's Markdown, or the README, unless a placeholder
  produced it or the reviewed allowlist below says why it is not a measurement.
* The four stale claims a review found, each checked against its record here, independently of
  ``ropelab.lessons.numbers``, so a wrong registry entry fails too.

Reads files only (no notebook runs); the registry imports ropelab (simulator, no kernel runs).
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from ropelab.lessons import numbers

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BUILD_SCRIPT = ROOT / "scripts" / "notebooks" / "build.py"


def _load_build():
    spec = importlib.util.spec_from_file_location("course_build_drift", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()
SOURCES = build.sources()

MEASURED = re.compile(  # a number not glued to a name before it ("GDDR6X", "H200")
    r"(?<![A-Za-z_])\d(?:[\d,.]*\d)?\s*(?:%|percent\b|µs\b|us\b|ms\b|ns\b|GB/s|TB/s|points\b)"
    r"|(?<![A-Za-z_\d.])\d(?:\.\d+)?\s?[x×](?![\w\d])(?!\s*\d)(?!\s+[a-z(`])"  # "3x", "1.5 x" but not "8 x 4"
    r"|(?<![A-Za-z_])\d(?:\.\d+)?\s*(?:[x×]|\s+times)\s+(?:slower|faster)", re.I)

# Numbers that look measured but are not, each with the reason; (where, phrase containing it).
ALLOWLIST = {
    ("00", "about 4.8 TB/s on an H200"): "the H200 data sheet's HBM bandwidth, not a measurement",
    ("01", "middle 60 percent"): "defines the p20-p80 column (a percentile range)",
    ("01", "same 20-80 percent range"): "defines the whiskers (a percentile range)",
    ("06", "roughly 600 to 800 ns"): "an assumed DRAM latency, quoted and labelled as such",
    ("07", "at least 80 percent of the fill"): "the host_bound threshold in ropelab.measure.bench",
    ("07", "(Within 5 percent.)"): "an exercise's tolerance",
    ("README", "only ~2% faster"): "the seed's claim A11, quoted in the ledger table (test_ledger)",
    ("README", "135x slower"): "the seed's claim A13, quoted in the ledger table (test_ledger)",
    ("README", "(0.006 ms for 16 MB)"): "the seed's claim A15, quoted in the ledger table (test_ledger)",
    ("README", "20/80% quantiles"): "names the percentiles the bench records",
    ("README", "mean at most 15%, worst at most 30%"): "the prediction's target (issue 24), "
                                                       "not a measurement",
}

CODE_SPAN = re.compile(r"`[^`\n]*`|\$[^$\n]*\$")  # identifiers and formulas are not claims


def unexplained_numbers(where: str, literal: str) -> list[str]:
    """Measured-looking numbers in ``literal`` (prose with its placeholders taken out) that no
    allowlist entry for ``where`` covers."""
    found = []
    for line in literal.splitlines():
        covered = [phrase for (w, phrase) in ALLOWLIST if w == where and phrase in line]
        text = CODE_SPAN.sub(" ", line)
        for phrase in covered:
            text = text.replace(phrase, " ")
        found += [f"{m.group(0)!r} in: {line.strip()[:120]}" for m in MEASURED.finditer(text)]
    return found


def _stored(src):
    return json.loads(build.notebook_path(src).read_text())["cells"]


def _text(value):
    return value if isinstance(value, str) else "".join(value)


def _markdown(prefix: str) -> str:
    src = next(s for s in SOURCES if s.stem.startswith(prefix))
    return "\n".join(_text(c["source"]) for c in _stored(src) if c["cell_type"] == "markdown")


# (a) rendered against today's records


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_stored_markdown_is_the_source_rendered_from_todays_records(src):
    stored = _stored(src)
    fresh = build.render_cells(src)
    assert len(stored) == len(fresh), "cells added or removed: rebuild the notebook"
    for i, (cell, (kind, text, used)) in enumerate(zip(stored, fresh)):
        if kind != "markdown":
            continue
        assert _text(cell["source"]) == text, (
            f"cell {i}'s Markdown differs from its source rendered from today's records: run "
            f"python scripts/notebooks/build.py {src.stem[:2]} (or --markdown-only after a prose edit)")
        assert cell.get("metadata", {}).get("ropelab_numbers", {}) == used, \
            f"cell {i} does not name the records of its numbers"


def test_every_rendered_number_names_an_existing_record():
    for key, fn in numbers.REGISTRY.items():
        value = fn()
        assert value.text.strip(), key
        for part in value.record.split("; "):
            if part.startswith("data/"):
                assert (ROOT / part).exists(), f"{key}: {part} does not exist"


def test_an_unknown_placeholder_is_refused():
    with pytest.raises(KeyError, match="no number 'fused.typo'"):
        numbers.render("see {{ fused.typo }}")


# (b) no measured number without a record


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_no_measured_number_in_markdown_without_a_placeholder(src):
    problems = []
    for kind, text in build.parse_source(src.read_text()):
        if kind == "markdown":
            problems += unexplained_numbers(src.stem[:2], numbers.PLACEHOLDER.sub(" ", text))
    assert not problems, ("measured-looking numbers typed into the prose; render them from "
                          "their record ({{ key }}, ropelab/lessons/numbers.py) or allowlist "
                          "them with a reason:\n" + "\n".join(problems))


def test_the_detector_catches_what_it_must():
    for claim in ("stays near 82% of the copy", "about 70 percent of the roof", "a 9 us kernel",
                  "0.00627 ms", "1,008 GB/s", "4.8 TB/s", "worth 15 to 19 points", "2.5x",
                  "135 times slower", "135x slower", "1.5 x faster"):
        assert unexplained_numbers("--", claim), claim
    for fine in ("32768 x 4096", "8 x positions x pairs", "1024 threads", "128-bit", "cc 9.0",
                 "`p20-p80 us`", "32 lanes x 4 consecutive elements"):
        assert not unexplained_numbers("--", fine), fine


def test_readme_numbers_agree_with_the_records():
    for name in numbers.MARKED_FILES:
        text = (ROOT / name).read_text()
        assert numbers.README_MARK.search(text), f"{name} marks no numbers"
        assert numbers.render_readme(text) == text, (
            f"{name} disagrees with the records: python -m ropelab.lessons.numbers --readme")


def test_readme_has_no_unmarked_measured_number():
    text = numbers.README_MARK.sub(" ", (ROOT / "README.md").read_text())
    text = re.sub(r"```.*?```", " ", text, flags=re.S)  # commands and code
    problems = unexplained_numbers("README", text)
    assert not problems, "unmarked measured numbers in README.md:\n" + "\n".join(problems)


# The four stale claims a review found, each against its record


def _record(path):
    return json.loads((ROOT / path).read_text())


def _newest(kind, variant=None):
    found = []
    for p in sorted((ROOT / "data" / kind).glob(f"{kind}-*.json")):
        rec = json.loads(p.read_text())
        if variant is None or any(r["variant"] == variant for r in rec["rows"]):
            found.append(rec)
    return max(found, key=lambda r: r["meta"]["date"])


def _share(rec, variant, shapes, dtypes):
    return [100 * r["frac_of_copy"] for r in rec["rows"] if r["variant"] == variant
            and r["shape"] in shapes and r["dtype"] in dtypes]


FULL = ("flux_1024", "qwen_image_1024", "zimage_1024")
HALF = ("bfloat16", "float16")


def test_06_neox_16bit_share_is_the_records():
    """06 said NeoX in 16-bit "stays near 82% of the copy" while its tables showed 93-96%."""
    rec = _newest("bench_fused", "cuda_fused")
    shares = _share(rec, "fused_qknorm_rope:neox", FULL, HALF)
    expected = f"{min(shares):.0f}-{max(shares):.0f}%"
    text = _markdown("06")
    m = re.search(r"NeoX in 16-bit storage reaches (\S+) of the copy", text)
    assert m, "06 no longer states NeoX's 16-bit share of the copy"
    assert m.group(1) == expected


def test_06_split_pair_points_are_the_records():
    """06 said split pairs are worth "15 to 19 points"; the data's lowest was 14.0."""
    rec = _newest("bench_fused", "fused_qknorm_rope:1token_blocks")
    split = {(r["shape"], r["dtype"]): r["frac_of_copy"] for r in rec["rows"]
             if r["variant"] == "fused_qknorm_rope:neox"}
    gains = [100 * (split[(r["shape"], r["dtype"])] - r["frac_of_copy"]) for r in rec["rows"]
             if r["variant"] == "fused_qknorm_rope:neox_shuffle" and r["shape"] in FULL
             and r["dtype"] in HALF]
    m = re.search(r"Split pairs are worth ([\d.]+) to ([\d.]+) points", _markdown("06"))
    assert m, "06 no longer states what split pairs are worth"
    assert (float(m.group(1)), float(m.group(2))) == (round(min(gains), 1), round(max(gains), 1))


def test_03_pack4_scalar_share_of_roof_is_the_records():
    """03 said "about 70 percent of the roof" for a kernel at 74.7%."""
    rec = _newest("bench")
    row = {r["variant"]: r for r in rec["rows"] if r["shape"] == "32768x4096"
           and r["dtype"] == "float32"}
    roof = max(r["gbps"] for r in rec["rows"] if r["variant"] in ("torch_copy", "copy_d2d"))
    m = re.search(r"on the 1 GB shape it takes the kernel from\s+([\d.]+)% of the roof",
                  _markdown("03"))
    assert m, "03 no longer states pack4_scalar's share of the roof"
    assert float(m.group(1)) == round(100 * row["pack4_scalar"]["gbps"] / roof, 1)


def test_03_sector_ratio_is_the_profiles():
    """03 said "four times as many sectors as flat's" above a profile showing 16 against 8."""
    rec = _newest("profile")
    st = {r["case"]: r["st_sectors_per_request"] for r in rec["rows"]}
    ratio = st["pack4_scalar@large_32768x4096"] / st["flat@large_32768x4096"]
    m = re.search(r"accesses spans\s+(\w+(?: times)?) as many sectors as `flat`'s", _markdown("03"))
    assert m, "03 no longer compares its sectors with flat's"
    assert m.group(1) == numbers.times_word(ratio)
    assert round(ratio) == 2  # the profile's 16 against 8; a new record may change this


def test_06_second_thread_map_traces_the_16bit_mapping():
    """06 drew a float32 trace (32 lanes per head) under text about the 16-bit mapping, with a
    title saying "colour = warp" and text saying "each colour is one head"."""
    src = next(s for s in SOURCES if s.stem.startswith("06"))
    cells = _stored(src)
    i = next(i for i, c in enumerate(cells) if "heads_per_warp=2" in _text(c["source"])
             and "trace_fused" in _text(c["source"]))
    assert 'storage="float16"' in _text(cells[i]["source"])
    printed = "".join(_text(o.get("text", "")) for o in cells[i]["outputs"])
    assert "float16 qkv; each lane holds 8 consecutive elements of each of its warp's 2 heads" in printed
    intro = _text(cells[i - 1]["source"])
    assert "each colour is still one warp" in intro and "sixteen lanes each" in intro
    assert "each colour is one head" not in intro


def test_trace_fused_draws_the_16bit_mapping_it_is_asked_for():
    """The figure under the 16-bit text must come from a 16-bit trace: half a warp per head,
    8 elements per lane, two heads per warp (colour = warp in the plot's title)."""
    from ropelab import lessons

    fmap = lessons.trace_fused(1, (2, 2, 1), 128, heads_per_warp=2, storage="float16")
    assert fmap.elements_per_lane == 8
    q0, q1 = fmap.lane[0, 0], fmap.lane[0, 1]
    assert set(q0) == set(range(16)) and set(q1) == set(range(16, 32))
    assert (fmap.warp[0, 0] == fmap.warp[0, 1]).all() and fmap.warp[0, 0, 0] != fmap.warp[0, 2, 0]
    ax = lessons.plot_fused_map(fmap)
    assert "float16: colour = warp" in ax.get_title()
    import matplotlib.pyplot as plt

    plt.close(ax.figure)
    with pytest.raises(ValueError, match="storage"):
        lessons.trace_fused(1, (1, 1, 0), 64, storage="bfloat16")
