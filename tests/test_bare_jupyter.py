"""The notebooks work from a bare Jupyter: the first cell installs ropelab into the running kernel
when it is missing and shows nothing of the course's machinery, and JupyterLab opens a stored
notebook without marking it unsaved.

The real run, a venv with ipykernel and nbclient only whose notebook installs ropelab from the
checkout, is ``scripts/notebooks/bare_jupyter.sh`` (CI runs it beside the suite, a minute of
installing); these tests read the stored notebooks and run the first cell's install logic in a
stand-in kernel.
"""

import importlib.util
import json
import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STORED = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _load_build():
    spec = importlib.util.spec_from_file_location("course_build",
                                                  ROOT / "scripts" / "notebooks" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build()


def _text(value):
    return value if isinstance(value, str) else "".join(value)


def _first_code_cell(path):
    return next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")


# ---- JupyterLab opens a stored notebook with nothing to save -------------------------------------

@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_stored_metadata_is_what_a_jupyterlab_kernel_writes_back(path):
    """JupyterLab 4 sets ``kernelspec`` (from the kernel's spec) and ``language_info`` (from its
    info reply) when the kernel starts, and marks the notebook unsaved when either differs."""
    import nbformat

    nb = json.loads(path.read_text())
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)  # what JupyterLab 4 saves
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
    # Nothing else at the top (no jupytext section, which JupyterLab without jupytext drops).
    assert set(nb["metadata"]) == {"kernelspec", "language_info"}
    expected = build.kernel_metadata()
    assert nb["metadata"]["kernelspec"] == expected["kernelspec"]
    stored_info, expected_info = dict(nb["metadata"]["language_info"]), dict(expected["language_info"])
    # The version is the Python of the build (a learner on another Python sees it change).
    assert re.fullmatch(r"3\.\d+\.\d+", stored_info.pop("version"))
    expected_info.pop("version")
    assert stored_info == expected_info


def test_kernel_metadata_is_ipykernels():
    from ipykernel.kernelspec import get_kernel_dict

    spec = build.kernel_metadata()["kernelspec"]
    assert spec["name"] == "python3"  # the name JupyterLab's default Python kernel has
    assert (spec["display_name"], spec["language"]) == (get_kernel_dict()["display_name"], "python")


# ---- the first cell: one %pip line, nothing internal ---------------------------------------------

@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_first_cell_installs_ropelab_and_shows_nothing_internal(path):
    cell = _first_code_cell(path)
    source = _text(cell["source"])
    assert source.startswith(build.INSTALL_BLOCK)
    assert source.count("%pip") == 1
    # What nbval needs is in the cell's metadata, not in what the learner reads.
    assert cell["metadata"].get("tags") == ["nbval-ignore-output"]
    for internal in ("NBVAL", "os.environ", "import os", "ROPELAB_"):
        assert internal not in source, internal
    assert "print(ropelab.format_description())" in source  # where the kernels will run
    outputs = cell["outputs"]
    assert not [o for o in outputs if o.get("name") == "stderr"]
    shown = "".join(_text(o.get("text", "")) for o in outputs)
    assert shown.startswith("target      : ")
    assert "forced by" not in shown and "ROPELAB_" not in shown, shown


class _StandInKernel:
    """Runs the install block as IPython would: its magics transformed into
    ``get_ipython().run_line_magic(...)`` calls, ``{...}`` expanded in the cell's namespace.
    ``import ropelab`` fails until %pip has run when ``installed`` is False."""

    def __init__(self, installed: bool):
        self.installed = installed
        self.magics = []

    def run_line_magic(self, name, line):
        from IPython.utils.text import DollarFormatter

        self.magics.append((name, DollarFormatter().vformat(line, args=[], kwargs=self.namespace)))
        self.installed = True

    def run(self, code: str) -> dict:
        from IPython.core.inputtransformer2 import TransformerManager

        real_import = __import__

        def importer(name, *args, **kwargs):
            if name.split(".")[0] == "ropelab" and not self.installed:
                raise ModuleNotFoundError("No module named 'ropelab'", name="ropelab")
            return real_import(name, *args, **kwargs)

        builtins = dict(__builtins__ if isinstance(__builtins__, dict) else vars(__builtins__))
        builtins["__import__"] = importer
        self.namespace = {"__builtins__": builtins, "get_ipython": lambda: self}
        exec(TransformerManager().transform_cell(code), self.namespace)
        return self.namespace


@pytest.mark.parametrize("layout, installed, expected", [
    ("checkout", True, []),  # ropelab importable: nothing runs
    ("checkout", False, [("pip", "install -q ..")]),
    ("nothing", False, [("pip", "install -q ropelab-*.whl")]),
    ("another project", False, [("pip", "install -q ropelab-*.whl")]),
])
def test_install_block_installs_only_when_missing_and_from_the_checkout_it_sits_in(
        tmp_path, monkeypatch, layout, installed, expected):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    if layout != "nothing":
        name = "ropelab" if layout == "checkout" else "rope-tools"
        (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "{name}"\nversion = "1"\n')
    monkeypatch.chdir(notebooks)  # a Jupyter kernel starts in its notebook's folder
    kernel = _StandInKernel(installed)
    namespace = kernel.run(build.INSTALL_BLOCK)
    assert kernel.magics == expected
    assert namespace["ropelab"].__name__ == "ropelab"


def test_build_refuses_a_source_without_the_install_block_and_keeps_tags(tmp_path):
    src = tmp_path / "99_probe.py"
    src.write_text("# %% [markdown]\n# # Probe\n\n# %%\nimport ropelab\n")
    with pytest.raises(ValueError, match="INSTALL_BLOCK"):
        build.make_notebook(src)
    body = build.INSTALL_BLOCK.replace("    %pip", "    # %pip")  # jupytext comments magics
    src.write_text('# %% [markdown]\n# # Probe\n\n# %% tags=["nbval-ignore-output"]\n' + body
                   + "\nprint(ropelab.format_description())\n")
    nb = build.make_notebook(src)
    assert nb.cells[1].metadata["tags"] == ["nbval-ignore-output"]
    assert nb.cells[1].source.startswith(build.INSTALL_BLOCK)


# ---- ropelab in a kernel that was running before it was installed --------------------------------

def test_quiet_in_a_jupyter_kernel_unless_asked(monkeypatch):
    from types import ModuleType

    from ropelab import target

    monkeypatch.delenv("ROPELAB_QUIET", raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel.zmqshell", raising=False)
    assert not target.in_jupyter_kernel() and not target.quiet()  # a script: the warning shows

    shell_module = ModuleType("ipykernel.zmqshell")
    shell_module.ZMQInteractiveShell = type("ZMQInteractiveShell", (), {})
    ipython = ModuleType("IPython")
    ipython.get_ipython = lambda: shell_module.ZMQInteractiveShell()
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", shell_module)
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    assert target.in_jupyter_kernel() and target.quiet()
    monkeypatch.setenv("ROPELAB_QUIET", "0")
    assert not target.quiet()
    monkeypatch.setenv("ROPELAB_QUIET", "1")
    ipython.get_ipython = lambda: None  # IPython loaded, but not running a kernel
    assert target.quiet()
    monkeypatch.delenv("ROPELAB_QUIET")
    assert not target.quiet()


def test_numba_cuda_is_numba_cudas_when_its_pth_file_was_never_read():
    """``python -S`` reads no .pth file, like a kernel whose %pip installed numba-cuda after it
    started: plain ``import numba.cuda`` then gets numba's own copy, and ``import ropelab`` must
    route it to numba-cuda's."""
    paths = [str(ROOT)] + site.getsitepackages()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "ROPELAB_TARGET")}
    env.update(ROPELAB_QUIET="1", ROPELAB_TARGET="simulator")

    def cuda_file(imports: str) -> str:
        code = f"import sys; sys.path[:0] = {paths!r}; {imports}; print(numba.cuda.__file__)"
        done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert "numba_cuda" not in cuda_file("import numba.cuda")  # what the check guards against
    assert "numba_cuda" in cuda_file("import ropelab, numba.cuda")


def test_a_driver_with_every_device_hidden_reads_as_no_device(monkeypatch):
    """build.py hides the GPU (CUDA_VISIBLE_DEVICES=""), and the first cell then gives the
    driver's answer in words; any other failed start keeps its code."""
    from ropelab import target

    class Driver:
        def __init__(self, init_result):
            self.init_result = init_result

        def cuDriverGetVersion(self, out):
            return 0

        def cuInit(self, flags):
            return self.init_result

    monkeypatch.setattr(target.ctypes, "CDLL", lambda name: Driver(100))  # CUDA_ERROR_NO_DEVICE
    assert target.probe_driver().reason == "the CUDA driver reports no device"
    monkeypatch.setattr(target.ctypes, "CDLL", lambda name: Driver(3))  # CUDA_ERROR_NOT_INITIALIZED
    assert target.probe_driver().reason == "the CUDA driver failed to initialise (CUresult 3)"
