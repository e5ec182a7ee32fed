"""What each step hands the learner: an empty body with its contract, or a skeleton, and why.

The course's rule: at least two-thirds of all steps start from an empty body (a docstring that
states the contract, then ``pass``); any other starter is a *skeleton*, and the notebook says
why it gives one, in a Markdown cell just before the starter, with the words
:data:`REASON_MARK` ("*Why a skeleton:* this step teaches the order of the loads ...").
``tests/test_hints.py`` holds the course to it.
"""

from __future__ import annotations

import ast

from ..resources import notebook_sources
from .intake import empty_body

REASON_MARK = "*Why a skeleton:*"
SHARE = 2 / 3  # the least share of steps that start from an empty body
CONTRACT_CHARS = 40  # a docstring shorter than this states no contract

EMPTY, SKELETON, NO_CONTRACT, NO_STARTER = "empty", "skeleton", "no contract", "no starter"


def _docstring(source: str) -> str:
    tree = ast.parse(source)
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return (ast.get_docstring(fns[0]) or "") if fns else ""


def shape(step) -> str:
    """:data:`EMPTY` (a contract and ``pass``), :data:`SKELETON` (code to complete or change),
    :data:`NO_CONTRACT` (``pass`` under no real docstring) or :data:`NO_STARTER`."""
    source = step.starter_source()
    if source is None:
        return NO_STARTER
    if not empty_body(source):
        return SKELETON
    return EMPTY if len(_docstring(source)) > CONTRACT_CHARS else NO_CONTRACT


def _cells(text: str) -> list[tuple[bool, str]]:
    """(is Markdown, text) of each cell of a percent-format source."""
    cells, header, current = [], None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("# %%"):
            if header is not None:
                cells.append(("[markdown]" in header, "".join(current)))
            header, current = line, []
        else:
            current.append(line)
    if header is not None:
        cells.append(("[markdown]" in header, "".join(current)))
    return cells


def reason(step) -> str | None:
    """The notebook's sentence saying why ``step`` gives a skeleton: the text from
    :data:`REASON_MARK` to the end of its sentence, in the Markdown cells right before the
    starter cell; None when there is none."""
    path = notebook_sources() / f"{step.notebook}.py"
    if not path.is_file():
        return None
    cells = _cells(path.read_text())
    found = [k for k, (md, text) in enumerate(cells)
             if not md and f"def {step.kernel_name}(" in text]
    if len(found) != 1:
        return None
    before = []
    for md, text in reversed(cells[:found[0]]):
        if not md:
            break
        before.insert(0, text)
    prose = " ".join(line.removeprefix("#").strip() for line in "".join(before).splitlines())
    at = prose.find(REASON_MARK)
    if at < 0:
        return None
    sentence = prose[at:]
    end = sentence.find(". ", len(REASON_MARK))
    return sentence if end < 0 else sentence[:end + 1]


def census(ladders: dict) -> dict:
    """Notebook number -> {shape: [step ids]}, for ``ladders`` (number -> steps)."""
    out = {}
    for number, ladder in ladders.items():
        shapes: dict = {}
        for step in ladder:
            shapes.setdefault(shape(step), []).append(step.id)
        out[number] = shapes
    return out


def empty_share(ladders: dict) -> float:
    """The share of all steps that start from an empty body with their contract."""
    counts = census(ladders)
    total = sum(len(ids) for shapes in counts.values() for ids in shapes.values())
    empty = sum(len(shapes.get(EMPTY, [])) for shapes in counts.values())
    return empty / total if total else 0.0
