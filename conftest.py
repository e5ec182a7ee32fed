"""pytest settings for the notebooks: nbval compares stored outputs after these sanitize rules.

``--nbval`` itself is switched on in pyproject.toml; here the sanitize file is given by its
absolute path, so ``python -m pytest`` works from any directory.  This file sits at the
repository root (not in notebooks/) so that notebooks/ shows the lessons and solutions only;
the notebook machinery is in scripts/notebooks/ (see its README.md).
"""

import os
import tempfile
from pathlib import Path

# The notebooks' kernels inherit this environment: no target line on stderr.
os.environ.setdefault("ROPELAB_QUIET", "1")
# A learner's progress (steps.check records every pass) goes to a folder of this run, never to
# the real home: set here, before any notebook kernel starts, so the kernels inherit it too.
_PROGRESS = tempfile.TemporaryDirectory(prefix="ropelab-progress-")
os.environ["ROPELAB_PROGRESS"] = _PROGRESS.name


def pytest_collection_modifyitems(config, items):
    """Notebook 09 needs the ``models`` extra (transformers): without it, its cells are skipped
    with the reason instead of failing on an ImportError."""
    from ropelab.models import missing

    reason = missing()
    if reason is None:
        return
    import pytest

    for item in items:
        path = Path(str(item.fspath))
        if path.suffix == ".ipynb" and path.name.startswith("09_"):
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_configure(config):
    option = config.option
    if getattr(option, "nbval_sanitize_with", "missing") is None:
        option.nbval_sanitize_with = str(Path(__file__).resolve().parent / "scripts" / "notebooks" / "nbval_sanitize.cfg")
