"""Variant 3b, ``pack4_scalar``: the ``pack4`` work split with four scalar loads per thread.

Same threads, same math as :mod:`.pack4`; only the memory instructions differ (four 32-bit
loads and stores instead of one 128-bit each).  Timing the two side by side measures what the
wider access alone buys on a memory-bound operator.
"""

from . import pack4

NAME = "pack4_scalar"
SUMMARY = "pack4 with four scalar 32-bit loads/stores per thread (tail path for odd pair counts)"
FEATURES = pack4.FEATURES
KERNEL = pack4.rope_pack4_scalar
PTX_SIGNATURE = pack4.PTX_SIGNATURE
launch_config = pack4.launch_config


def launch(problem, x, out, positions, *, fastmath=True, threads_per_block=None, stream=0):
    pack4.launch(problem, x, out, positions, fastmath=fastmath, threads_per_block=threads_per_block,
                 stream=stream, vector=False)
