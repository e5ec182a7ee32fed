"""Notebook 01's claim about its division limit, checked on the compiler: a grid-stride loop
whose trips the compiler can count (a signed index) is unrolled, and the PTX text holds the
division once per copy plus once for the trip count; over uint64 values it does not.  The limit
counts the source's divisions (ropelab.measure.census.ir_divisions, numba's IR before NVVM), one
in both loops, and step 01.1 passes both."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import re
import numba
from numba import cuda, float32, uint64

def signed(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    stride = cuda.gridsize(1)
    while idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        out[idx] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        idx += stride

def unsigned(out, positions, inv_freq, n_pairs, total_pairs):
    i = uint64(cuda.grid(1))
    stride = uint64(cuda.gridsize(1))
    while i < uint64(total_pairs):
        token = i // n_pairs
        out[i] = float32(positions[token]) * inv_freq[i - token * n_pairs]
        i += stride

from ropelab.measure.census.ir_divisions import count_ir_divisions
from ropelab.measure.census.shipped import _ptx_and_ir

sig = "void(float32[::1], int32[::1], float32[::1], uint64, int64)"
for f in (signed, unsigned):
    ptx, ir = _ptx_and_ir(f, sig)
    print(f.__name__, len(re.findall(r"\b(?:div|rem)\.[su](?:32|64)", ptx)),
          count_ir_divisions(ir))
'''


def test_the_division_of_an_unrolled_grid_stride_loop_is_counted_per_copy():
    text = (ROOT / "scripts" / "notebooks" / "src" / "01_flat_divmod.py").read_text()
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    run = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env=env, timeout=120)
    if run.returncode != 0 and "NVVM" in run.stderr:
        pytest.skip("no NVVM to compile with")
    assert run.returncode == 0, run.stderr[-2000:]
    counts = {line.split()[0]: tuple(map(int, line.split()[1:]))
              for line in run.stdout.split("\n") if line.strip()}
    (signed, signed_pass), (unsigned, unsigned_pass) = counts["signed"], counts["unsigned"]
    assert signed > unsigned
    claim = re.search(r"compiles to (\d+) divisions in the PTX.*?the census counts (\d+)\.\s+#?"
                      r"\s*The same loop over `uint64` values compiles to (\d+), and counts (\d+)",
                      text, re.S)
    assert claim, "notebook 01's division sentence changed: update this test's pattern"
    assert tuple(map(int, claim.groups())) == (signed, signed_pass, unsigned, unsigned_pass)
