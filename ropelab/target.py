"""Choose where ropelab's kernels run: a real CUDA GPU, or the Numba CUDA simulator.

The choice has to be made before ``numba.cuda`` is first imported, because numba-cuda reads
``NUMBA_ENABLE_CUDASIM`` once, at that import, and swaps in a different module.  ``ropelab``
imports this module first thing, so ``import ropelab`` settles the target for the process.

Rules, in order:

1. ``ROPELAB_TARGET=gpu`` or ``ROPELAB_TARGET=simulator`` forces the choice.
2. Otherwise ``NUMBA_ENABLE_CUDASIM`` set by the user (``1`` or ``0``) is respected.
3. Otherwise the CUDA driver is asked, through ``ctypes``, whether it can see a device.  No
   device (or no driver) means the simulator, and ``import ropelab`` says so in one short
   :class:`SimulatorWarning` (:func:`announce`; ``ROPELAB_QUIET=1`` or a warnings filter
   silences it, and a Jupyter kernel does not get it unless ``ROPELAB_QUIET=0``: there a
   warning is a red box quoting ropelab's source line, and a notebook prints
   :func:`format_description` instead); :func:`describe` always tells, with what simulated
   numbers are worth.

Choosing the target is the only thing ``import ropelab`` does to the process: it sets
``NUMBA_ENABLE_CUDASIM`` (numba-cuda's switch) and no other numba setting, after making sure
that ``numba.cuda`` will be numba-cuda's (:func:`route_numba_cuda`).  numba's
low-occupancy warning stays on for the user's kernels; ropelab's own small-grid launches silence
it where they happen (:func:`small_grids_quiet`).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os
import platform
import sys
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata

GPU = "gpu"
SIMULATOR = "simulator"
_ALIASES = {"gpu": GPU, "cuda": GPU, "simulator": SIMULATOR, "sim": SIMULATOR, "cudasim": SIMULATOR}


class TargetError(RuntimeError):
    """The requested target cannot be honoured in this process."""


class RopelabWarning(UserWarning):
    """Base class of ropelab's warnings (``warnings.filterwarnings("ignore", category=...)``)."""


class SimulatorWarning(RopelabWarning):
    """Kernels run on the Numba CUDA simulator: correct logic, no speed, CPU float32 rounding."""


_CUDA_ERROR_NO_DEVICE = 100  # CUresult of cuInit when the driver sees no device


@dataclass(frozen=True)
class _Probe:
    devices: int
    driver_version: int | None  # CUDA driver API version, e.g. 13000
    reason: str  # why no device was found, or "" when one was


def probe_driver() -> _Probe:
    """Ask libcuda for the number of devices without importing numba.cuda."""
    names = ["nvcuda.dll"] if platform.system() == "Windows" else ["libcuda.so.1", "libcuda.so"]
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return _Probe(0, None, "no CUDA driver library (libcuda) on this machine")
    version = ctypes.c_int(0)
    driver_version = version.value if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 else None
    rc = lib.cuInit(0)
    if rc == _CUDA_ERROR_NO_DEVICE:  # a driver with every device hidden (CUDA_VISIBLE_DEVICES="")
        return _Probe(0, driver_version, "the CUDA driver reports no device")
    if rc != 0:
        return _Probe(0, driver_version, f"the CUDA driver failed to initialise (CUresult {rc})")
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        return _Probe(0, driver_version, "the CUDA driver reports no device")
    return _Probe(count.value, driver_version, "")


def _requested() -> tuple[str | None, str]:
    raw = os.environ.get("ROPELAB_TARGET", "").strip().lower()
    if raw and raw != "auto":
        if raw not in _ALIASES:
            raise TargetError(
                f"ROPELAB_TARGET={raw!r} is not understood; use 'gpu', 'simulator' or 'auto'."
            )
        return _ALIASES[raw], "ROPELAB_TARGET"
    sim = os.environ.get("NUMBA_ENABLE_CUDASIM", "").strip()
    if sim in ("0", "1"):
        return (SIMULATOR if sim == "1" else GPU), "NUMBA_ENABLE_CUDASIM"
    return None, "auto"


def _numba_cuda_mode_if_imported() -> str | None:
    """The mode of an already imported numba.cuda, or None when it is not imported yet."""
    mod = sys.modules.get("numba.cuda")
    if mod is None:
        return None
    simulated = getattr(mod.jit, "__module__", "").startswith("numba.cuda.simulator")
    return SIMULATOR if simulated else GPU


def _set_simulator_env(enabled: bool) -> None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if enabled else "0"
    # numba reads its configuration when ``numba`` is imported; if the user imported numba (but
    # not numba.cuda) already, the new value only takes effect after a reload.
    core = sys.modules.get("numba.core.config")
    if core is not None:
        core.reload_config()


def route_numba_cuda() -> None:
    """Make ``import numba.cuda`` load numba-cuda (the package ropelab pins), not the older copy
    that numba itself still ships under that name.

    numba-cuda reroutes the import with a finder that its ``.pth`` file installs when Python
    starts.  A process that was already running when numba-cuda was installed (a notebook kernel
    whose first cell ran ``%pip install``) never read that file, so the finder is installed here,
    before anything imports ``numba.cuda``.  Nothing happens when it is there already.
    """
    redirector = "_numba_cuda_redirector"  # numba-cuda's module; importing it installs the finder
    if "numba.cuda" in sys.modules or redirector in sys.modules:
        return
    if importlib.util.find_spec(redirector) is not None:
        importlib.import_module(redirector)


def select() -> tuple[str, str]:
    """Decide the target and prepare the environment; returns (target, reason)."""
    route_numba_cuda()
    wanted, source = _requested()
    probe = None
    if wanted is None:
        probe = probe_driver()
        wanted = GPU if probe.devices else SIMULATOR
        reason = (
            f"found {probe.devices} CUDA device(s)" if probe.devices else probe.reason
        )
    else:
        reason = f"forced by {source}"

    already = _numba_cuda_mode_if_imported()
    if already is not None and already != wanted:
        raise TargetError(
            f"numba.cuda was imported before ropelab and is running on the {already}, but ropelab "
            f"needs the {wanted} ({reason}). numba-cuda fixes its target at its first import, so "
            f"import ropelab before numba.cuda, or set NUMBA_ENABLE_CUDASIM="
            f"{'1' if wanted == SIMULATOR else '0'} before starting Python."
        )
    if already is None:
        _set_simulator_env(wanted == SIMULATOR)
    return wanted, reason


TARGET, REASON = select()
SIMULATED = TARGET == SIMULATOR

_announced = False
_arithmetic = ""  # what simulated numbers are worth: ropelab.sim.ARITHMETIC, kept for describe()
# numba-cuda's text for a grid under 128 blocks (numba.cuda.dispatcher, _LaunchConfiguration).
_LOW_OCCUPANCY = r"Grid size \d+ will likely result in GPU under-utilization"


def announce(arithmetic: str) -> None:
    """Warn once, briefly, that kernels run on the simulator (a :class:`SimulatorWarning`).

    ``arithmetic`` is :data:`ropelab.sim.ARITHMETIC` (``import ropelab`` passes it; this module
    must not import the shims, which need the target chosen first); it is kept for
    :func:`describe`, not printed.  Nothing on a GPU, nothing when :func:`quiet`, nothing the
    second time.
    """
    global _announced, _arithmetic
    _arithmetic = arithmetic
    if not SIMULATED or _announced or quiet():
        return
    _announced = True
    # stacklevel 1: the warning is attributed to this module, so a filter on ropelab.target or
    # on the category works, whoever imported ropelab.
    notice = (f"ropelab: kernels run on the Numba CUDA simulator ({REASON}): logic is checked, "
              f"nothing is timed; ropelab.describe() says more.")
    warnings.warn(notice, SimulatorWarning, stacklevel=1)


def quiet() -> bool:
    """Whether ``import ropelab`` keeps its simulator notice to itself: ``ROPELAB_QUIET=1``
    (or ``true``, ``yes``) says yes, ``ROPELAB_QUIET=0`` (``false``, ``no``) says no, and unset it
    is yes in a Jupyter kernel only.  In a notebook a warning is a red stderr box that quotes this
    file's source line; the course's notebooks print :func:`format_description` instead."""
    raw = os.environ.get("ROPELAB_QUIET", "").strip().lower()
    if raw in ("1", "true", "yes"):
        return True
    if raw in ("0", "false", "no"):
        return False
    return in_jupyter_kernel()


def in_jupyter_kernel() -> bool:
    """True in a Jupyter kernel (JupyterLab, Colab, VS Code: all run ipykernel's shell), False in
    a script or a terminal IPython.  Imports nothing: a process without ipykernel loaded is not one."""
    shell_module = sys.modules.get("ipykernel.zmqshell")
    ipython = sys.modules.get("IPython")
    if shell_module is None or ipython is None:
        return False
    return isinstance(ipython.get_ipython(), shell_module.ZMQInteractiveShell)


@contextmanager
def small_grids_quiet():
    """Silence numba's low-occupancy warning inside the block, and only there.

    The course launches deliberately tiny grids (1 token, 3 tokens) to show edge cases; the
    warning on each would bury real messages.  The filter is scoped to the block (the process's
    other launches, the user's own kernels included, keep numba's settings).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_LOW_OCCUPANCY)
        yield


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def describe() -> dict:
    """What ropelab runs on: the target and, on a GPU, the device; always the package versions.

    Returns a plain dict so notebooks and the benchmark records can store it as it is.
    """
    import numpy

    info: dict = {
        "target": TARGET,
        "reason": REASON,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": _version("numba"),
        "numba_cuda": _version("numba-cuda"),
    }
    if SIMULATED:
        info["simulator"] = _arithmetic  # what its numbers are worth (the warning's long text)
        return info
    from numba import cuda

    dev = cuda.get_current_device()
    drv = cuda.cudadrv.driver.driver.get_version()
    rt = cuda.runtime.get_version() if hasattr(cuda, "runtime") else None
    info.update(
        gpu=dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name),
        compute_capability=".".join(map(str, dev.compute_capability)),
        sm_count=dev.MULTIPROCESSOR_COUNT,
        cuda_driver_api=".".join(map(str, drv)),
        cuda_runtime=".".join(map(str, rt)) if rt else None,
        driver=_nvidia_driver_version(),
    )
    return info


def _nvidia_driver_version() -> str | None:
    """The kernel driver's version string (e.g. 580.159.04), from NVML when it is present."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return None
        buf = ctypes.create_string_buffer(96)
        ok = lib.nvmlSystemGetDriverVersion(buf, 96) == 0
        lib.nvmlShutdown()
        return buf.value.decode() if ok else None
    except OSError:
        return None


def format_description(info: dict | None = None) -> str:
    """A short human-readable block for the CLI and notebooks."""
    info = info or describe()
    lines = [f"target      : {info['target']} ({info['reason']})"]
    if info["target"] == GPU:
        lines += [
            f"gpu         : {info['gpu']} (cc {info['compute_capability']}, {info['sm_count']} SMs)",
            f"driver      : {info['driver']} (CUDA driver API {info['cuda_driver_api']})",
        ]
    lines.append(
        f"versions    : numba {info['numba']}, numba-cuda {info['numba_cuda']}, "
        f"numpy {info['numpy']}, python {info['python']}"
    )
    return "\n".join(lines)
