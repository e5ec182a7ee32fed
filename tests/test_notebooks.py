"""The stored course notebooks are fit to commit: built from their sources, run top to bottom,
with no error, no stderr, no machine path, and kernels shown from ropelab, never pasted.

nbval (``--nbval`` in pyproject.toml) re-runs the notebooks and compares outputs; these tests
read the stored files only (about a second in all).
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

from ropelab.grader import steps as ladder

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
BUILD_SCRIPT = ROOT / "scripts" / "notebooks" / "build.py"


def _load_build():
    spec = importlib.util.spec_from_file_location("course_build", BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()
SOURCES = build.sources()
STORED = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
# Code that defines or launches a kernel by hand; notebooks must show ropelab's instead (the
# exercises' starter kernels are the one exception: the learner's own code to write).
PASTED_KERNEL = re.compile(r"@cuda\.jit|cuda\.jit\(|cuda\.grid\(|cuda\.(threadIdx|blockIdx|blockDim)")


def _read(path):
    return json.loads(path.read_text())


def _code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _text(value):
    return value if isinstance(value, str) else "".join(value)


def test_every_source_has_a_stored_notebook_and_back():
    assert SOURCES, "no notebook sources found"
    assert [build.notebook_path(s) for s in SOURCES] == STORED


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_stored_cells_match_their_source(src):
    """The .ipynb is what build.py makes of its source (Markdown numbers rendered from today's
    records): edit the source, then rebuild."""
    stored = [(c["cell_type"], _text(c["source"])) for c in _read(build.notebook_path(src))["cells"]]
    assert stored == [(kind, text) for kind, text, _ in build.render_cells(src)]


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_stored_run_is_complete_and_clean(path):
    nb = _read(path)
    cells = _code_cells(nb)
    counts = [c.get("execution_count") for c in cells]
    # One uninterrupted top-to-bottom run: 1, 2, 3, ... with no cell skipped or re-run.
    assert counts == list(range(1, len(cells) + 1)), f"execution counts {counts}"
    assert build.problems(_as_node(nb)) == []


def _as_node(nb):
    class Node(dict):
        __getattr__ = dict.get

    def wrap(value):
        if isinstance(value, dict):
            return Node({k: wrap(v) for k, v in value.items()})
        if isinstance(value, list):
            return [wrap(v) for v in value]
        return value

    return wrap(nb)


def _exercises_of(path):
    """The graded steps of a notebook's ladder (their functions are the starters it may hold)."""
    return [s for s in ladder.STEPS.values() if s.notebook == path.stem]


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_kernels_are_shown_from_ropelab_not_pasted(path):
    cells = _code_cells(_read(path))
    starters = {ex.kernel_name for ex in _exercises_of(path)}
    for cell in cells:
        source = _text(cell["source"])
        if PASTED_KERNEL.search(source):
            defined = set(re.findall(r"^def (\w+)\(", source, re.M))
            assert defined and defined <= starters, f"kernel code in a notebook cell:\n{source}"
    if path.name[:2] not in ("00", "07"):  # the variant notebooks print their kernel by region
        assert any("lessons.excerpt(" in _text(c["source"]) for c in cells)


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_exercises_are_graded(path):
    """Notebooks 00-06 and 08 end with kernel exercises: the starter kernel, then a cell that
    grades it, whose stored output is the unsolved starter's verdict.  07 and 09 keep answers
    checked by assert cells (08 has both)."""
    cells = _code_cells(_read(path))
    sources = [_text(c["source"]) for c in cells]
    exercises = _exercises_of(path)
    if path.name[:2] not in ("07", "09"):  # 09: no kernel to write, answers asserted
        assert exercises, f"{path.name} has no kernel exercise"
    for ex in exercises:
        starter = [i for i, src in enumerate(sources) if f"def {ex.kernel_name}(" in src]
        graded = [i for i, src in enumerate(sources)
                  if f'steps.check({ex.kernel_name}, "{ex.id}")' in src]
        assert len(starter) == 1 and len(graded) == 1 and starter[0] < graded[0]
        shown = "".join(_text(o.get("text", "")) for o in cells[graded[0]]["outputs"])
        assert shown.startswith("not solved yet: "), shown
    if not exercises:
        answers = [s for s in sources if re.search(r"^answer_\w+\s*=", s, re.M)]
        checks = [s for s in sources if re.search(r"^assert ", s, re.M)]
        assert answers and len(checks) >= len(answers)


def test_problem_finder_catches_what_it_must():
    bad = _as_node({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "error", "ename": "ValueError", "evalue": "boom"},
        {"output_type": "stream", "name": "stderr", "text": "warning"},
        {"output_type": "stream", "name": "stdout", "text": "saved to /home/alice/x.json"},
        {"output_type": "display_data", "data": {"text/plain": "file /tmp/abc"}},
    ]}]})
    found = build.problems(bad)
    assert len(found) == 4
    clean = _as_node({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "data/bench/x.json PASS"}]}]})
    assert build.problems(clean) == []


def test_parse_source_splits_cells():
    text = "# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n\n# %%\nprint(x)\n"
    assert build.parse_source(text) == [("markdown", "# Title\n\ntext"), ("code", "x = 1"),
                                        ("code", "print(x)")]


@pytest.mark.parametrize("text", [
    "x = 1\n",  # code before the first cell marker
    "# %% [markdown]\nnot a comment\n",  # a Markdown line jupytext would comment
    "# %%\nx = 1\n# %% [mardown]\n# typo\n",  # a misspelt cell type
], ids=["no-marker", "bare-markdown", "typo"])
def test_parse_source_refuses_what_jupytext_would_rewrite(text):
    with pytest.raises(ValueError, match="canonical jupytext percent|unexpected cell options"):
        build.parse_source(text)


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.stem)
def test_sources_are_canonical_percent_format(src):
    """Each source is what jupytext writes back, so jupytext and JupyterLab pairing agree."""
    cells = build.parse_source(src.read_text())
    assert cells[0][0] == "markdown" and cells[0][1].startswith("# ")


def test_readme_lists_every_notebook():
    readme = (ROOT / "README.md").read_text()
    for path in STORED:
        assert f"notebooks/{path.name}" in readme, f"{path.name} missing from README's course list"
