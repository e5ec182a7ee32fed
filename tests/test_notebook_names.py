"""Every dotted ``ropelab.`` name a lesson mentions in its Markdown or code comments resolves (a
module imported, then attributes), and ``build.py`` refuses a source that names one that does
not.  Imports ropelab's modules; runs no kernel.
"""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("course_build", ROOT / "scripts" / "notebooks" / "build.py")
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)

PLANTED = """# %% [markdown]
# The simulator's shuffles live in `ropelab.warp`.

# %%
x = 1  # graded by ropelab.ropelab_check.check_case
"""


@pytest.mark.parametrize("src", build.sources(), ids=lambda p: p.stem)
def test_every_ropelab_name_in_a_lesson_resolves(src):
    cells = build.parse_source(src.read_text())
    assert not build.unresolved_names(cells)


def test_names_are_found_in_markdown_and_comments_not_in_code():
    assert build.dotted_names("markdown", "see `ropelab.sim.warp`, and ropelab/kernels/flat.py.") == [
        "ropelab.sim.warp"]
    code = 'name = "ropelab.not_checked"  # but ropelab.kernels.flat is\n'
    assert build.dotted_names("code", code) == ["ropelab.kernels.flat"]


def test_a_module_that_is_not_an_attribute_of_its_package_resolves():
    from ropelab import check

    assert build.resolve("ropelab.check.check_case") is check.check_case
    with pytest.raises(LookupError, match="ropelab.check has no 'nothing'"):
        build.resolve("ropelab.check.nothing")


def test_a_planted_bad_name_fails_the_build(tmp_path):
    src = tmp_path / "99_planted.py"
    src.write_text(PLANTED)
    problems = build.unresolved_names(build.parse_source(PLANTED))
    assert [p.split(":")[0] for p in problems] == ["cell 0 (markdown)", "cell 1 (code)"]
    assert "ropelab has no 'warp'" in problems[0] and "ropelab has no 'ropelab_check'" in problems[1]
    with pytest.raises(ValueError, match="names that do not resolve"):
        build.make_notebook(src)


def test_a_module_whose_optional_dependency_is_missing_is_read_from_its_file(monkeypatch):
    """Without torch, ``ropelab.models.training`` cannot be imported; its names are still
    checked, from its source."""
    import importlib

    real = importlib.import_module

    def no_torch(name, *args):
        if name == "ropelab.models.training":
            raise ModuleNotFoundError("No module named 'torch'", name="torch")
        return real(name, *args)

    monkeypatch.setattr(build.importlib, "import_module", no_torch)
    assert build.resolve("ropelab.models.training.loss_curve") == "ropelab.models.training.loss_curve"
    with pytest.raises(LookupError, match="ropelab.models.training has no 'loss_curves'"):
        build.resolve("ropelab.models.training.loss_curves")
