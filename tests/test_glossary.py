"""Every glossary-worthy term (``ropelab.course.glossary.TERMS``) a notebook uses is defined:
in notebook 00's glossary, and, where 00 uses it before its glossary, in place at first use.

Reads the stored notebooks (Markdown and printed output) and the profile records; no kernel
runs.
"""

import json
import re
from pathlib import Path

import pytest

from ropelab.course.glossary import BY_NAME, TERMS

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
    assert not extra, f"glossary entries missing from ropelab.course.glossary.TERMS: {extra}"


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
