"""The command line, as a user runs it."""

import os
import subprocess
import sys


def ropelab_cli(*args):
    env = dict(os.environ, ROPELAB_QUIET="1")
    return subprocess.run([sys.executable, "-m", "ropelab", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_info_names_the_target():
    r = ropelab_cli("info")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("target")
    assert "numba-cuda" in r.stdout


def test_check_prints_every_variant_with_pass(capsys):
    from ropelab import kernels
    from ropelab.__main__ import main

    # In process: a subprocess would only add a second interpreter start and numba import.
    assert main(["check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["variant", "target"]
    for name in kernels.VARIANTS:
        rows = [line for line in lines if line.startswith(name + " ")]
        assert rows and all(line.endswith("PASS") for line in rows)
    assert lines[-1].endswith(" 0 failed")


def test_check_fails_loudly_when_a_kernel_is_wrong(monkeypatch):
    from ropelab import check

    real = check.rope
    monkeypatch.setattr(check, "rope", lambda x, **kw: real(x, **kw) * 1.25)
    rows = check.run_checks(variants=["flat"], shapes=[(2, 8)])
    assert rows and not any(r.passed for r in rows)
    assert "FAIL" in check.format_rows(rows)


def test_check_prints_the_header_first_and_each_row_as_it_finishes(capsys, monkeypatch):
    from ropelab import check
    from ropelab.__main__ import main

    printed_before_call = []  # what stdout held when each kernel call started
    real = check.rope

    def watched(x, **kw):
        printed_before_call.append(capsys.readouterr().out)
        return real(x, **kw)

    monkeypatch.setattr(check, "rope", watched)
    monkeypatch.setattr(check, "SIM_SHAPES", [(2, 8), (3, 8)])
    monkeypatch.setattr(check, "GPU_SHAPES", [(2, 8), (3, 8)])
    assert main(["check", "--variant", "flat"]) == 0
    rest = capsys.readouterr().out
    assert len(printed_before_call) >= 2
    assert printed_before_call[0].split()[:2] == ["variant", "target"]  # the header, before any row
    # Before the second call, the first row is already out, alone.
    first_row = printed_before_call[1].splitlines()
    assert len(first_row) == 1 and first_row[0].startswith("flat ") and first_row[0].endswith("PASS")
    assert rest.splitlines()[-1] == f"{len(printed_before_call)} passed, 0 failed"


def test_bad_subcommand_exits_nonzero():
    assert ropelab_cli("frobnicate").returncode != 0


def test_check_with_an_unknown_variant_is_a_one_line_usage_error(capsys):
    from ropelab.__main__ import USAGE_ERROR, main

    assert main(["check", "--variant", "nope"]) == USAGE_ERROR != 1  # 1 means "a check failed"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown variant 'nope'" in err and "flat" in err


def test_exercises_verify_of_one_notebook_checks_only_its_steps(capsys):
    from ropelab.__main__ import USAGE_ERROR, main

    assert main(["exercises", "--verify", "--notebook", "9"]) == USAGE_ERROR
    assert "no notebook '9'" in capsys.readouterr().err
    assert main(["exercises", "--verify", "--notebook", "00", "--save-census"]) == USAGE_ERROR
    capsys.readouterr()
    assert main(["exercises", "--verify", "--notebook", "00"]) == 0
    marks = [line.split()[1] for line in capsys.readouterr().out.splitlines()
             if line.startswith(("ok ", "FAIL"))]
    assert marks and all(step.startswith("00") for step in marks)
