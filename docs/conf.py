"""Sphinx configuration of the rendered course: the stored notebooks and the API reference.

Build (docs/README.md): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
Nothing here runs a notebook: the pages show the outputs committed with them (the ones nbval
checks), charts included.
"""

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Document the checkout's ropelab, installed or not (CI's docs venv has only its dependencies).
sys.path.insert(0, str(ROOT))
# autodoc imports ropelab: pick the simulator without asking the CUDA driver, and say nothing.
os.environ.setdefault("ROPELAB_TARGET", "simulator")
os.environ.setdefault("ROPELAB_QUIET", "1")

project = "ropelab"
author = "ropelab authors"
copyright = "2026, ropelab authors (MIT License)"
# Read as setuptools reads it (pyproject.toml), without importing numba for a page-only build.
release = version = re.search(r'^__version__ = "([^"]+)"', (ROOT / "ropelab" / "__init__.py")
                              .read_text(), re.M).group(1)

extensions = [
    "myst_nb",  # notebooks and Markdown pages (it brings myst_parser)
    "sphinx.ext.autodoc",
    "numpydoc",  # ropelab's docstrings are numpydoc style
]

root_doc = "index"
# course/ is a copy of the stored notebooks, made here at every build (never committed).  Not a
# link to notebooks/: Sphinx resolves a page's relative links from the file's real path, and a
# notebook's link to the glossary (00_rope_in_one_notebook.ipynb#9-glossary) would then point
# outside the site.
COURSE = Path(__file__).resolve().parent / "course"
if COURSE.is_symlink():  # a checkout from before the copy
    COURSE.unlink()
COURSE.mkdir(exist_ok=True)
_stored = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
for _old in COURSE.glob("*.ipynb"):
    if _old.name not in _stored:
        _old.unlink()
for _name in sorted(_stored):
    _text = (ROOT / "notebooks" / _name).read_bytes()
    if not (COURSE / _name).is_file() or (COURSE / _name).read_bytes() != _text:
        (COURSE / _name).write_bytes(_text)  # unchanged files keep their time: no rebuild
# README.md describes the build; tests/ checks the built site; solutions/ and checkpoints are
# not pages.
exclude_patterns = ["_build", "README.md", "tests", "course/solutions",
                    "**/.ipynb_checkpoints"]

# ---- notebooks: render what is stored, never execute -------------------------------------------
nb_execution_mode = "off"
nb_merge_streams = True  # nbval-checked notebooks store some stdout in split chunks
myst_enable_extensions = ["dollarmath", "amsmath"]  # the notebooks write math as $...$
myst_heading_anchors = 3  # [text](#a-heading) links inside a page resolve, and are checked

# ---- API reference -----------------------------------------------------------------------------
# ropelab.torch_ops registers torch custom ops at import: torch is mocked (never installed for the
# docs, a CPU build is large) so its functions' signatures and docstrings can be read.
autodoc_mock_imports = ["torch"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False  # the API pages list the members they document
numpydoc_class_members_toctree = False

# ---- checking ----------------------------------------------------------------------------------
# With -W every warning fails the build: a link to a page or heading that does not exist
# (myst.xref_missing), an image file that is missing, a notebook outside every toctree, a
# docstring numpydoc cannot parse.  External links are not checked (no network in CI).
nitpicky = False  # type names in docstrings are prose, not cross-references
# A prose paragraph left unindented inside "Parameters" renders as a bold parameter that does
# not exist; numpydoc's PR02 (unknown parameter) turns that into a warning, so an error.
numpydoc_validation_checks = {"PR02"}
# These two have such paragraphs today (ropelab/ops/rope.py, ops/qk.py: they belong in a
# "Notes" section); remove each line once its docstring is fixed.
numpydoc_validation_exclude = {r"^ropelab\.rope$", r"^ropelab\.rope_qk$"}

# ---- HTML --------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"ropelab {release}"
html_show_sourcelink = False
html_copy_source = False  # the notebooks are in the repository; the site does not carry copies
