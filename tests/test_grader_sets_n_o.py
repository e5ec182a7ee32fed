"""What sets N and O (two independent learners, 2026-12-07) found in the grader, closed and
tested both ways.

* Set N's 10.4 launch function built its positions with ``itertools.chain`` and was refused
  for ``import itertools`` (an ``import numpy`` passes): the standard library's pure iteration
  and arithmetic modules may be imported; a module that reaches attributes by name
  (``operator.attrgetter``) or the system still may not.

Red team round Q's 04.2 kernels had the right values by the wrong method: one thread copying the
block's whole table, and the frequency read from global memory beside a shared read that did
nothing.  04.2 now says ``shared_copy=("inv_freq",)``: a block reads each entry once, and more
than one of its threads share the reading.
"""

import textwrap

import pytest

import ropelab
from ropelab.grader import grading, steps, verify

from cells import define

pytestmark = pytest.mark.skipif(not ropelab.SIMULATED, reason="the simulator's grading")

SERVING = verify.load_solution(verify.solution_path(steps.get("10.4")))

LAUNCH = '''
import numpy as np
from numba import cuda

def launch_kv_write(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                    num_slots):
    IMPORT
    tokens = int(sum(query_lens))
    positions = np.array(list(CHAIN), dtype=np.int32)
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, cuda.to_device(positions), slot_mapping,
                                     inv_freq, out, tokens, num_slots)
'''


def _launch(importing: str, chain: str):
    source = textwrap.dedent(LAUNCH).replace("IMPORT", importing).replace("CHAIN", chain)
    return define(source, "launch_kv_write", write_kv=SERVING.write_kv)


def test_a_10_4_launch_that_imports_itertools_passes_and_one_that_imports_operator_does_not():
    ranges = "range(c, c + q) for q, c in zip(query_lens, context_lens)"
    chained = grading.grade(steps.get("10.4"), _launch("import itertools",
                                                       f"itertools.chain.from_iterable({ranges})"))
    assert chained.passed, str(chained)
    reached = grading.grade(steps.get("10.4"), _launch("import operator",
                                                       f"p for r in ({ranges}) for p in r"))
    text = str(reached)
    assert not reached.passed and "reaches past its arguments: `import operator`" in text, text


# --- 04.2: the table is copied once per block, by the block's threads (round Q) -------------

TABLE = '''
import math
from numba import cuda, float32, uint64

@cuda.jit(fastmath=True)
def rope_shared_table(x, out, positions, inv_freq, n_pairs, total_pairs):
    table = cuda.shared.array(128, float32)
    COPY
    cuda.syncthreads()
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs
        e = i + i
        angle = float32(positions[token]) * FREQ
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
'''
SHARED_COPY = '''k = uint64(cuda.threadIdx.x)
    while k < n_pairs:
        table[k] = inv_freq[k]
        k += uint64(cuda.blockDim.x)'''
ALONE = '''if cuda.threadIdx.x == 0:
        k = uint64(0)
        while k < n_pairs:
            table[k] = inv_freq[k]
            k += uint64(1)'''


def _table(copy: str, freq: str):
    return grading.grade(steps.get("04.2"), define(
        TABLE.replace("COPY", copy).replace("FREQ", freq), "rope_shared_table"))


def test_04_2_passes_a_shared_copy_read_from_the_table():
    verdict = _table(SHARED_COPY, "table[pair]")
    assert verdict.passed, str(verdict)


def test_04_2_refuses_the_frequency_read_from_global_memory_beside_the_shared_copy():
    verdict = _table(SHARED_COPY, "(inv_freq[pair] + table[pair] * float32(0))")
    text = str(verdict)
    assert not verdict.passed and "which its block had read before: a block reads inv_freq " \
        "once, into its shared table" in text, text


def test_04_2_refuses_one_thread_copying_the_whole_table():
    verdict = _table(ALONE, "table[pair]")
    text = str(verdict)
    assert not verdict.passed and "of inv_freq alone: every thread helps with the copy" in text, \
        text


# --- 05.3: stride_ratio in float64, rounded once (round Q) -----------------------------------

STRIDED = verify.load_solution(verify.solution_path(steps.get("05.3")))

LAUNCH_05_3 = '''
import math
from numba import float32, uint64

def launch_strided(x, out, positions, tokens, hidden, base):
    n_pairs = hidden // 2
    stride = (n_pairs + 3) // 4
    total_threads = tokens * stride
    exponent_step = -2.0 / hidden
    RATIO
    blocks = (total_threads + 63) // 64
    my_rope_strided[blocks, 64](x, out, positions, uint64(n_pairs), uint64(stride),
                                total_threads, float32(base), float32(exponent_step),
                                float32(stride_ratio))
'''


def _strided(ratio: str):
    fn = define(LAUNCH_05_3.replace("RATIO", ratio), "launch_strided",
                my_rope_strided=STRIDED.my_rope_strided)
    return grading.grade(steps.get("05.3"), fn)


def test_05_3_passes_the_ratio_in_float64_and_refuses_it_in_float32():
    right = _strided("stride_ratio = base ** (exponent_step * stride)")
    assert right.passed, str(right)
    # set I's reading: the contract's float32 exponent_step, the power in float64
    contract = _strided("stride_ratio = base ** (float(float32(exponent_step)) * stride)")
    assert contract.passed, str(contract)
    single = _strided("stride_ratio = float32(base) ** (float32(exponent_step) * "
                      "float32(stride))")
    text = str(single)
    assert not single.passed and "stride_ratio is " in text and "rounded once to float32" in text, \
        text
