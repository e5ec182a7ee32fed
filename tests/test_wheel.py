"""The installed wheel works on its own, as a user installs it ("first contact").

The wheel is built from a copy of what the build reads (so a stale ``build/`` of the checkout
cannot leak into it), installed without its dependencies into a fresh venv that borrows this
interpreter's site-packages (numba, numpy: nothing is downloaded), and the commands a user runs
first are run from an empty directory, with no ``PYTHONPATH``: ``check``, ``bench --recorded``,
``exercises --verify``; and the census finds its committed cache under the checkout's key.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from ropelab import resources

REPO = Path(__file__).resolve().parents[1]
# What the build reads besides resources.SHIPPED (setup.py copies those into the wheel).
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "ropelab")


def _run(cmd, *, cwd, env=None, timeout=120):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return done


def _user_env(tmp: Path) -> dict:
    """The environment of a user who has never seen the checkout: no PYTHONPATH, a fresh cache."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ROPELAB_TARGET", "NUMBA_ENABLE_CUDASIM")}
    env.update(ROPELAB_QUIET="1", ROPELAB_CACHE=str(tmp / "user-cache"), PYTHONNOUSERSITE="1")
    return env


def _borrow_site_packages(venv_python: Path) -> None:
    """Let the fresh venv import this interpreter's packages, but not an editable ropelab.

    A ``.pth`` line adds a folder to ``sys.path`` without running that folder's own ``.pth``
    files, so the ones the dependencies need (numba-cuda's ``numba.cuda`` redirector) are copied
    too; setuptools' editable-install hooks are not (one would import the checkout's ropelab).
    """
    target = Path(_run([str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                       cwd=venv_python.parent).stdout.strip())
    parents = []
    for key in ("purelib", "platlib"):
        path = sysconfig.get_paths()[key]
        if path not in parents:
            parents.append(path)
    # "00_" sorts first: the copied hooks below import from these folders.
    (target / "00_parent_site_packages.pth").write_text("\n".join(parents) + "\n")
    for parent in parents:
        for pth in Path(parent).glob("*.pth"):
            if pth.name.startswith("__editable__") or "ropelab" in pth.read_text():
                continue
            shutil.copy(pth, target / pth.name)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    pytest.importorskip("setuptools", minversion="77")  # the test extra installs it
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "_bundle", "reports")
    for name in BUILD_INPUTS + resources.SHIPPED:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=skip)
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, source / name)
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  "--no-index", "-v", "-w", str(tmp / "dist"), str(source)], cwd=tmp, timeout=180)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # -v shows the backend's output: no setuptools deprecation (e.g. the old license table).
    assert "SetuptoolsDeprecationWarning" not in built.stdout + built.stderr
    wheel, = (tmp / "dist").glob("ropelab-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    assert made.returncode == 0, made.stderr
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    _borrow_site_packages(python)
    # --ignore-installed: the borrowed site-packages may hold an editable ropelab (CI's), which
    # must neither count as installed nor be touched.
    put = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                "--no-deps", "--no-index", "--ignore-installed", str(wheel)], cwd=tmp,
               env=_user_env(tmp))
    assert put.returncode == 0, put.stdout + put.stderr
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return python, elsewhere, _user_env(tmp), tmp


def test_the_installed_package_is_the_wheel_and_reads_its_own_copy(installed):
    python, cwd, env, tmp = installed
    r = _run([str(python), "-c", "import ropelab, ropelab.resources as r; "
              "print(ropelab.__file__); print(r.data_dir()); print(r.in_checkout()); "
              "print(ropelab.__version__); from importlib import metadata as m; "
              "print(m.version('ropelab')); print(m.metadata('ropelab')['License-Expression'])"],
             cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    module, data, in_checkout, version, dist_version, license_ = r.stdout.split("\n")[:6]
    # One version: the distribution's is read from ropelab.__version__; SPDX license metadata.
    assert dist_version == version and license_ == "MIT"
    venv = str(python.parent.parent)
    assert module.startswith(venv) and data.startswith(venv) and in_checkout == "False"
    import ropelab

    assert version == ropelab.__version__


def test_check_runs_from_the_wheel(installed):
    python, cwd, env, _ = installed
    r = _run([str(python), "-m", "ropelab", "check", "--variant", "flat"], cwd=cwd, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [line for line in r.stdout.splitlines() if line.startswith("flat ")]
    assert rows and all(line.endswith("PASS") for line in rows)


def test_bench_recorded_prints_the_shipped_record(installed):
    python, cwd, env, _ = installed
    r = _run([str(python), "-m", "ropelab", "bench", "--recorded"], cwd=cwd, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "recorded" in r.stdout and "TODO(GPU data)" not in r.stdout


def test_exercises_verify_finds_every_solution_and_starter(installed):
    python, cwd, env, _ = installed
    # One notebook (its starters and solutions are read from the package): the whole course
    # takes minutes on the simulator, and every notebook is found the same way.
    r = _run([str(python), "-m", "ropelab", "exercises", "--verify", "--notebook", "01"],
             cwd=cwd, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "no file" not in r.stdout and " 0 failed" in r.stdout


def test_census_reads_the_shipped_cache_under_the_checkouts_key(installed):
    python, cwd, env, _ = installed
    # The census is cached under a hash of the kernel sources and compiler versions: the wheel
    # must compute the checkout's key and find the same committed file, or it recompiles every
    # kernel (whether that key matches this machine's compiler versions is another matter).
    code = ("from ropelab.measure import census; print(census.cache_key()); "
            "print(census.DATA_FILE)")
    r = _run([str(python), "-c", code], cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    key, shipped = r.stdout.split("\n")[:2]
    from ropelab.measure import census

    assert key == census.cache_key()
    assert Path(shipped).read_bytes() == census.DATA_FILE.read_bytes()
    assert Path(shipped) != census.DATA_FILE


# The course venv and the bare wheel do not install nvdisasm (the sass extra): hidden here, every
# census must still come from the shipped files, nothing compiled, from an empty user cache.
_WITHOUT_NVDISASM = """
import sys
from ropelab.measure.census import engine, sass
installed = engine._installed
engine._installed = lambda dist: None if dist == "nvidia-cuda-nvdisasm" else installed(dist)
sass.find_nvdisasm = lambda: None
def compiled(*args, **kwargs):
    sys.exit("a census compiled")
engine.run_child = compiled
from ropelab.measure import census, controls, seed_claims
for doc in (census.census(), census.census(sass=True), controls.census(), seed_claims.census()):
    print(doc["key"])
from ropelab.__main__ import main
sys.exit(main(["census"]))
"""


def test_the_wheel_without_nvdisasm_serves_every_census_from_its_shipped_files(installed):
    python, cwd, env, tmp = installed
    env = dict(env, ROPELAB_CACHE=str(tmp / "empty-cache"))
    r = _run([str(python), "-c", _WITHOUT_NVDISASM], cwd=cwd, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    from ropelab.measure import census, controls, seed_claims

    keys = r.stdout.splitlines()[:4]
    assert keys == [census.cache_key(), census.cache_key(sass=True), controls.cache_key(),
                    seed_claims.census()["key"]]
    assert "PTX census, cc 9.0" in r.stdout and "compiling" not in r.stderr


def test_recording_from_the_wheel_says_it_needs_a_checkout(installed):
    python, cwd, env, _ = installed
    r = _run([str(python), "-c", "from ropelab.measure import records\n"
              "meta = dict(dict.fromkeys(records.REQUIRED_META, 'x'), target='gpu')\n"
              "records.save('bench', [{'a': 1}], method='m', meta=meta)"], cwd=cwd, env=env)
    assert r.returncode != 0 and "source checkout" in r.stderr, r.stderr
    assert not list(Path(cwd).iterdir())


@pytest.mark.parametrize("command", [["bench"], ["precision"], ["census", "--save"],
                                     ["exercises", "--verify", "--save-census"]])
def test_commands_that_record_refuse_up_front_without_a_checkout(installed, command):
    python, cwd, env, _ = installed
    r = _run([str(python), "-m", "ropelab", *command], cwd=cwd, env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "source checkout" in r.stderr and "--out" in r.stderr
    assert r.stdout == ""  # refused before measuring or compiling anything
