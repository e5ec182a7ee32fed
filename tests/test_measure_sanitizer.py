"""compute-sanitizer logs read into a record (synthetic logs; the sanitizer itself needs a GPU)."""

import subprocess
import sys
from pathlib import Path

import pytest

from ropelab.measure import sanitizer

CLEAN_MEMCHECK = """\
========= COMPUTE-SANITIZER
variant      target     shape        options            max |err|  tolerance  result
flat         gpu        1x6          -                   1.19e-07   2.00e-06  PASS
61 passed, 0 failed
========= ERROR SUMMARY: 0 errors
"""

DIRTY_MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at rope_flat+0x1b0
=========     by thread (255,0,0) in block (3,0,0)
=========     Address 0x7f0000001000 is out of bounds
========= Invalid __global__ write of size 4 bytes
=========     at rope_flat+0x1d0
========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuPointerGetAttribute.
60 passed, 1 failed
========= ERROR SUMMARY: 3 errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
61 passed, 0 failed
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""


def test_clean_memcheck_log():
    got = sanitizer.parse_log(CLEAN_MEMCHECK)
    assert got["errors_total"] == 0 and got["memory_errors"] == 0 and got["api_errors"] == 0
    assert (got["checks_passed"], got["checks_failed"]) == (61, 0)
    assert got["summary_found"] is True and got["hazards"] is None


def test_errors_are_counted_by_kind():
    got = sanitizer.parse_log(DIRTY_MEMCHECK)
    assert got["errors_total"] == 3
    assert got["memory_errors"] == 2 and got["api_errors"] == 1
    assert got["api_calls"] == "cuPointerGetAttribute CUDA_ERROR_INVALID_VALUE x1"
    assert (got["checks_passed"], got["checks_failed"]) == (60, 1)


def test_api_errors_are_named_by_call():
    # The H200 memcheck of 2026-12-01 11:44: cuda-bindings asking the 580 driver for entry
    # points it does not export, 34 times; no memory error.
    block = ('========= Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" '
             'on CUDA API call to cuGetProcAddress_v2.\n=========     Saved host backtrace\n')
    got = sanitizer.parse_log("========= COMPUTE-SANITIZER\n" + block * 34
                              + "69 passed, 0 failed\n========= ERROR SUMMARY: 34 errors\n")
    assert got["api_errors"] == 34 and got["memory_errors"] == 0
    assert got["api_calls"] == "cuGetProcAddress_v2 CUDA_ERROR_INVALID_VALUE x34"
    assert sanitizer.parse_log(CLEAN_MEMCHECK)["api_calls"] == ""


def test_racecheck_summary_and_a_cut_run():
    got = sanitizer.parse_log(RACECHECK)
    assert (got["hazards"], got["race_errors"], got["race_warnings"]) == (0, 0, 0)
    assert got["errors_total"] == 0 and got["summary_found"] is True
    cut = sanitizer.parse_log("========= COMPUTE-SANITIZER\nflat gpu 1x6\n")
    assert cut["summary_found"] is False and cut["errors_total"] is None


def test_row_has_the_record_columns_and_the_command():
    row = sanitizer.row_for("memcheck", CLEAN_MEMCHECK, 0, 12.34, " --error-exitcode 86")
    assert list(row) == list(sanitizer.COLUMNS)
    assert row["command"] == "compute-sanitizer --tool memcheck --error-exitcode 86 python -m ropelab check"
    assert row["seconds"] == 12.3


@pytest.mark.skipif(not __import__("ropelab").SIMULATED, reason="on a GPU it records")
def test_recording_refuses_on_the_simulator(tmp_path):
    log = tmp_path / "memcheck.log"
    log.write_text(CLEAN_MEMCHECK)
    r = subprocess.run([sys.executable, "-m", "ropelab.measure.sanitizer", "--sanitizer", "/bin/true",
                        "--run", "memcheck", str(log), "0", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1],
                       env={"ROPELAB_QUIET": "1", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "simulator" in r.stderr
    assert not (tmp_path / "sanitizer").exists()
