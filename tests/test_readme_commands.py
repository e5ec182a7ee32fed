"""The README's "Start here" commands are copy-paste-safe, and CI runs exactly the test one."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _start_here_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Start here", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def _venv(command: str) -> str:
    found = re.match(r"python3 -m venv (\S+) && \. (\S+)/bin/activate && ", command)
    assert found and found.group(1) == found.group(2), command  # it activates the venv it made
    return found.group(1)


def test_each_start_here_command_is_one_line_that_makes_and_uses_its_own_venv():
    commands = _start_here_commands()
    course = [c for c in commands if "jupyter lab" in c]
    tests = [c for c in commands if "pytest" in c]
    assert len(course) == 2 and len(tests) == 1, commands
    assert all("\n" not in c for c in commands)
    assert {_venv(c) for c in course} != {_venv(tests[0])}  # the course and the tests never share
    # Running as root, JupyterLab needs --allow-root: one course command has it in the command.
    assert ["--allow-root" in c for c in course].count(True) == 1
    ignored = (REPO / ".gitignore").read_text().split()
    assert all(f"{_venv(c)}/" in ignored for c in commands)


# `set -e` does not stop a script at a failure before the last `&&` of a list (a failed install
# in the README's command), so a command that CI runs before more steps (the docs) is followed
# by this line.
STOP_ON_FAILURE = 'status=$?; [ "$status" -eq 0 ] || exit "$status"'


def _code_after(lines: list[str], line: str) -> list[str]:
    after = lines[lines.index(line) + 1:]
    return [a for a in after if a.strip() and not a.lstrip().startswith("#")]


def test_ci_runs_exactly_the_readme_test_command_and_stops_when_it_fails():
    test_command = next(c for c in _start_here_commands() if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci
    after = _code_after(ci, test_command)
    assert after == [] or after[0] == STOP_ON_FAILURE, after[:1]


def test_the_stop_line_stops_a_script_whose_install_failed(tmp_path):
    import subprocess

    script = tmp_path / "run"
    script.write_text("set -euo pipefail\nfalse && echo tests\n" + STOP_ON_FAILURE + "\necho docs\n")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "docs" not in done.stdout
    script.write_text("set -euo pipefail\ntrue && echo tests\n" + STOP_ON_FAILURE + "\necho docs\n")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stdout.split() == ["tests", "docs"]


# ---- every script and module a document names exists ---------------------------------------------

SCRIPT = re.compile(r"\bscripts/[\w./-]+\.(?:sh|py)\b")
SESSION = re.compile(r"(?<![/\w])gpu_\w+\.sh\b")  # a GPU session named without scripts/
MODULE = re.compile(r"\bpython3? -m (ropelab(?:\.\w+)*)")


def _documents() -> list[Path]:
    """What tells a reader which command to run: the READMEs, the scripts, the notebook sources,
    the package and the tests (not the logs under data/: their names are history)."""
    return ([REPO / "README.md", *sorted((REPO / "data").glob("**/README.md"))]
            + sorted((REPO / "scripts").glob("*.sh")) + sorted((REPO / "scripts").glob("*.py"))
            + sorted((REPO / "scripts" / "notebooks").glob("**/*.py"))
            + sorted((REPO / "ropelab").glob("**/*.py")) + sorted((REPO / "tests").glob("*.py")))


def _module_file(name: str) -> bool:
    base = REPO.joinpath(*name.split("."))
    return (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()
            or (base / "__init__.py").is_file())


def missing_names(texts: dict[str, str]) -> list[str]:
    """``where: name`` for each script path or ``python -m`` module named in ``texts`` that is
    not in the checkout."""
    out = []
    for where, text in texts.items():
        out += [f"{where}: {p}" for p in SCRIPT.findall(text) if not (REPO / p).is_file()]
        out += [f"{where}: {p}" for p in SESSION.findall(text)
                if not (REPO / "scripts" / p).is_file()]
        out += [f"{where}: python -m {m}" for m in MODULE.findall(text) if not _module_file(m)]
    return out


def test_every_script_and_module_a_document_names_exists():
    texts = {str(p.relative_to(REPO)): p.read_text() for p in _documents()
             if p.name != "test_readme_commands.py"}
    assert missing_names(texts) == []


def test_a_renamed_script_or_module_is_caught():
    planted = {"README.md": "run `scripts/gpu_fixup.sh`, then `python -m ropelab.measure.timing`"
                            " and `python -m ropelab.measure.bench.controls`; `gpu_final.sh`"
                            " and `gpu_backward.sh`"}
    assert missing_names(planted) == ["README.md: scripts/gpu_fixup.sh", "README.md: gpu_final.sh",
                                      "README.md: python -m ropelab.measure.timing"]
