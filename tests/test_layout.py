"""What a learner sees: JupyterLab opened on notebooks/ shows the lessons and their solutions.

The sources, the build script and nbval's settings live in scripts/notebooks/ (and the root
conftest.py); a percent-format source next to its notebook would open as a second copy of
the lesson.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Made by running or opening things, never committed (see .gitignore).
LOCAL = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}


def _visible(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name not in LOCAL)


def test_notebooks_folder_holds_the_lessons_and_the_solutions_only():
    lessons = ROOT / "notebooks"
    strays = [p.name for p in _visible(lessons)
              if not (p.suffix == ".ipynb" and p.name[:2].isdigit()) and p.name != "solutions"]
    assert strays == []
    solutions = _visible(lessons / "solutions")
    assert solutions and all(p.suffix == ".py" and p.name[:2].isdigit() for p in solutions)


def test_every_lesson_has_its_source_in_scripts_notebooks():
    from ropelab import resources

    sources = {p.stem for p in resources.notebook_sources().glob("[0-9][0-9]_*.py")}
    lessons = {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert sources == lessons and resources.notebook_sources() == ROOT / "scripts" / "notebooks" / "src"


def test_only_resources_knows_where_the_repository_files_are():
    """A module that builds ``something / "data"`` itself breaks in an installed wheel (a
    module that walks up from ``__file__`` finds no checkout there); ropelab.resources decides."""
    import ast

    top_level = {"data", "notebooks", "scripts"}
    offenders = []
    for path in sorted((ROOT / "ropelab").rglob("*.py")):
        if path.name == "resources.py" and path.parent.name == "ropelab":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
                    and isinstance(node.right, ast.Constant) and node.right.value in top_level):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_resources_module_imports_nothing_of_ropelab():
    import ast

    tree = ast.parse((ROOT / "ropelab" / "resources.py").read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert all(m and not m.startswith("ropelab") for m in imported) and not any(
        isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree))
