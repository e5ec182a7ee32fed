import ropelab  # noqa: F401
from numba import cuda


@cuda.jit
def scatter_rows(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.grid(1)
    row = heads * head_dim
    if i < tokens * row:
        token = i // row
        c = i - token * row
        slot = slot_mapping[token]
        if slot >= 0:
            out[slot * row + c] = k[i]


@cuda.jit
def scatter_rows_v2(k, slot_mapping, out, tokens, heads, head_dim):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = heads * head_dim
    if i >= tokens * row:
        return
    token = i // row
    slot = slot_mapping[token]
    if slot < 0:
        return
    out[slot * row + (i % row)] = k[i]


ENTRIES = [
    ("10.1", "div_sub", scatter_rows),
    ("10.1", "div_mod_early_return", scatter_rows_v2),
]
