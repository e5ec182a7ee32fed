"""Every supported install finds the committed census caches: the course venv, the test venv
and the bare wheel, Python 3.10-3.13 (what each resolves, from ``pip install --dry-run
--report``, is in :data:`INSTALLS`).

The suite runs in one venv (the test extra on CI's Python), so the other installs are made
here by what the key reads: the installed versions of the packages that produce the counted
text (``engine._installed``) and the nvdisasm binary.  A key that read anything else (nvdisasm
in the PTX key, cuda-bindings, which is 13.4.4 on Python 3.10) fails here.  What this does not
cover: an install's own import of ropelab (test_wheel.py runs the wheel) and its compilers'
output (the determinism guard in test_ptx.py compiles a sample).
"""

import pytest

from ropelab.measure import census as ptx
from ropelab.measure import controls
from ropelab.measure import seed_claims as sc
from ropelab.measure.census import engine, registered, sass

# What pip resolves (dry runs of `pip install ".[EXTRA]"` in fresh venvs; the course and test
# rows are the same on each Python but for the two columns noted).
INSTALLS = {
    "course venv / bare wheel": {"nvidia-cuda-nvdisasm": None, "cuda-bindings": "13.5.0"},
    "course venv, Python 3.10": {"nvidia-cuda-nvdisasm": None, "cuda-bindings": "13.4.4"},
    # torch 2.13.0 from PyPI pins cuda-toolkit 13.0.3: NVRTC follows it, NVVM is pinned.
    "test venv, Python 3.10/3.12/3.13": {"nvidia-cuda-nvrtc": "13.0.88",
                                         "cuda-toolkit": "13.0.3.0"},
}
RECORDED = {"numba": "0.68.1", "numba-cuda": "0.30.4", "llvmlite": "0.50.0",
            "nvidia-nvvm": "13.5.37", "nvidia-nvjitlink": "13.5.37",
            "nvidia-cuda-nvdisasm": "13.5.37", "nvidia-cuda-nvrtc": "13.5.37"}


def _as_installed(monkeypatch, versions: dict):
    """Make this venv look like another install to everything the census keys read."""
    here = {**RECORDED, **versions}
    monkeypatch.setattr(engine, "_installed", lambda dist: here.get(dist, "0"))
    if here.get("nvidia-cuda-nvdisasm") is None:
        monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)


def _committed_key(path):
    return engine.read_json(path)["key"]


@pytest.mark.parametrize("install", INSTALLS)
def test_each_install_computes_the_committed_keys(monkeypatch, install):
    _as_installed(monkeypatch, INSTALLS[install])
    assert ptx.cache_key() == _committed_key(ptx.DATA_FILE)
    assert ptx.cache_key(sass=True) == _committed_key(ptx.SASS_FILE)
    assert controls.cache_key() == _committed_key(controls.CENSUS_FILE)
    keys = sc.census_keys()
    committed = engine.committed_entries(sc.CENSUS_FILE)
    assert keys["numba"] in committed
    # NVRTC 13.0.88 makes the CUDA C++ rows: only that part is built again (in-process, no child).
    assert (keys["nvrtc"] in committed) == (INSTALLS[install].get("nvidia-cuda-nvrtc") is None)


def test_a_producer_of_the_text_changes_the_key(monkeypatch):
    _as_installed(monkeypatch, {"nvidia-nvvm": "13.0.88"})
    assert ptx.cache_key() != _committed_key(ptx.DATA_FILE)
    monkeypatch.undo()
    _as_installed(monkeypatch, {"nvidia-nvjitlink": "13.4.92"})
    assert ptx.cache_key() == _committed_key(ptx.DATA_FILE)  # ptxas is not in the PTX
    assert ptx.cache_key(sass=True) != _committed_key(ptx.SASS_FILE)


def test_without_nvdisasm_the_committed_sass_census_is_served_not_compiled(monkeypatch, tmp_path):
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path))  # an empty user cache
    _as_installed(monkeypatch, {"nvidia-cuda-nvdisasm": None})
    monkeypatch.setattr(engine, "run_child", lambda *a, **k: pytest.fail("compiled"))
    doc = ptx.census(sass=True)
    assert doc["key"] == _committed_key(ptx.SASS_FILE)
    assert all("sass_instructions" in r for r in doc["rows"] if not r.get("error"))
    assert controls.census()["key"] == _committed_key(controls.CENSUS_FILE)


def test_without_nvdisasm_a_sass_rebuild_is_refused_before_compiling(monkeypatch, tmp_path):
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path))
    _as_installed(monkeypatch, {"nvidia-cuda-nvdisasm": None})
    monkeypatch.setattr(engine, "run_child", lambda *a, **k: pytest.fail("compiled"))
    monkeypatch.setattr(registered, "SASS_FILE", tmp_path / "none.json")  # no record to serve
    monkeypatch.setattr(controls, "CENSUS_FILE", tmp_path / "none.json")
    for build in (lambda: ptx.census(sass=True), controls.census):
        with pytest.raises(engine.CensusError, match="nvidia-cuda-nvdisasm.*ropelab\\[sass\\]"):
            build()
    assert ptx.sass_tools_missing().startswith("nvdisasm: pip install 'ropelab[sass]'")
