"""Build the course notebooks from their sources and store fresh outputs.

Each notebook is written as a plain Python file in ``scripts/notebooks/src/`` in jupytext's *percent*
format (``# %%`` starts a code cell, ``# %% [markdown]`` a Markdown cell whose lines start with
``# ``; https://jupytext.readthedocs.io/en/latest/formats-scripts.html).  This script reads each
source with jupytext, turns it into ``notebooks/<name>.ipynb``, runs it top to bottom on the
Numba CUDA simulator (its kernel sees no GPU: ``CUDA_VISIBLE_DEVICES=""``), and saves it with
its outputs, which ``pytest --nbval`` then checks.  Run it after changing a source, a kernel
whose source a notebook prints, or the recorded data under ``data/``:

    python scripts/notebooks/build.py              # every notebook
    python scripts/notebooks/build.py 01 03        # only those whose name starts with 01 or 03
    python scripts/notebooks/build.py --no-execute # write the cells, keep no outputs (quick look)

Every notebook's first code cell starts with :data:`INSTALL_BLOCK`, which installs ropelab into
the running kernel where it is missing (a bare Jupyter, Colab); ``build.py`` refuses a source
whose first code cell does not.  The stored notebook's metadata is what a JupyterLab 4 kernel
writes back when it opens it (:func:`kernel_metadata`), so opening one marks nothing unsaved.

Executing needs ``nbclient`` (installed with JupyterLab, the ``course`` extra).  The script
refuses a source that jupytext would not write back unchanged (so the ``.py`` file stays the
one canonical form, and a stray line cannot silently become a cell), and refuses to save a
notebook whose run produced an error, a stderr stream or a machine path.  It also refuses a
source whose Markdown or code comments name a dotted ``ropelab.`` name (a module, function or
constant) that does not resolve by import and attribute lookup.

Measured numbers in Markdown are placeholders, ``{{ fused.neox_16bit_pct }}``, rendered here
from the records under ``data/`` by :mod:`ropelab.lessons.numbers`; each rendered cell notes in
its metadata (``ropelab_numbers``: key -> record) where its numbers came from.  After a prose-only
edit, ``--markdown-only`` re-renders the Markdown of the stored notebooks and keeps their
outputs (it refuses when a code cell differs from the source: then rebuild).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import io
import os
import re
import sys
import tempfile
import time
import tokenize
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"  # the sources live here, out of the learners' view of notebooks/
REPO = HERE.parents[1]
NOTEBOOKS = REPO / "notebooks"  # where the built lessons go (and where their kernels run)
FORMAT = "py:percent"
# Output text that would tie a stored notebook to one machine.
MACHINE_PATH = re.compile(r"(?<![\w.])(/root|/home|/tmp|/work|/Users|/private/var|[A-Z]:\\)")
# A dotted ropelab name in prose or a comment (``ropelab.kernels.flat.launch_config``); a file
# path (``ropelab/kernels/flat.py``) or a longer word (``my_ropelab.x``) is not one.
DOTTED_NAME = re.compile(r"(?<![\w./-])ropelab(?:\.[A-Za-z_]\w*)+")
# How every notebook's first code cell begins (then its own imports and the target line).  Where
# ropelab is importable it does nothing; elsewhere one %pip line installs it into the running
# kernel: from the checkout when the notebook sits in one (`..`, not `-e ..`: an editable install
# is switched on by a .pth file that Python reads only at start, so this kernel would not see
# it), else from the course's wheel in the notebook's folder (`pip wheel --no-deps .` makes it;
# the shell that runs %pip expands the pattern).  Its output depends on the machine, so the
# source tags the cell `nbval-ignore-output` on its `# %%` line.
INSTALL_BLOCK = '''\
# Run this first.  It installs ropelab into this kernel where it is missing (a bare Jupyter,
# Colab): from the course's repository when this notebook is in one, else from the course's
# wheel in this folder.  Then it says where your kernels will run.
from pathlib import Path

try:
    import ropelab
except ImportError:
    project = Path("../pyproject.toml")  # there when this notebook sits in the course's repository
    in_repo = project.is_file() and 'name = "ropelab"' in project.read_text()
    %pip install -q {".." if in_repo else "ropelab-*.whl"}
    import ropelab
'''
# Cell options a source may give on its `# %%` line (nbval's tags); jupytext's blank-line hints
# are its own.
CELL_OPTIONS = {"tags", "lines_to_next_cell"}


def read_source(text: str):
    """The notebook (nbformat node, no outputs) that jupytext reads from a percent source.

    Raises ValueError when the text is not in canonical percent form, i.e. when jupytext would
    write it back differently: code before the first ``# %%``, a Markdown line without ``#``.
    """
    import jupytext

    nb = jupytext.reads(text, fmt=FORMAT)
    canonical = jupytext.writes(nb, fmt=FORMAT)
    if canonical != text:
        diff = difflib.unified_diff(text.splitlines(), canonical.splitlines(), "source",
                                    "as jupytext writes it", lineterm="", n=1)
        raise ValueError("not a canonical jupytext percent source (fix it, or run "
                         "`jupytext --to py:percent` on it):\n" + "\n".join(list(diff)[:12]))
    for i, cell in enumerate(nb.cells):
        # Only tags and blank-line hints are expected; anything else (a title after "# %%", a
        # misspelt "[markdown]") means the line does not say what the author meant.
        extra = set(cell.metadata) - CELL_OPTIONS
        if extra:
            raise ValueError(f"cell {i}: unexpected cell options {sorted(extra)} on its '# %%' "
                             f"line (use '# %%', '# %% [markdown]' or '# %% tags=[...]')")
    return nb


def source_tags(src: Path) -> list[list[str]]:
    """The tags of each cell of a source (``# %% tags=["nbval-ignore-output"]``), in order."""
    return [list(cell.metadata.get("tags", [])) for cell in read_source(src.read_text()).cells]


def install_block_problem(cells) -> str | None:
    """Why the first code cell of ``cells`` (``[(kind, text, ...)]``) does not begin with
    :data:`INSTALL_BLOCK`, or None when it does."""
    first = next((text for kind, text, *_ in cells if kind == "code"), None)
    if first is None:
        return "no code cell"
    if not (first + "\n").startswith(INSTALL_BLOCK):
        return "the first code cell does not begin with build.INSTALL_BLOCK (copy it from build.py)"
    return None


def kernel_metadata() -> dict:
    """The notebook metadata that JupyterLab 4 writes back when it opens a notebook and its
    kernel starts: ``kernelspec`` from the kernel's spec (name, display_name, language) and
    ``language_info`` from the kernel's info reply.  JupyterLab sets both on every kernel start
    and marks the notebook unsaved only when a value differs from the stored one, so the stored
    notebook carries exactly ipykernel's (``language_info.version`` is the Python that built it:
    a learner on another Python sees that one field change)."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    return {"kernelspec": {"display_name": spec["display_name"], "language": spec["language"],
                           "name": KERNEL_NAME},
            "language_info": dict(IPythonKernel.language_info)}


def parse_source(text: str) -> list[tuple[str, str]]:
    """``[(kind, text)]`` of a percent source, kind ``"code"`` or ``"markdown"``."""
    return [(cell.cell_type, cell.source) for cell in read_source(text).cells]


def render_cells(src: Path) -> list[tuple[str, str, dict]]:
    """``[(kind, text, numbers)]`` of a source as the stored notebook holds it: Markdown with its
    ``{{ key }}`` placeholders rendered from today's records, ``numbers`` the key -> record map
    of what was rendered (empty for code cells, which are never rendered)."""
    from ropelab.lessons import numbers

    out = []
    for kind, text in parse_source(src.read_text()):
        used = {}
        if kind == "markdown":
            text, used = numbers.render(text)
        out.append((kind, text, used))
    return out


def _comments(code: str) -> list[str]:
    """The ``#`` comments of a code cell (line by line where it does not tokenize: a magic)."""
    try:
        return [tok.string for tok in tokenize.generate_tokens(io.StringIO(code).readline)
                if tok.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [line[line.index("#"):] for line in code.splitlines() if "#" in line]


def dotted_names(kind: str, text: str) -> list[str]:
    """The dotted ``ropelab.`` names a cell mentions: anywhere in Markdown, in the comments of
    code (its code itself is checked by running it)."""
    where = [text] if kind == "markdown" else _comments(text)
    return [name for part in where for name in DOTTED_NAME.findall(part)]


def resolve(name: str):
    """The object ``name`` names: its longest prefix that is a module, imported, then
    attributes.  Raises LookupError saying which part does not exist."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module_name) is not None
        except (ImportError, ValueError):  # a parent that is not a package
            found = False
        if not found:
            continue
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] == parts[0]:
                raise
            # An optional dependency (torch for ropelab.models) is missing here: the module's
            # own top-level names, read from its file, still say whether the next part exists.
            return _defined_in_file(name, module_name, parts[cut:])
        for k in range(cut, len(parts)):
            if not hasattr(obj, parts[k]):
                raise LookupError(f"{name}: {'.'.join(parts[:k])} has no {parts[k]!r}")
            obj = getattr(obj, parts[k])
        return obj
    raise LookupError(f"{name}: no module {parts[0]!r}")


def _defined_in_file(name: str, module_name: str, rest: list[str]):
    """``name``'s first part after the module, checked in the module's source (its top-level
    definitions, assignments and imports); what follows it is taken on trust."""
    import ast

    if not rest:
        return module_name
    tree = ast.parse(Path(importlib.util.find_spec(module_name).origin).read_text())
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
    if rest[0] not in defined:
        raise LookupError(f"{name}: {module_name} has no {rest[0]!r}")
    return name


def unresolved_names(cells) -> list[str]:
    """Why each dotted ropelab name in ``cells`` (``[(kind, text, ...)]``) does not resolve."""
    found = []
    for i, (kind, text, *_) in enumerate(cells):
        for name in dict.fromkeys(dotted_names(kind, text)):
            try:
                resolve(name)
            except LookupError as exc:
                found.append(f"cell {i} ({kind}): {exc}")
    return found


def sources() -> list[Path]:
    return sorted(SRC.glob("[0-9][0-9]_*.py"))


def notebook_path(src: Path) -> Path:
    return NOTEBOOKS / (src.stem + ".ipynb")


def make_notebook(src: Path):
    import nbformat

    nb = nbformat.v4.new_notebook()  # nbformat 4.5, as JupyterLab 4 saves it
    nb.metadata.update(kernel_metadata())
    cells = render_cells(src)
    bad = unresolved_names(cells)
    if bad:  # a lesson that names a module or function ropelab does not have
        raise ValueError("names that do not resolve:\n  " + "\n  ".join(bad))
    missing_install = install_block_problem(cells)
    if missing_install:
        raise ValueError(missing_install)
    for i, ((kind, text, used), tags) in enumerate(zip(cells, source_tags(src))):
        # Fresh cells: jupytext's per-cell layout hints (blank lines to the next cell) belong
        # to the .py file, not to the stored notebook; tags (nbval's) go with the cell.
        cell = (nbformat.v4.new_markdown_cell(text) if kind == "markdown"
                else nbformat.v4.new_code_cell(text))
        cell["id"] = f"{src.stem[:2]}-{i:02d}"  # stable ids keep diffs small
        if tags:
            cell["metadata"]["tags"] = tags
        if used:
            cell["metadata"]["ropelab_numbers"] = used
        nb.cells.append(cell)
    return nb


def refresh_markdown(src: Path):
    """The notebook of ``src`` with fresh Markdown (from the source and today's records) and the
    stored notebook's code cells, outputs included.  Markdown cells may be added, removed or
    edited; raises ValueError when the code cells differ from the stored ones (their outputs
    would then describe other code: rebuild instead)."""
    import nbformat

    stored = nbformat.read(notebook_path(src), as_version=4)
    fresh = make_notebook(src)
    old_code = [c for c in stored.cells if c.cell_type == "code"]
    new_code = [c for c in fresh.cells if c.cell_type == "code"]
    if [c.source for c in old_code] != [c.source for c in new_code]:
        raise ValueError("code cells differ from the stored notebook's: rebuild it")
    for old, new in zip(old_code, new_code):
        new.outputs, new.execution_count = old.outputs, old.execution_count
    # The kernel's language_info from the run that made the outputs (its Python version).
    fresh.metadata["language_info"] = stored.metadata.get("language_info",
                                                          fresh.metadata["language_info"])
    return fresh


def problems(nb) -> list[str]:
    """What would make a stored notebook unfit to commit (errors, stderr, machine paths)."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "error":
                found.append(f"cell {i}: error {out.get('ename')}: {out.get('evalue')}")
            elif kind == "stream" and out.get("name") == "stderr":
                found.append(f"cell {i}: stderr: {''.join(out.get('text', ''))[:200]!r}")
            texts = [out.get("text", "")] if kind == "stream" else [
                v for k, v in out.get("data", {}).items() if k.startswith("text/")]
            texts = [v if isinstance(v, str) else "".join(v) for v in texts]
            for text in texts:
                if MACHINE_PATH.search(text):
                    found.append(f"cell {i}: machine path in output: "
                                 f"{MACHINE_PATH.search(text).group(0)!r}")
    return found


def execute(nb, timeout: int = 600):
    from nbclient import NotebookClient

    env_before = dict(os.environ)
    # The kernel imports ropelab from this checkout, even where another copy is installed.
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    os.environ.update(ROPELAB_QUIET="1", PYTHONPATH=path,
                      MPLBACKEND="module://matplotlib_inline.backend_inline",
                      # No GPU for the kernel: ropelab picks the simulator by itself and the first
                      # cell says why as it does on a learner's machine without one, not that
                      # the build forced it.
                      CUDA_VISIBLE_DEVICES="")
    # NUMBA_ENABLE_CUDASIM is this process's own (its `import ropelab` set it); a forced target
    # would show in the first cell's line.
    for name in ("ROPELAB_TARGET", "NUMBA_ENABLE_CUDASIM"):
        os.environ.pop(name, None)
    # A learner's progress (steps.check records passes) never goes to the real home from a build.
    progress = tempfile.TemporaryDirectory(prefix="ropelab-progress-")
    os.environ["ROPELAB_PROGRESS"] = progress.name
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(NOTEBOOKS)}})
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
        progress.cleanup()
    for cell in nb.cells:  # timing metadata changes on every run; it is not part of the lesson
        cell.get("metadata", {}).pop("execution", None)
    return nb


def main(argv=None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("only", nargs="*", help="notebook name prefixes (default: all)")
    parser.add_argument("--no-execute", action="store_true")
    parser.add_argument("--markdown-only", action="store_true",
                        help="re-render the stored notebooks' Markdown, keep their outputs")
    args = parser.parse_args(argv)
    failed = 0
    for src in sources():
        if args.only and not any(src.stem.startswith(p) for p in args.only):
            continue
        try:
            nb = refresh_markdown(src) if args.markdown_only else make_notebook(src)
        except ValueError as exc:
            print(f"REFUSED {src.stem}: {exc}")
            failed += 1
            continue
        start = time.perf_counter()
        if not (args.no_execute or args.markdown_only):
            try:
                execute(nb)
            except Exception as exc:  # report and go on with the other notebooks
                print(f"FAILED {src.stem}: {type(exc).__name__}: {str(exc)[-2000:]}")
                failed += 1
                continue
            bad = problems(nb)
            if bad:
                print(f"REFUSED {src.stem}:\n  " + "\n  ".join(bad))
                failed += 1
                continue
        nbformat.write(nb, notebook_path(src))
        print(f"wrote {notebook_path(src).name} ({time.perf_counter() - start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
