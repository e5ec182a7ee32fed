"""Instruction census of compiled kernels, from PTX (and SASS) compiled without a GPU.

One engine (:mod:`.engine`: keys on what produced the counted text, the :func:`~.engine.cached`
sequence of committed file, user cache and build, progress, and the child process that compiles
with the simulator off), one digest of the compiled code (:mod:`.digest`), one set of counting
rules (:mod:`.counting`), SASS through nvJitLink and nvdisasm (:mod:`.sass`), and its clients:

- :mod:`.registered`: every registered kernel (``python -m ropelab census``), re-exported here,
  with its determinism guard (:mod:`.guard`);
- :mod:`.shipped`: a kernel that exists only as source (a learner's), shipped to the child;
- :mod:`ropelab.measure.controls`: the controlled kernels;
- :mod:`ropelab.measure.seed_claims`: the seed-claims experiments (Numba and NVRTC);
- :mod:`ropelab.grader.kernel_census`: the grader's cache of learner kernels' counts.
"""

from .counting import count_extras, count_ptx, count_sass
from .engine import CC, DATA_DIR, PACKAGE_DIR, CensusError, code_digest, versions
from .registered import (DATA_FILE, LIBDEVICE_F64_NOTE, SASS_FILE, cache_key, census,
                         format_table, row, run_cli, save, targets)
from .sass import find_nvdisasm, ptx_to_sass, sass_tools_missing

__all__ = ["CC", "DATA_DIR", "DATA_FILE", "LIBDEVICE_F64_NOTE", "PACKAGE_DIR", "SASS_FILE",
           "CensusError", "cache_key", "census", "code_digest", "count_extras", "count_ptx",
           "count_sass", "find_nvdisasm", "format_table", "ptx_to_sass", "row", "run_cli", "save",
           "sass_tools_missing", "targets", "versions"]
