"""``python3 scripts/with_row_stack.py SCRIPT ARGS...``: run SCRIPT under the H200 image's own
numpy (2.5), with ``np.row_stack`` put back as ``np.vstack`` first.

numba-cuda 0.30.4 registers ``np.row_stack`` at its first kernel compile, and numpy 2.5 removed
that alias of ``vstack``: that is the only break seen (../shared/notes/numba-cuda-facts.md).
The sessions carry a numpy 2.4.6 wheel instead (scripts/gpu_common.sh); this is for a call whose
carried packages leave no room for it (scripts/gpu_mlir_probe.sh), and its records say which
numpy ran.
"""

import runpy
import sys

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
