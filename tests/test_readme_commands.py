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


def test_ci_runs_exactly_the_readme_test_command():
    test_command = next(c for c in _start_here_commands() if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == test_command
