"""environment.yml and pyproject.toml describe one environment: check they agree."""

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")
yaml = pytest.importorskip("yaml")


def _name(req: str) -> str:
    # packaging (a dependency of pytest) parses PEP 508 the way pip does.
    return canonicalize_name(Requirement(req).name)


@pytest.fixture(scope="module")
def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(scope="module")
def env():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def _pip_section(env):
    for dep in env["dependencies"]:
        if isinstance(dep, dict) and "pip" in dep:
            return dep["pip"]
    raise AssertionError("environment.yml has no pip section")


def test_core_pins(project):
    deps = {_name(d): d for d in project["dependencies"]}
    assert deps["numba"].endswith("==0.68.*")
    assert deps["numba-cuda"] == "numba-cuda==0.30.*"
    assert "<2.5" in deps["numpy"], "numba-cuda 0.30.4 breaks on numpy 2.5"


def _pins(deps) -> dict:
    out = {}
    for dep in deps:
        req = Requirement(dep)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        out[canonicalize_name(req.name)] = (req, exact[0] if exact else None)
    return out


def test_the_cu13_extra_is_spelled_out_without_cuda_toolkits_nvvm(project):
    # numba-cuda[cu13] asks cuda-toolkit for NVVM, and torch pins cuda-toolkit (2.13.0 from
    # PyPI: 13.0.3, so NVVM 13.0.88): spelled out, every wheel of the extra is here, NVVM
    # pinned on its own.
    deps = _pins(project["dependencies"])
    for dist in ("cuda-bindings", "nvidia-cuda-cccl", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc"):
        assert str(deps[dist][0].specifier) == "==13.*", dist
    assert "cuda-toolkit" not in deps  # asked for by torch too, with other extras: see pyproject
    assert str(deps["nvidia-nvjitlink"][0].specifier) == "<14,>=13"
    assert deps["nvidia-nvvm"][1] is not None


def test_the_census_producers_are_pinned_at_the_versions_data_census_records(project):
    """An install whose compilers differ from the record compiles the census again (minutes): the
    pins and data/census/ must move together (python -m ropelab census --save, and the rest)."""
    import json

    census = ROOT / "data" / "census"
    ptx = json.loads((census / "census.json").read_text())["versions"]
    sass = json.loads((census / "census-sass.json").read_text())["versions"]
    assert _pins(project["dependencies"])["nvidia-nvvm"][1] == ptx["nvidia-nvvm"]
    for extra in ("sass", "test"):
        pins = _pins(project["optional-dependencies"][extra])
        for dist in ("nvidia-cuda-nvdisasm", "nvidia-nvjitlink"):
            assert pins[dist][1] == sass[dist], (extra, dist)


def test_environment_installs_this_project_with_test_and_course_extras(env, project):
    pip = _pip_section(env)
    editable = [p for p in pip if p.startswith("-e")]
    assert len(editable) == 1
    extras = set(re.search(r"\[(.*)\]", editable[0]).group(1).split(","))
    assert {"test", "course"} <= extras <= set(project["optional-dependencies"])


def test_environment_pins_nothing_that_pyproject_pins_differently(env, project):
    pinned = {_name(d): d for d in project["dependencies"]}
    for group in project["optional-dependencies"].values():
        pinned.update({_name(d): d for d in group})
    listed = [d for d in env["dependencies"] if isinstance(d, str)]
    listed += [p for p in _pip_section(env) if not p.startswith("-e")]
    for dep in listed:
        name = _name(dep.replace("=", "==", 1) if "==" not in dep else dep)
        if name in pinned:
            assert dep.replace(" ", "") == pinned[name].replace(" ", ""), (dep, pinned[name])


def test_environment_python_is_allowed_by_requires_python(env, project):
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    version = py.split("=", 1)[1]
    assert SpecifierSet(project["requires-python"]).contains(version), (version, project["requires-python"])


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_cmd = next(b for b in blocks if "pytest" in b)
    assert test_cmd.strip() in ci


def test_test_extra_pins_the_cpu_torch_that_ci_installs_and_every_torch_spec_allows_it(project):
    # CI installs ".[test]": torch==2.13.0 comes from local disk there, a looser spec would
    # download several GB.  The other extras that name torch must accept that version.
    extras = project["optional-dependencies"]
    test_torch = [Requirement(d) for d in extras["test"] if _name(d) == "torch"]
    assert [str(r.specifier) for r in test_torch] == ["==2.13.0"]
    for group, deps in extras.items():
        for dep in deps:
            req = Requirement(dep)
            if _name(dep) == "torch":
                assert req.specifier.contains("2.13.0"), (group, dep)
    assert "torch" in extras and "torch" in {_name(d) for d in extras["baselines"]}
