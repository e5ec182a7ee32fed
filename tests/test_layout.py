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
