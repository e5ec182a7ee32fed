"""Variant 3b, ``pack4_scalar``: the ``pack4`` work split with four scalar loads per thread.

Same threads, same math as :mod:`.pack4`; only the memory instructions differ (four 32-bit
loads and stores instead of one 128-bit each).  Timing the two side by side measures what the
wider access alone buys on a memory-bound operator.
"""

from . import pack4
from .plan import Variant

NAME = "pack4_scalar"
SUMMARY = "pack4 with four scalar 32-bit loads/stores per thread (tail path for odd pair counts)"
FEATURES = pack4.FEATURES
KERNEL = pack4.rope_pack4_scalar
launch_config = pack4.launch_config


def plan(problem, options, *, fastmath=True, threads=None, aligned=True):
    return pack4.plan_kernel(problem, pack4.rope_pack4_scalar, fastmath=fastmath, threads=threads)


VARIANT = Variant(NAME, SUMMARY, FEATURES, plan, KERNEL)
