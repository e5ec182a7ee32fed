"""What sets N and O (two independent learners, 2026-12-07) found in the grader, closed and
tested both ways.

* Set N's 10.4 launch function built its positions with ``itertools.chain`` and was refused
  for ``import itertools`` (an ``import numpy`` passes): the standard library's pure iteration
  and arithmetic modules may be imported; a module that reaches attributes by name
  (``operator.attrgetter``) or the system still may not.
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
