#!/usr/bin/env bash
# A course notebook in a bare Jupyter: a fresh venv with Jupyter's kernel and notebook runner
# only (ipykernel, nbclient; no ropelab, numba or numpy), the notebook run top to bottom in it, so
# that its first cell has to install ropelab from the checkout with its one %pip line, as it does
# for a learner.  Then it checks that the cell did (ropelab and numba-cuda imported from the venv)
# and that no cell wrote to stderr.  CI (.ci/run) runs it in the background beside the test
# suite; each step prints its seconds.
#
#   scripts/notebooks/bare_jupyter.sh [NOTEBOOK]     # a name under notebooks/, default 00_on_ramp
#
# Everything goes to .venv-bare/ (ignored; made anew on each run, left in place like .venv-test):
# the venv, and a copy of the working tree that the notebook runs in.  The copy is the checkout
# the first cell installs from: `pip install ..` writes build/ and ropelab.egg-info/ beside
# pyproject.toml, and in CI the test venv's `pip install -e .` writes the same egg-info in this
# checkout at the same time.
set -euo pipefail
cd "$(dirname "$0")/../.."
name="${1:-00_on_ramp}"
[ -f "notebooks/$name.ipynb" ] || { echo "bare jupyter: no notebooks/$name.ipynb" >&2; exit 2; }
work="$PWD/.venv-bare"
seconds() { echo "bare jupyter: $1 took $(($(date +%s) - $2)) s"; }

if [ -e "$work" ]; then  # a run by hand before this one (CI's fresh clone has none)
    t0=$(date +%s)
    rm -rf "$work"
    seconds "removing the previous .venv-bare" "$t0"
fi
t0=$(date +%s)
mkdir -p "$work/checkout"
# The files git sees (tracked, and new ones it does not ignore), as they are in the working tree.
git ls-files -z --cached --others --exclude-standard \
    | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$work/checkout"
notebook="$work/checkout/notebooks/$name.ipynb"
python3 -m venv "$work/venv"
seconds "the venv (and the checkout's copy)" "$t0"
t0=$(date +%s)
"$work/venv/bin/pip" install -q ipykernel nbclient
seconds "pip install ipykernel nbclient" "$t0"
if "$work/venv/bin/python" -c "import ropelab" 2>/dev/null; then
    echo "bare jupyter: ropelab is importable before the notebook ran: nothing would be tested" >&2
    exit 1
fi

# The kernel gets a learner's environment: none of the checkout's or CI's settings (no
# PYTHONPATH, no ropelab or numba switch), its own empty ropelab cache and progress file, and
# Jupyter's user folders under .venv-bare (so no kernelspec of this machine's user is picked
# instead of the venv's).
env -u PYTHONPATH -u ROPELAB_TARGET -u ROPELAB_QUIET -u NUMBA_ENABLE_CUDASIM -u MPLBACKEND \
    -u VIRTUAL_ENV ROPELAB_CACHE="$work/cache" ROPELAB_PROGRESS="$work/progress" \
    JUPYTER_DATA_DIR="$work/jupyter/data" JUPYTER_CONFIG_DIR="$work/jupyter/config" \
    JUPYTER_RUNTIME_DIR="$work/jupyter/runtime" IPYTHONDIR="$work/ipython" \
    "$work/venv/bin/python" - "$notebook" "$work/venv" <<'PY'
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

notebook, venv = Path(sys.argv[1]), Path(sys.argv[2]).resolve()
nb = nbformat.read(notebook, as_version=4)
# One more cell at the end, in the same kernel: the environment it ran in, and where ropelab and
# numba.cuda came from (numba-cuda's, not the older numba.cuda that numba itself ships).
nb.cells.append(nbformat.v4.new_code_cell(
    "import sys, numba.cuda\nprint(sys.prefix)\nprint(ropelab.__file__)\nprint(numba.cuda.__file__)"))
start = time.monotonic()
NotebookClient(nb, timeout=600, kernel_name="python3",
               resources={"metadata": {"path": str(notebook.parent)}}).execute()
first = next(c for c in nb.cells if c.cell_type == "code")
took = first.metadata.get("execution", {})  # nbclient's timestamps of the cell
if {"iopub.execute_input", "shell.execute_reply"} <= set(took):
    from datetime import datetime

    cell_s = (datetime.fromisoformat(took["shell.execute_reply"].replace("Z", "+00:00"))
              - datetime.fromisoformat(took["iopub.execute_input"].replace("Z", "+00:00")))
    print(f"bare jupyter: the first cell (its %pip install of ropelab) took "
          f"{cell_s.total_seconds():.0f} s")
print(f"bare jupyter: {notebook.name} from kernel start to its last cell took "
      f"{time.monotonic() - start:.0f} s")


def text(cell, name="stdout"):
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream" and o.get("name") == name)


failures = []
if "%pip install" not in first.source:
    failures.append("the first code cell has no %pip line")
prefix, ropelab_file, cuda_file = text(nb.cells[-1]).split()
if Path(prefix).resolve() != venv:
    failures.append(f"the kernel ran in {prefix}, not in the bare venv")
if not Path(ropelab_file).resolve().is_relative_to(venv):
    failures.append(f"ropelab came from {ropelab_file}, not from the first cell's install")
if "numba_cuda" not in cuda_file:
    failures.append(f"numba.cuda is {cuda_file}, not numba-cuda's")
if "forced by" in text(first):
    failures.append(f"the first cell says: {text(first)!r}")
for i, cell in enumerate(nb.cells):
    if cell.cell_type == "code" and text(cell, "stderr"):
        failures.append(f"cell {i} wrote to stderr: {text(cell, 'stderr')[:300]!r}")
print("bare jupyter: the first cell printed:\n  " + "\n  ".join(
    line for line in text(first).splitlines() if line.startswith(("target", "versions"))))
if failures:
    sys.exit("bare jupyter: FAILED\n  " + "\n  ".join(failures))
print(f"bare jupyter: {notebook.name} ran from a venv with ipykernel and nbclient only; its "
      f"first cell installed ropelab into {venv.name}")
PY
