"""pytest settings for the notebooks: nbval compares stored outputs after these sanitize rules.

``--nbval`` itself is switched on in pyproject.toml; here the sanitize file is given by its
absolute path, so ``python -m pytest`` works from any directory.  This file sits at the
repository root (not in notebooks/) so that notebooks/ shows the lessons and solutions only;
the notebook machinery is in scripts/notebooks/ (see its README.md).
"""

import os
from pathlib import Path

# The notebooks' kernels inherit this environment: no target line on stderr.
os.environ.setdefault("ROPELAB_QUIET", "1")


def pytest_configure(config):
    option = config.option
    if getattr(option, "nbval_sanitize_with", "missing") is None:
        option.nbval_sanitize_with = str(Path(__file__).resolve().parent / "scripts" / "notebooks" / "nbval_sanitize.cfg")
