"""Every glossary-worthy term (``ropelab.lessons.glossary.TERMS``) a notebook uses is defined:
in notebook 00's glossary, and, where 00 uses it before its glossary, in place at first use.

Reads the stored notebooks (Markdown and printed output) and the profile records; no kernel
runs.
"""

import json
import re
from pathlib import Path

import pytest

from ropelab.lessons.glossary import BY_NAME, TERMS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))  # in course order
GLOSSARY_NOTEBOOK = ROOT / "notebooks" / "00_rope_in_one_notebook.ipynb"
GLOSSARY_HEADING = "## 9. Glossary"
# The notebooks a learner meets before the glossary (the on-ramp): each defines in place every
# term it uses.
BEFORE_GLOSSARY = NOTEBOOKS[:NOTEBOOKS.index(GLOSSARY_NOTEBOOK)]


def _text(value):
    return value if isinstance(value, str) else "".join(value)


def cell_texts(path) -> list[str]:
    """Each cell's Markdown, or a code cell's printed output (its code is not prose)."""
    texts = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            texts.append(_text(cell["source"]))
            continue
        out = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(_text(o.get("text", "")))
            else:
                out.append(_text(o.get("data", {}).get("text/plain", "")))
        texts.append("\n".join(out))
    return texts


def glossary_cell() -> tuple[int, str]:
    cells = cell_texts(GLOSSARY_NOTEBOOK)
    found = [(i, t) for i, t in enumerate(cells) if t.startswith(GLOSSARY_HEADING)]
    assert len(found) == 1, f"notebook 00 must hold exactly one cell starting {GLOSSARY_HEADING!r}"
    return found[0]


def glossary_entries() -> set[str]:
    """The bold names of the glossary's bullets (``* **L1** / **L2**: ...`` defines both)."""
    return {name for line in glossary_cell()[1].splitlines() if line.startswith("* **")
            for name in re.findall(r"\*\*(.+?)\*\*", line.split(":")[0])}


def test_every_listed_term_has_a_glossary_entry():
    missing = [t.name for t in TERMS if t.name not in glossary_entries()]
    assert not missing, f"terms with no entry in notebook 00's glossary: {missing}"


def test_glossary_entries_are_all_listed_terms():
    """An entry the list does not know is an entry no test holds the notebooks to."""
    extra = sorted(glossary_entries() - set(BY_NAME))
    assert not extra, f"glossary entries missing from ropelab.lessons.glossary.TERMS: {extra}"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if p != GLOSSARY_NOTEBOOK],
                         ids=lambda p: p.stem)
def test_terms_used_in_a_notebook_are_in_the_glossary(path):
    entries = glossary_entries()
    text = "\n".join(cell_texts(path))
    undefined = [t.name for t in TERMS if t.used_in(text) and t.name not in entries]
    assert not undefined, f"{path.stem} uses terms the glossary does not define: {undefined}"


def _defined_in_place(term, text: str) -> bool:
    """Notebook 00's primer style: the term (or an alias) in italics or bold where it is
    introduced (a Markdown line break may fall inside it)."""
    names = (term.name,) + term.aliases
    return any(re.search(r"\*{1,2}" + r"\s+(?:#\s*)?".join(map(re.escape, n.split())) + r"s?\*{1,2}",
                         text, re.I) for n in names)


def test_notebook_00_defines_each_term_before_its_glossary_uses_it():
    cells = cell_texts(GLOSSARY_NOTEBOOK)
    where, _ = glossary_cell()
    problems = []
    for term in TERMS:
        # Cell 0 is the title and the outline of the sections, which names what they define.
        first = next((i for i, t in enumerate(cells[:where]) if i > 0 and term.used_in(t)), None)
        if first is not None and not _defined_in_place(term, cells[first]):
            problems.append(f"{term.name} (cell {first})")
    assert not problems, ("notebook 00 uses these before its glossary without defining them in "
                          f"italics where first used: {problems}")


def test_the_glossary_notebook_has_the_on_ramp_before_it():
    assert [p.stem for p in BEFORE_GLOSSARY] == ["00_on_ramp"]


@pytest.mark.parametrize("path", BEFORE_GLOSSARY, ids=lambda p: p.stem)
def test_a_notebook_before_the_glossary_defines_each_term_where_it_first_uses_it(path):
    """The on-ramp comes before notebook 00's glossary, so it defines every term it uses in the
    first cell that uses it (its title cell included, and printed output counts as use)."""
    cells = cell_texts(path)
    problems = []
    for term in TERMS:
        first = next((i for i, t in enumerate(cells) if term.used_in(t)), None)
        if first is not None and not _defined_in_place(term, cells[first]):
            problems.append(f"{term.name} (cell {first})")
    assert not problems, (f"{path.stem} uses these without defining them in italics where "
                          f"first used: {problems}")


def test_in_place_definitions_are_found_and_bare_uses_are_not():
    race, shfl = BY_NAME["race"], BY_NAME["SHFL"]
    assert _defined_in_place(race, "two threads in a *race*") and race.used_in("a race")
    assert not _defined_in_place(race, "two threads in a race, *not* ordered")
    assert _defined_in_place(shfl, "a *warp\n# shuffle*") and shfl.used_in("one shuffle")


def test_every_stall_reason_in_the_profile_records_is_a_term():
    reasons = set()
    for path in (ROOT / "data" / "profile").glob("profile-*.json"):
        for row in json.loads(path.read_text())["rows"]:
            reasons |= {v for k, v in row.items() if re.fullmatch(r"stall_\d+", k) and v}
    assert reasons, "no stall reasons found in data/profile/"
    assert not reasons - set(BY_NAME), f"stall reasons with no term: {sorted(reasons - set(BY_NAME))}"


def test_the_stale_sfu_sentence_is_gone():
    """00 once said "four SFU ops (a pow, a sin and a cos)": three names for four operations.
    The census of flat counts lg2, ex2, sin and cos; the sentence must name the pow's two."""
    text = "\n".join(cell_texts(GLOSSARY_NOTEBOOK))
    assert "four of them on the SFU" in text
    sentence = text[text.index("four of them on the SFU"):][:200]
    assert "lg2" in sentence and "ex2" in sentence


# --- Defined before use in every notebook -----------------------------------------------------
#
# A notebook after the glossary may be opened on its own (a rendered page, a link), so each
# of them defines a term where it first uses it, by a link to the glossary (the course's
# style: `[warp](00_rope_in_one_notebook.ipynb#9-glossary)`, what
# scripts/notebooks/link_glossary.py writes) or in italics in place, as notebook 00 does.
# Printed output counts as use: a table whose columns are terms needs a Markdown cell before
# it that names them.  Printed source code (a kernel shown by `course.excerpt`,
# `course.specialised` or `inspect.getsource`) does not: its comments are the code's, and the
# prose around it links the terms it discusses.  Headings do not count either: they name a
# section, the text under them uses the terms.

GLOSSARY_NOTEBOOK = ROOT / "notebooks" / "00_rope_in_one_notebook.ipynb"
GLOSSARY_LINK = "00_rope_in_one_notebook.ipynb#9-glossary"
AFTER_GLOSSARY = NOTEBOOKS[NOTEBOOKS.index(GLOSSARY_NOTEBOOK) + 1:]
LINK = re.compile(r"\[((?:[^\[\]]|`[^`]*`)+)\]\(" + re.escape(GLOSSARY_LINK) + r"\)")


LISTING = re.compile(r"\b(excerpt|specialised|getsource)\(")


def kinds_and_texts(path) -> list[tuple[str, str]]:
    """``(kind, text)`` per cell: ``markdown`` with its headings left out, ``output``, or
    ``listing`` (the output of a cell that prints source code)."""
    raw = json.loads(path.read_text())["cells"]
    out = []
    for cell, text in zip(raw, cell_texts(path)):
        if cell["cell_type"] == "markdown":
            text = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
            out.append(("markdown", text))
        else:
            out.append(("listing" if LISTING.search(_text(cell["source"])) else "output", text))
    return out


def linked_at(text: str, at: int) -> bool:
    return any(m.start(1) <= at < m.end(1) for m in LINK.finditer(text))


def first_use_problems(cells) -> list[str]:
    """Each term whose first use in ``cells`` (``[(kind, text)]``) is printed output, or Markdown
    that neither links it to the glossary there nor defines it in place."""
    problems = []
    for term in TERMS:
        first = next((i for i, (kind, text) in enumerate(cells)
                      if kind != "listing" and term.used_in(text)), None)
        if first is None:
            continue
        kind, text = cells[first]
        if kind == "output":
            problems.append(f"{term.name}: printed in cell {first} before any Markdown names it")
        elif not (linked_at(text, term.first_use(text)) or _defined_in_place(term, text)):
            problems.append(f"{term.name}: cell {first} uses it with no glossary link and no "
                            "definition in place")
    return problems


@pytest.mark.parametrize("path", AFTER_GLOSSARY, ids=lambda p: p.stem)
def test_each_notebook_defines_a_term_where_it_first_uses_it(path):
    problems = first_use_problems(kinds_and_texts(path))
    assert not problems, (f"{path.stem}: link each term to {GLOSSARY_LINK} at its first use "
                          "(python scripts/notebooks/link_glossary.py), or define it in italics "
                          "there:\n  " + "\n  ".join(problems))


def test_a_planted_undefined_term_fails():
    link = f"[warp]({GLOSSARY_LINK})"
    assert first_use_problems([("markdown", f"one {link} per head, 32 lanes each")]) == [
        "lane: cell 0 uses it with no glossary link and no definition in place"]
    # Linked, but not where it is first used.
    assert first_use_problems([("markdown", f"a warp per head; one {link}")]) == [
        "warp: cell 0 uses it with no glossary link and no definition in place"]
    # Printed before the prose names it.
    assert first_use_problems([("output", "ulp 0.5"), ("markdown", "half an *ulp*")]) == [
        "ulp: printed in cell 0 before any Markdown names it"]
    # In place, in italics, is a definition too; a linked code span counts.
    assert first_use_problems([("markdown", "half an *ulp*, [`shfl_xor_sync`]"
                                            f"({GLOSSARY_LINK}) then")]) == []


# --- Jargon the list does not hold yet -------------------------------------------------------
#
# Every capitalized abbreviation in a notebook's prose is either a listed term or one of these
# words, which a reader of the course is assumed to know or which are names, not jargon.
COMMON_WORDS = {
    "CUDA", "GPU", "GPUs", "CPU", "NVIDIA", "IEEE",  # the platform and a standard's name
    "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB",  # units
    "H100", "H200", "RTX",  # products
    "FLUX", "GPT", "QK", "RMS",  # model names, and the parts of "GPT-J", "QK-norm", "RMSNorm"
    "JSON", "README", "PR", "PASS", "FAIL",  # file formats, a pull request, verdicts
    "IR", "FP32",  # "intermediate representation" spelled out where used; float32 lanes
    "DRAM",  # in HBM's entry
    "PHASES",  # notebook 08's constant, named as the code names it
    "KV", "FP8",  # notebook 10's "KV cache" (in italics there) and the 8-bit float it spells out
}
ABBREVIATION = re.compile(r"(?<![\w`.$/-])[A-Z][A-Z0-9]+s?(?![\w`])")


def _code_spans_removed(text: str) -> str:
    return re.sub(r"`[^`]*`", "", text)


def unknown_abbreviations(markdown: str) -> set[str]:
    """The abbreviations of ``markdown`` (code spans left out) that no term and no common word
    covers."""
    covered = set(COMMON_WORDS)
    for term in TERMS:
        covered |= {term.name, *term.aliases}
    return {word for word in ABBREVIATION.findall(_code_spans_removed(markdown))
            if word not in covered and not any(t.used_in(word) for t in TERMS)}


def test_every_abbreviation_in_the_prose_is_a_term_or_a_common_word():
    unknown = {}
    for path in NOTEBOOKS:
        for kind, text in kinds_and_texts(path):
            if kind == "markdown":
                for word in unknown_abbreviations(text):
                    unknown.setdefault(word, set()).add(path.stem[:2])
    assert not unknown, ("abbreviations that are neither glossary terms "
                         f"(ropelab.lessons.glossary) nor common words: {unknown}")


def test_a_planted_abbreviation_is_found():
    assert unknown_abbreviations("the TLB misses, on the GPU, in `XYZ` code, per SM") == {"TLB"}
