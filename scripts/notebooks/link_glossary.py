"""Link each glossary term, where a notebook first uses it in prose, to notebook 00's glossary.

Notebook 00 defines the course's terms (its ``## 9. Glossary``; the list is
``ropelab.lessons.glossary.TERMS``).  A later notebook may be read on its own, so
``tests/test_glossary.py`` wants each term it uses defined where it first uses it: in italics in
place, or by a link to the glossary.  This script writes the links into the sources:

    python scripts/notebooks/link_glossary.py          # every notebook after the glossary
    python scripts/notebooks/link_glossary.py 06 08    # those whose name starts with 06 or 08
    python scripts/notebooks/link_glossary.py --check  # say what it would link, change nothing

For each term, the first match of its pattern in the notebook's Markdown (headings left out,
as the test leaves them out) becomes ``[match](00_rope_in_one_notebook.ipynb#9-glossary)``; a
match inside an inline code span links the whole span.  A term already linked or defined in
italics at its first use is left alone, so running it twice changes nothing.  Matches inside a
link or a ``$...$`` formula are skipped (the next use is linked).  What it cannot fix it lists:
a term whose first use is printed output before any prose names it needs a sentence, written
by hand, in a Markdown cell before that output (printed source code does not count: its
comments are the code's).  Rebuild the notebooks it changed with
``build.py --markdown-only`` (their code is unchanged).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GLOSSARY_STEM = "00_rope_in_one_notebook"
GLOSSARY_LINK = f"{GLOSSARY_STEM}.ipynb#9-glossary"
MARKDOWN_HEADER = "# %% [markdown]"
# A code cell that prints source code (as tests/test_glossary.py recognizes one).
LISTING = re.compile(r"\b(excerpt|specialised|getsource)\(")


def _build():
    spec = importlib.util.spec_from_file_location("course_build", HERE / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _in_place(term, text: str) -> bool:
    """The term (or an alias) in italics or bold: notebook 00's in-place definition."""
    names = (term.name,) + term.aliases
    return any(re.search(r"\*{1,2}" + r"\s+".join(map(re.escape, n.split())) + r"s?\*{1,2}",
                         text, re.I) for n in names)


def _spans(pattern: str, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(pattern, text)]


def _inside(at: int, spans) -> tuple[int, int] | None:
    return next(((a, b) for a, b in spans if a <= at < b), None)


def _blank_headings(text: str) -> str:
    """``text`` with its heading lines blanked (same length, so offsets stay)."""
    return "\n".join(" " * len(line) if line.startswith("#") else line for line in text.split("\n"))


def link_cell(text: str, terms, done: set, link: str = GLOSSARY_LINK) -> tuple[str, list]:
    """One Markdown cell's text with the first use of each term not in ``done`` linked, and the
    names of the terms it linked (each term found, linked or not, is added to ``done``)."""
    linked = []
    for term in terms:
        if term.name in done:
            continue
        visible = _blank_headings(text)
        links = _spans(r"\[(?:[^\[\]]|`[^`]*`)+\]\([^)]*\)", visible)
        if not re.search(term.pattern, visible):
            continue
        done.add(term.name)
        first = re.search(term.pattern, visible)
        if any(a <= first.start() < b for a, b in links) or _in_place(term, visible):
            continue  # linked (by an earlier run) or defined in place already
        code = _spans(r"`[^`\n]*`", visible)
        math = _spans(r"\$[^$\n]*\$", visible)
        for m in re.finditer(term.pattern, visible):
            if _inside(m.start(), links) or _inside(m.start(), math):
                continue
            span = _inside(m.start(), code) or m.span()
            text = f"{text[:span[0]]}[{text[span[0]:span[1]]}]({link}){text[span[1]:]}"
            linked.append(term.name)
            break
    return text, linked


def _markdown_cells(lines: list[str]):
    """``(first, last)`` line indexes (exclusive end) of each Markdown cell's body."""
    starts = [i for i, line in enumerate(lines) if line.startswith("# %%")] + [len(lines)]
    for a, b in zip(starts, starts[1:]):
        if lines[a].strip() == MARKDOWN_HEADER:
            yield a + 1, b


def link_source(text: str, terms) -> tuple[str, list[str]]:
    """A percent source with its first uses linked, and the terms it linked."""
    lines = text.split("\n")
    done: set = set()
    linked: list[str] = []
    out = list(lines)
    for first, last in _markdown_cells(lines):
        body = [line[2:] if line.startswith("# ") else line[1:] for line in lines[first:last]]
        while body and body[-1] == "" and lines[first + len(body) - 1] == "":
            body.pop()  # blank lines between cells are no Markdown
        new, names = link_cell("\n".join(body), terms, done)
        new = new.split("\n")
        if new != body:
            linked += names
            for k, line in enumerate(new):
                out[first + k] = "# " + line if line else "#"
    return "\n".join(out), linked


def printed_first(stored: Path, terms) -> list[str]:
    """Terms a stored notebook prints before its prose names them (for a sentence by hand)."""
    found = []
    seen: set = set()
    for i, cell in enumerate(json.loads(stored.read_text())["cells"]):
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            seen |= {t.name for t in terms if re.search(t.pattern, _blank_headings(text))}
            continue
        if LISTING.search(text):  # printed source code: its comments are not the lesson's prose
            continue
        for out in cell.get("outputs", []):
            printed = out.get("text") or out.get("data", {}).get("text/plain", "")
            printed = "".join(printed) if isinstance(printed, list) else printed
            for t in terms:
                if t.name not in seen and re.search(t.pattern, printed):
                    seen.add(t.name)
                    found.append(f"{t.name} (cell {i})")
    return found


def main(argv=None) -> int:
    sys.path.insert(0, str(REPO))
    from ropelab.lessons.glossary import TERMS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="notebook name prefixes (default: all after 00)")
    parser.add_argument("--check", action="store_true", help="change nothing, list what to do")
    args = parser.parse_args(argv)
    build = _build()
    sources = build.sources()
    after = sources[[s.stem for s in sources].index(GLOSSARY_STEM) + 1:]
    todo = 0
    for src in after:
        if args.only and not any(src.stem.startswith(p) for p in args.only):
            continue
        text, linked = link_source(src.read_text(), TERMS)
        if linked:
            todo += 1
            print(f"{src.stem}: {'would link' if args.check else 'linked'} {', '.join(linked)}")
            if not args.check:
                build.read_source(text)  # still a canonical percent source
                src.write_text(text)
        stored = build.notebook_path(src)
        if stored.exists():
            missing = printed_first(stored, TERMS)
            if missing:
                todo += 1
                print(f"{src.stem}: printed before the prose names it (write a sentence before): "
                      + ", ".join(missing))
    return 1 if args.check and todo else 0


if __name__ == "__main__":
    sys.exit(main())
