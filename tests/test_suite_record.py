"""scripts/suite_record.py reads the suite's cost off .ci/run's output, and the README's suite
time is rendered from the record it writes (ropelab.lessons.numbers_suite)."""

import importlib.util
from pathlib import Path

import pytest

from ropelab.lessons import numbers_suite

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("suite_record", ROOT / "scripts" / "suite_record.py")
suite_record = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_record)

LOG = """\
============================= test session starts ==============================
...
========== 2656 passed, 80 skipped, 19 warnings in 217.03s (0:03:37) ===========
ci: install and tests took 280 s on 2 cores
docs: the build (sphinx -W) took 7 s
"""


def test_a_passing_runs_output_gives_its_install_and_test_seconds():
    row = suite_record.parse(LOG)
    assert row == {"installer": "pip", "install_s": 63, "tests_s": 217, "cores": 2,
                   "passed": 2656, "skipped": 80}


def test_the_installer_that_ci_names_is_recorded():
    text = LOG.replace("ci: install and", "ci: install (uv 0.13.9) and")
    row = suite_record.parse(text)
    assert row["installer"] == "uv 0.13.9" and row["install_s"] == 63


@pytest.mark.parametrize("drop", ["ci: install and tests", "passed,"])
def test_output_missing_a_line_is_refused_by_name(drop):
    text = "\n".join(line for line in LOG.splitlines() if drop not in line)
    with pytest.raises(ValueError, match="not the output of a passing .ci/run"):
        suite_record.parse(text)


@pytest.mark.parametrize("install, tests, phrase", [
    (61, 219, "4 min 40 s in all, over the 4 minutes"),
    (61, 170, "3 min 51 s in all, within the 4 minutes"),
])
def test_the_readme_phrase_follows_the_record(monkeypatch, install, tests, phrase):
    record = {"date": "2026-12-03T13:00:00Z", "install_s": install, "tests_s": tests}
    monkeypatch.setattr(numbers_suite, "_newest", lambda: ("data/suite/x.json", record))
    assert numbers_suite.suite_total_against_target().text == phrase
    assert numbers_suite.suite_install().text == "1 min 1 s"


def test_the_committed_record_renders():
    path, record = numbers_suite._newest()
    assert record["cores"] == 2 and record["tests_s"] > 0 and record["install_s"] > 0
    assert numbers_suite.suite_tests().record == path
