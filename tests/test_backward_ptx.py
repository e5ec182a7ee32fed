"""The backward kernel's PTX, compiled for sm_90 in a driver-less child (the simulator and the
real compiler cannot share a process): it compiles, every float is float32 (no ``.f64``), the
lane's values stay in registers (no local memory), only the atomic build has atomics, and
16-bit storage moves 32-bit words (two at once where a group is four neighbours)."""

import json
import os
import subprocess
import sys

import pytest

CHILD = r"""
import json, numpy as np
from numba import cuda
from ropelab.kernels.fused_qknorm_rope import backward as k
from ropelab.problem import FusedProblem
out = {}
for storage, inter, mode in [("bfloat16", True, "two_stage"), ("bfloat16", False, "two_stage"),
                             ("float16", False, "atomic"), ("float32", True, "two_stage")]:
    p = FusedProblem(4, 2, 1, 1, 128, 96 if not inter else 128, inter, storage, 1e-6, 1e4,
                     inv_freq=np.ones(48 if not inter else 64))
    main, reduce = k.plans(p, dw_mode=mode)
    ptx, _ = cuda.compile_ptx(main.kernel, main.argtypes(), cc=(9, 0), fastmath=True)
    out[f"{storage}-{inter}-{mode}"] = ptx
    if reduce is not None:
        out["reduce"] = cuda.compile_ptx(k.reduce_partials, reduce.argtypes(), cc=(9, 0))[0]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def ptx():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", ROPELAB_TARGET="gpu", ROPELAB_QUIET="1")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _lines(text, needle):
    return [line for line in text.splitlines() if needle in line]


def test_float32_only_and_no_local_memory(ptx):
    for name, text in ptx.items():
        assert not _lines(text, ".f64"), name
        assert not _lines(text, "ld.local") and not _lines(text, "st.local"), name


def test_atomics_only_in_the_atomic_build(ptx):
    for name, text in ptx.items():
        atomics = _lines(text, "atom.global") + _lines(text, "red.global")
        assert bool(atomics) == name.endswith("atomic"), name


def test_sixteen_bit_storage_moves_words(ptx):
    """GPT-J groups (four neighbours) move as one 64-bit access of two words; crossed NeoX
    groups as two 32-bit words; never 16 bits at a time."""
    gptj, neox = ptx["bfloat16-True-two_stage"], ptx["bfloat16-False-two_stage"]
    assert _lines(gptj, "ld.global.v2.u32") and _lines(gptj, "st.global.v2.u32")
    assert _lines(neox, "ld.global.u32") and _lines(neox, "st.global.u32")
    for text in (gptj, neox):
        assert not _lines(text, "ld.global.u16") and not _lines(text, "st.global.u16")
    assert _lines(ptx["float32-True-two_stage"], "ld.global.v4.f32")
