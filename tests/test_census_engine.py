"""The census engine's one cache sequence (:func:`engine.cached`), its progress and its lock,
with builds that only pretend to compile; and the child's refusal of clients outside measure."""

import io
import json
import sys
import threading
import time

import pytest

from ropelab.measure.census import engine


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPELAB_CACHE", str(tmp_path / "user"))
    stream = io.StringIO()
    monkeypatch.setattr(engine, "PROGRESS_STREAM", stream)
    return tmp_path, stream


def _builder(log, delay=0.0):
    def build(todo):
        log.append(sorted(todo))
        time.sleep(delay)
        return {k: {"key": k, "rows": [task]} for k, task in todo.items()}
    return build


def test_committed_then_user_cache_then_one_build(cache):
    tmp, stream = cache
    committed = engine.write_json(tmp / "committed.json", {"key": "a", "rows": ["committed"]})
    log = []
    got = engine.cached("t", {"a": 1, "b": 2}, _builder(log), committed=committed, label="t census")
    assert got == {"a": {"key": "a", "rows": ["committed"]}, "b": {"key": "b", "rows": [2]}}
    assert log == [["b"]]  # only the key the committed file lacks
    assert stream.getvalue().startswith("t census: compiling")
    assert "the code changed since committed.json" in stream.getvalue()  # no versions in it
    again = engine.cached("t", {"b": 2}, _builder(log), committed=committed)
    assert again["b"]["rows"] == [2] and log == [["b"]]  # served from the user cache
    engine.cached("t", {"b": 2}, _builder(log), committed=committed, use_cache=False)
    assert log == [["b"], ["b"]]


def test_many_entries_in_one_file_and_what_is_not_kept(cache):
    tmp, _ = cache
    committed = engine.write_json(tmp / "entries.json", {"entries": {"x": {"n": 1}}})
    log = []

    def build(todo):
        log.append(sorted(todo))
        return {k: {"error": "no"} if k == "bad" else {"n": 2} for k in todo}

    keep = lambda row: not row.get("error")  # noqa: E731
    got = engine.cached("t", {"x": 0, "y": 0, "bad": 0}, build, committed=committed, keep=keep)
    assert got == {"x": {"n": 1}, "y": {"n": 2}, "bad": {"error": "no"}}
    engine.cached("t", {"x": 0, "y": 0, "bad": 0}, build, committed=committed, keep=keep)
    assert log == [["bad", "y"], ["bad"]]  # an error is built again, a good row is not


def test_a_missing_producer_is_refused_before_the_build(cache, monkeypatch):
    _, stream = cache
    monkeypatch.setattr(engine, "_installed", lambda dist: None if dist == "nvidia-cuda-nvdisasm" else "1")
    log = []
    with pytest.raises(engine.CensusError, match="t census needs nvidia-cuda-nvdisasm"):
        engine.cached("t", {"a": 1}, _builder(log), needs=("ptx", "sass"), label="t census")
    assert log == [] and stream.getvalue() == ""


def test_a_toolkit_libnvvm_stands_in_for_the_wheel_and_never_hits_the_committed_keys(monkeypatch):
    """Without the nvidia-nvvm wheel (a CUDA toolkit's libNVVM: conda, the H200 image) the PTX
    stage is not missing: it is named by the library's path, so its census is built, not
    refused and not served from files made with the wheel.  No library at all: missing."""
    import types

    real_version = engine.metadata.version

    def version(dist):
        if dist == "nvidia-nvvm":
            raise engine.metadata.PackageNotFoundError(dist)
        return real_version(dist)

    monkeypatch.setattr(engine.metadata, "version", version)
    found = types.SimpleNamespace(abs_path="/opt/cuda/nvvm/lib64/libnvvm.so.4")
    pathfinder = types.SimpleNamespace(load_nvidia_dynamic_lib=lambda name: found)
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", pathfinder)
    engine._installed.cache_clear()
    try:
        assert engine.versions("ptx")["nvidia-nvvm"] == "toolkit:/opt/cuda/nvvm/lib64/libnvvm.so.4"
        assert engine.missing_producers("ptx") == []

        def no_library(name):
            raise OSError("libnvvm.so: cannot open shared object file")

        monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", no_library)
        engine._installed.cache_clear()
        assert engine.missing_producers("ptx") == ["nvidia-nvvm"]
    finally:
        engine._installed.cache_clear()


def test_a_second_process_waits_for_the_first_build_instead_of_its_own(cache):
    _, stream = cache
    log, results = [], []

    def caller():
        results.append(engine.cached("t", {"k": 1}, _builder(log, delay=1.0)))

    first = threading.Thread(target=caller)
    first.start()
    time.sleep(0.3)  # the first holds the lock (a separate open file: flock excludes it)
    caller()
    first.join()
    assert log == [["k"]] and results[0] == results[1]
    assert "another process is compiling" in stream.getvalue()


def test_progress_draws_a_bar_per_row(cache):
    _, stream = cache
    with engine.progress(3, "census") as tick:
        for _ in range(3):
            tick()
    text = stream.getvalue()
    assert "census" in text and "3/3" in text
    with engine.progress(3, "quiet", show=False) as tick:
        tick()
    assert "quiet" not in stream.getvalue()


def test_the_child_compiles_for_measure_modules_only(capsys):
    from ropelab.measure.census import child

    assert child.main(["child", "ropelab.grader.kernel_census"]) == 2  # before reading stdin
    assert "modules of ropelab.measure only" in json.loads(capsys.readouterr().out)["fatal"]
