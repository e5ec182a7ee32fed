"""Numbers of the test suite's own cost (``data/suite/``, written by ``scripts/suite_record.py``
from what ``.ci/run`` printed on a fresh clone): what a contributor waits for."""

from __future__ import annotations

import json

from .. import resources
from .numbers_core import ROOT, Rendered, number

TARGET_S = 240  # the suite's aim: 4 minutes from a fresh clone, install included, on 2 cores


def _newest() -> tuple[str, dict]:
    paths = sorted((resources.data_dir() / "suite").glob("suite-*.json"))
    if not paths:
        raise LookupError("no suite record under data/suite/ (scripts/suite_record.py)")
    return str(paths[-1].relative_to(ROOT)), json.loads(paths[-1].read_text())


def _minutes(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


@number("suite.date")
def suite_date():
    path, rec = _newest()
    return Rendered(rec["date"][:10], path)


@number("suite.install")
def suite_install():
    path, rec = _newest()
    return Rendered(_minutes(rec["install_s"]), path)


@number("suite.tests")
def suite_tests():
    path, rec = _newest()
    return Rendered(_minutes(rec["tests_s"]), path)


@number("suite.total_against_target")
def suite_total_against_target():
    """The whole wait and how it stands against the aim, as one phrase."""
    path, rec = _newest()
    total = rec["install_s"] + rec["tests_s"]
    side = "within" if total <= TARGET_S else "over"
    return Rendered(f"{_minutes(total)} in all, {side} the {TARGET_S // 60} minutes", path)
