"""The one census engine: keys, caches, progress, and the child process that compiles.

Every census (registered kernels, controls, seed claims, a learner's kernel) works the same way:

1. **Key.**  :func:`cache_key` hashes what the counts depend on and nothing else: the versions
   of the packages that *produce* the counted text (:data:`PRODUCERS`, by stage: the PTX,
   NVRTC's PTX, the SASS), the compute capability, the counting rules (the code of
   :mod:`.counting`), the client's own parameters, and the compiled code
   (:func:`~.digest.code_digest`).  A package that only binds or finds a compiler
   (``cuda-bindings``, ``cuda-pathfinder``), or a tool of a stage the census does not read, is
   not in the key: the course venv, the test venv and the bare wheel share one PTX key.
2. **Cache.**  :func:`cached` serves each key from the committed file under ``data/census/``
   (so CI, a fresh clone and a wheel compile nothing), then from the user cache
   (``$ROPELAB_CACHE``, else ``$XDG_CACHE_HOME/ropelab`` or ``~/.cache/ropelab``), and builds the
   rest once: under a lock, so that parallel processes (test workers) wait for one build
   instead of each making their own, and with a line that says why.
3. **Child.**  Under the simulator ``cuda.compile_ptx`` is None, and numba-cuda picks simulator
   or real compiler once per process.  :func:`run_child` therefore runs
   ``python -m ropelab.measure.census.child CLIENT`` with the simulator off; with an explicit
   ``cc`` the real compiler needs no driver.  The child prints one JSON line per row, and the
   parent shows a progress bar (:func:`progress`) as they come.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from ... import resources
from .digest import code_digest, names_in, normalized_source, python_function

__all__ = ["CC", "DATA_DIR", "EXTRAS", "PACKAGE_DIR", "PRODUCERS", "CensusError", "attempt",
           "cache_key", "cached", "code_digest", "committed_entries", "document",
           "missing_producers", "names_in", "normalized_source", "progress", "python_function",
           "read_json", "require", "run_child", "say", "user_cache_dir", "versions",
           "why_missed", "write_json"]

CC = (9, 0)  # the H200
PACKAGE_DIR = Path(__file__).resolve().parents[2]  # ropelab/
DATA_DIR = resources.data_dir() / "census"  # a checkout's data/census, else the package's copy

# The packages whose code makes each stage's text, by stage.  Python to LLVM IR (numba,
# numba-cuda, llvmlite), IR to PTX (libNVVM and libdevice, both in nvidia-nvvm); CUDA C++ to
# PTX (NVRTC); PTX to a cubin (ptxas inside nvJitLink) and the cubin to text (nvdisasm).
PRODUCERS = {
    "ptx": ("numba", "numba-cuda", "llvmlite", "nvidia-nvvm"),
    "nvrtc": ("nvidia-cuda-nvrtc",),
    "sass": ("nvidia-nvjitlink", "nvidia-cuda-nvdisasm"),
}
# What to install for a stage whose producers are missing.
EXTRAS = {"sass": "pip install 'ropelab[sass]' (nvidia-cuda-nvdisasm)"}


class CensusError(RuntimeError):
    """A census could not be computed: the child failed, a tool is missing, or a kernel cannot
    be shipped to the child."""


@lru_cache(maxsize=None)  # a scan of sys.path per call; the census asks for each row
def _installed(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return _toolkit_libnvvm() if dist == "nvidia-nvvm" else None


def _toolkit_libnvvm() -> str | None:
    """The libNVVM numba-cuda compiles with where no ``nvidia-nvvm`` wheel is installed (a CUDA
    toolkit's: a conda environment, a GPU image such as the H200's), named by its path; None
    where there is none.  Such a name never equals a wheel's version, so a census made with it
    is built here, never served from the committed files (made with the pinned wheel)."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return "toolkit:" + str(load_nvidia_dynamic_lib("nvvm").abs_path)
    except Exception:  # noqa: BLE001  (no pathfinder, no library, a library that will not load)
        return None


def versions(*stages: str, recorded: dict | None = None) -> dict:
    """``{package: version}`` of the producers of ``stages`` (all stages by default), None for
    one that is not installed.

    With ``recorded`` (the versions a committed document was made with), a producer that is not
    installed here takes its recorded version: this install cannot make that stage's text at
    all, so the record made from the same input by those tools is the one to serve (the course
    venv has no nvdisasm, and reads the committed SASS counts).  A build never uses
    ``recorded``: it refuses first (:func:`missing_producers`).
    """
    out = {}
    for stage in stages or tuple(PRODUCERS):
        for dist in PRODUCERS[stage]:
            out[dist] = _installed(dist)
            if out[dist] is None and recorded:
                out[dist] = recorded.get(dist)
    return out


def missing_producers(*stages: str) -> list[str]:
    """The producers of ``stages`` that are not installed here."""
    return [dist for dist, v in versions(*stages).items() if v is None]


def require(*stages: str, what: str) -> None:
    """Raise :class:`CensusError`, before anything is compiled, when ``what`` needs a tool
    that is not installed."""
    missing = missing_producers(*stages)
    if missing:
        hints = sorted({EXTRAS[s] for s in stages if s in EXTRAS})
        raise CensusError(f"{what} needs {', '.join(missing)}, which is not installed"
                          + (f": {'; '.join(hints)}" if hints else ""))


def cache_key(client: str, objects=(), *, stages=("ptx",), recorded: dict | None = None,
              length: int = 16, **parts) -> str:
    """The key of one census: ``client`` (which census), the producers of ``stages``
    (:func:`versions`), cc, the counting rules, ``parts`` (any JSON-able parameters:
    signatures, options) and the code of ``objects``."""
    from . import counting

    head = {"client": client, "cc": list(CC), "versions": versions(*stages, recorded=recorded),
            "rules": code_digest(counting), **parts}
    h = hashlib.sha256(json.dumps(head, sort_keys=True, default=str).encode())
    h.update(code_digest(*objects).encode())
    return h.hexdigest()[:length]


def document(key: str, rows: list, *, stages=("ptx",), recorded: dict | None = None,
             **extra) -> dict:
    """A census document: ``{"key", "cc", "versions", **extra, "rows"}``."""
    return {"key": key, "cc": ".".join(map(str, CC)),
            "versions": versions(*stages, recorded=recorded), **extra, "rows": rows}


# --------------------------------------------------------------------------------------------
# Cache files
# --------------------------------------------------------------------------------------------

def user_cache_dir() -> Path:
    root = os.environ.get("ROPELAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ropelab")
    return Path(root)


def read_json(path: Path):
    """The JSON document at ``path``, or None when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, doc) -> Path:
    """Write ``doc`` then rename: a reader in another process sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)
    return path


def committed_entries(path) -> dict:
    """``{key: document}`` of a committed file: one document (with its ``key``), or many
    (``{"entries": {key: document}}``, the learner census); of several files (a tuple of
    paths), their entries together."""
    if isinstance(path, tuple):
        return {k: v for p in path for k, v in committed_entries(p).items()}
    doc = read_json(path) if path is not None else None
    if not isinstance(doc, dict):
        return {}
    if isinstance(doc.get("entries"), dict):
        return doc["entries"]
    return {doc["key"]: doc} if isinstance(doc.get("key"), str) else {}


def _user_file(name: str, key: str) -> Path:
    return user_cache_dir() / f"{name}-{key}.json"


def _served(name: str, keys, committed) -> dict:
    found = {}
    entries = committed_entries(committed)
    for key in keys:
        doc = entries.get(key)
        if doc is None:
            doc = read_json(_user_file(name, key))
            doc = doc if isinstance(doc, dict) and doc.get("key", key) == key else None
        if doc is not None:
            found[key] = doc
    return found


@contextlib.contextmanager
def _building(name: str, keys):
    """Hold the user cache's lock for these keys: a second process that needs the same build
    waits for the first (and then reads its result) instead of compiling it again."""
    try:
        import fcntl
    except ImportError:  # Windows: each process builds its own
        yield
        return
    tag = hashlib.sha256("\0".join(sorted(keys)).encode()).hexdigest()[:16]
    path = user_cache_dir() / "locks" / f"{name}-{tag}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")  # noqa: SIM115  (closed below, after the lock is released)
    except OSError:  # a read-only cache: nothing to share
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            say(f"{name}: another process is compiling this census; waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def why_missed(committed) -> str:
    """Why the committed file does not serve this install: the producers that differ, or the
    code (of several files, the first's)."""
    if isinstance(committed, tuple):
        committed = committed[0] if committed else None
    doc = read_json(committed) if committed is not None else None
    if not isinstance(doc, dict):
        return "no committed census"
    recorded = doc.get("versions") if isinstance(doc.get("versions"), dict) else {}
    differ = [f"{dist} {_installed(dist) or 'not installed'} here, {v} recorded"
              for dist, v in sorted(recorded.items()) if _installed(dist) != v]
    return "; ".join(differ) or f"the code changed since {Path(committed).name} was saved"


def cached(name: str, tasks: dict, build, *, committed=None,
           use_cache: bool = True, keep=None, label: str | None = None,
           needs: tuple = ("ptx",)) -> dict:
    """``{key: document}`` for every key of ``tasks`` (``{key: what to build}``).

    Each key is served from ``committed`` (one document, or ``{"entries": ...}``), then from the
    user cache file ``NAME-KEY.json``; ``build({key: task} of the rest)`` returns the missing
    documents, which go to the user cache when ``keep(document)`` (default: always).  Before a
    build, the producers of the stages it ``needs`` must be installed (:func:`require`: a clear
    error, nothing compiled); with ``label`` it then says on the progress stream what it
    compiles and why the committed file did not serve it.  ``use_cache=False`` builds
    everything (and still writes the user cache).
    """
    found = _served(name, tasks, committed) if use_cache else {}
    todo = {k: t for k, t in tasks.items() if k not in found}
    if todo:
        with _building(name, todo):
            if use_cache:  # another process may have built them while we waited
                found.update(_served(name, todo, None))
                todo = {k: t for k, t in todo.items() if k not in found}
            if todo:
                require(*needs, what=label or f"the {name} census")
                if label is not None:
                    reason = why_missed(committed) if use_cache else "--no-cache"
                    say(f"{label}: compiling, no GPU needed ({reason})")
                fresh = build(todo)
                lost = set(todo) - set(fresh)
                if lost:
                    raise CensusError(f"the {name} build answered {len(fresh)} of {len(todo)}")
                for key in todo:
                    found[key] = fresh[key]
                    if keep is None or keep(fresh[key]):
                        try:
                            write_json(_user_file(name, key), fresh[key])
                        except OSError:  # a read-only home only costs the next caller a build
                            pass
    return {k: found[k] for k in tasks}


# --------------------------------------------------------------------------------------------
# Progress: a line and a bar on stderr, only when something is compiled
# --------------------------------------------------------------------------------------------

# Where progress goes: None is sys.stderr at the time of writing (a notebook's cell output, a
# terminal).  The test suite's conftest.py points it past pytest's output capture.
PROGRESS_STREAM = None


def _stream():
    return PROGRESS_STREAM if PROGRESS_STREAM is not None else sys.stderr


def say(line: str) -> None:
    stream = _stream()
    stream.write(line + "\n")
    stream.flush()


@contextlib.contextmanager
def progress(total: int, label: str, *, show: bool = True):
    """A ``tick()`` to call once per row; a tqdm bar of ``total`` rows on the progress stream."""
    if not show or total <= 0:
        yield lambda: None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc=label, unit="kernel", file=_stream(), mininterval=1.0,
              ascii=True, dynamic_ncols=False, ncols=80) as bar:
        yield lambda: bar.update(1)


# --------------------------------------------------------------------------------------------
# The child process
# --------------------------------------------------------------------------------------------

def attempt(row: dict, work, describe=None) -> dict:
    """``row`` updated with ``work()``'s counts and ``error: None``, or with the error: one
    kernel that does not compile must not hide the others' counts.  ``describe(text)`` shortens
    the error text (default: its first line)."""
    try:
        row.update(work())
        row["error"] = None
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        row["error"] = (describe(text) if describe is not None
                        else text.strip().splitlines()[0][:400])
    return row


def run_child(client: str, payload=None, *, total: int = 0, label: str = "census",
              show: bool = True, on_row=None) -> list[dict]:
    """Run ``client.compile_rows(payload)`` in a child with the simulator off; its rows.

    ``client`` is a module of :mod:`ropelab.measure` (the child refuses any other).  With
    ``total`` (the rows expected), a progress bar follows the rows as the child prints them;
    ``on_row(row)`` is called as each arrives (a caller's own progress).
    """
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    proc = subprocess.Popen([sys.executable, "-m", "ropelab.measure.census.child", client],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=str(PACKAGE_DIR.parent))
    with tempfile.TemporaryFile("w+") as err, progress(total, label, show=show) as tick:
        # stderr drains on a thread of its own so a chatty compiler cannot fill the pipe and
        # stall the child while we read stdout.
        drain = threading.Thread(target=lambda: err.write(proc.stderr.read()), daemon=True)
        drain.start()
        proc.stdin.write(json.dumps(payload))
        proc.stdin.close()
        rows = []
        for line in proc.stdout:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if "fatal" in row:
                proc.wait()
                raise CensusError(row["fatal"])
            rows.append(row)
            tick()
            if on_row is not None:
                on_row(row)
        proc.wait()
        drain.join()
        err.seek(0)
        stderr = err.read()
    if proc.returncode:
        raise CensusError(f"census child {client} failed (exit {proc.returncode}): "
                          f"{stderr.strip()[-2000:]}")
    return rows
