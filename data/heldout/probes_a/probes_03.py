import ropelab
from numba import cuda, float32, uint64
import math

# the odd tail's guard off by one: pair + 1 <= n_pairs touches a pair past the row.
@cuda.jit(fastmath=True)
def quads_tail_guard_le(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        e = uint64(2) * (token * n_pairs + pair)
        for k in range(2):
            p = pair + uint64(k)
            if p <= n_pairs:
                angle = pos * inv_freq[p]
                c = math.cos(angle)
                s = math.sin(angle)
                a = e + uint64(2 * k)
                x0 = x[a]
                x1 = x[a + uint64(1)]
                out[a] = x0 * c - x1 * s
                out[a + uint64(1)] = x0 * s + x1 * c


# a correct 03.2 kernel for the launch probe.
@cuda.jit(fastmath=True)
def _quads_ok(x, out, positions, inv_freq, n_pairs, quads_per_row, total_quads):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        pos = float32(positions[token])
        e = uint64(2) * (token * n_pairs + pair)
        angle = pos * inv_freq[pair]
        c = math.cos(angle)
        s = math.sin(angle)
        x0 = x[e]
        x1 = x[e + uint64(1)]
        out[e] = x0 * c - x1 * s
        out[e + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            angle = pos * inv_freq[pair + uint64(1)]
            c = math.cos(angle)
            s = math.sin(angle)
            x2 = x[e + uint64(2)]
            x3 = x[e + uint64(3)]
            out[e + uint64(2)] = x2 * c - x3 * s
            out[e + uint64(3)] = x2 * s + x3 * c


# grid sized from the pairs instead of the quads: about twice the blocks needed.
def launch_grid_from_pairs(x, out, positions, inv_freq, n_pairs):
    quads_per_row = (n_pairs + 1) // 2
    total_quads = positions.size * quads_per_row
    threads = 64
    blocks = (positions.size * n_pairs + threads - 1) // threads
    _quads_ok[blocks, threads](x, out, positions, inv_freq, uint64(n_pairs),
                               uint64(quads_per_row), total_quads)


# the starter as handed out: the second pair's loads after the first pair's stores.
@cuda.jit(fastmath=True)
def pack4_starter_order(x, out, positions, n_pairs, quads_per_row, total_quads, base):
    idx = cuda.grid(1)
    if idx < total_quads:
        q = uint64(idx)
        token = q // quads_per_row
        pair = uint64(2) * (q - token * quads_per_row)
        i = uint64(2) * (token * n_pairs + pair)
        pos = float32(positions[token])
        inv_hidden = float32(1.0) / float32(n_pairs + n_pairs)
        a0 = pos / math.pow(base, float32(pair + pair) * inv_hidden)
        x0 = x[i]
        x1 = x[i + uint64(1)]
        c = math.cos(a0)
        s = math.sin(a0)
        out[i] = x0 * c - x1 * s
        out[i + uint64(1)] = x0 * s + x1 * c
        if pair + uint64(1) < n_pairs:
            j = i + uint64(2)
            a1 = pos / math.pow(base, float32(pair + pair + uint64(2)) * inv_hidden)
            x2 = x[j]
            x3 = x[j + uint64(1)]
            c = math.cos(a1)
            s = math.sin(a1)
            out[j] = x2 * c - x3 * s
            out[j + uint64(1)] = x2 * s + x3 * c


PROBES = [
    ("03.2", "tail_guard_off_by_one", quads_tail_guard_le, "fail",
     "second-pair guard pair + 1 <= n_pairs: the lone last pair's thread rotates a pair past the row"),
    ("03.3", "launch_grid_from_pairs", launch_grid_from_pairs, "fail",
     "blocks computed from tokens * n_pairs, not the quads: wholly idle blocks"),
    ("03.4", "loads_after_store_starter", pack4_starter_order, "fail",
     "the starter's order: the second pair loaded after the first pair stored"),
]
