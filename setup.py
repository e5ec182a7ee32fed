"""setuptools hook: the wheel carries the repository files ropelab reads at run time.

Everything else about the package is in pyproject.toml.  The files (``data/``, the notebook
sources and the exercise solutions; the list is ``ropelab.resources.SHIPPED``) stay where the
course layout puts them, at the top of the repository, and ``build_py`` copies them into
``ropelab/_bundle/`` of the build tree, keeping their relative paths, so the wheel (and an sdist,
through MANIFEST.in) has them and :mod:`ropelab.resources` finds them in an installed package.
An editable install (``pip install -e``) runs from the checkout itself, which has the originals:
nothing is copied for it.
"""

import ast
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# Generated or machine-local files that must not travel (ncu reports are large and re-creatable).
SKIP = shutil.ignore_patterns("__pycache__", "*.py[cod]", ".ipynb_checkpoints", "reports",
                              "*.ncu-rep")


def _resources_constant(name: str):
    """A literal constant of ropelab/resources.py, read without importing ropelab (numba)."""
    tree = ast.parse((ROOT / "ropelab" / "resources.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Tuple):  # SHIPPED = (DATA, NOTEBOOK_SOURCES, SOLUTIONS)
                return tuple(_resources_constant(e.id) if isinstance(e, ast.Name) else e.value
                             for e in value.elts)
            return ast.literal_eval(value)
    raise RuntimeError(f"ropelab/resources.py defines no {name}")


class build_py_with_course_files(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        bundle = Path(self.build_lib) / "ropelab" / _resources_constant("BUNDLE")
        for relative in _resources_constant("SHIPPED"):
            source = ROOT / relative
            if not source.is_dir():  # an incomplete sdist would give a wheel that fails later
                raise RuntimeError(f"{relative}/ is missing: ropelab's wheel must carry it "
                                   f"(build from a checkout or a complete sdist)")
            target = bundle / relative
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(source, target, ignore=SKIP)


setup(cmdclass={"build_py": build_py_with_course_files})
