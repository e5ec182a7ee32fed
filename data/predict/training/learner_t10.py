"""Training kernels for notebook 10's steps (serving: the slot scatter and the launch for a
ragged batch; steps 2 and 3 fix which thread writes what, so their solutions are their rows).

Variants: the scatter with a grid-stride loop, and for the launch step the host work a
learner's launch does before its kernel: positions built by a Python loop or by NumPy, copied
to the GPU once or with a round trip, or into a device array allocated first.  The launch
step's kernel is the solution's (``notebooks/solutions/10_serving.py``): the rows differ only
in what the host does.
"""

import importlib.util

import numpy as np

from ropelab.resources import solutions_dir  # ropelab first: it picks the simulator or the GPU
from numba import cuda

_spec = importlib.util.spec_from_file_location("_nb10_solutions",
                                               solutions_dir() / "10_serving.py")
_solutions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_solutions)
write_kv = _solutions.write_kv

# --- 10.1: the slot scatter ------------------------------------------------------------------


@cuda.jit
def scatter_grid_stride(k, slot_mapping, out, tokens, heads, head_dim):
    row = heads * head_dim
    i = cuda.grid(1)
    while i < tokens * row:
        t = i // row
        slot = slot_mapping[t]
        if slot >= 0:
            out[slot * row + i - t * row] = k[i]
        i += cuda.gridsize(1)


# --- 10.4: the launch for a ragged batch: what the host does first ----------------------------


def _positions(query_lens, context_lens):
    starts = np.cumsum((0,) + tuple(query_lens[:-1]))
    within = np.arange(sum(query_lens)) - np.repeat(starts, query_lens)
    return (np.repeat(context_lens, query_lens) + within).astype(np.int32)


def launch_python_loop(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                       num_slots):
    positions = []
    for q, c in zip(query_lens, context_lens):
        for j in range(q):
            positions.append(c + j)
    tokens = len(positions)
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, cuda.to_device(np.array(positions, np.int32)),
                                     slot_mapping, inv_freq, out, tokens, num_slots)


def launch_copied_twice(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                        num_slots):
    wide = cuda.to_device(_positions(query_lens, context_lens).astype(np.int64))
    positions = cuda.to_device(wide.copy_to_host().astype(np.int32))  # a round trip, then again
    tokens = positions.size
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, positions, slot_mapping, inv_freq, out,
                                     tokens, num_slots)


def launch_with_scratch(qkv, k_weight, slot_mapping, inv_freq, out, query_lens, context_lens,
                        num_slots):
    positions = _positions(query_lens, context_lens)
    device_positions = cuda.device_array(positions.size, dtype=np.int32)
    device_positions.copy_to_device(positions)
    tokens = positions.size
    write_kv[(tokens + 3) // 4, 128](qkv, k_weight, device_positions, slot_mapping, inv_freq,
                                     out, tokens, num_slots)


ENTRIES = [
    ("10.1", "grid-stride loop", scatter_grid_stride),
    ("10.4", "positions by a Python loop", launch_python_loop),
    ("10.4", "positions copied twice", launch_copied_twice),
    ("10.4", "a device array, then a copy", launch_with_scratch),
]
