"""PTX to SASS without a GPU: nvJitLink links the PTX to a cubin, ``nvdisasm`` prints it.

Both come from pip packages (``cuda-bindings`` and ``nvidia-cuda-nvdisasm``, the ``sass``
extra); no driver is involved, so this runs in the census child process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .engine import CC, EXTRAS, CensusError


def sass_tools_missing() -> str | None:
    """What to install before SASS can be made here, or None when it can: ask first, so a
    check that needs SASS says so before it compiles anything."""
    return None if find_nvdisasm() is not None else f"nvdisasm: {EXTRAS['sass']}"


def find_nvdisasm() -> str | None:
    """The ``nvdisasm`` binary on PATH or inside an installed NVIDIA wheel, or None."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    for base in map(Path, sys.path):
        for candidate in (base / "nvidia" / "cu13" / "bin" / "nvdisasm",
                          base / "nvidia" / "cuda_nvdisasm" / "bin" / "nvdisasm"):
            if candidate.is_file():
                return str(candidate)
    return None


def ptx_to_sass(ptx: str, cc=CC) -> str:
    """Link PTX to a cubin with nvJitLink and disassemble it with nvdisasm."""
    from cuda.bindings import nvjitlink

    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        raise CensusError(f"nvdisasm not found; {EXTRAS['sass']}")
    data = ptx.encode()
    handle = nvjitlink.create(1, [f"-arch=sm_{cc[0]}{cc[1]}"])
    try:
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
    finally:
        nvjitlink.destroy(handle)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(bytes(cubin))
        done = subprocess.run([nvdisasm, "-c", str(path)], capture_output=True, text=True)
    if done.returncode:
        raise CensusError(f"nvdisasm failed: {done.stderr.strip()}")
    return done.stdout
