"""Hints for notebook 03's ladder (03.1 .. 03.4): (direction, structure, key line)."""

HINTS = {
    "03.1": (
        "Twice the work per thread: thread t of block token rotates pairs 2t and 2t + 1, four "
        "floats side by side. Load all four before storing any.",
        "token = cuda.blockIdx.x; pair = 2 threadIdx.x; guard pair < n_pairs (n_pairs is even "
        "here: a thread with a first pair has its second); the first float i; load the four "
        "floats; one angle per pair from inv_freq[pair] and inv_freq[pair + 1]; the four "
        "rotated floats into out.",
        "i = 2 * (token * n_pairs + pair)  # floats i .. i + 3: pairs pair and pair + 1",
    ),
    "03.2": (
        "A flat grid of quads. Quads start again at every row, so find the token and the "
        "quad's first pair with one unsigned division, and touch the second pair only when it "
        "exists: an odd row ends with a lone pair.",
        "Guard; q = uint64(idx); token = q // quads_per_row; the first pair is twice what is "
        "left of q; i = 2 (token n_pairs + pair); a flag for the second pair; load, rotate and "
        "store the first pair, and the second under the flag (loads first, as in 03.1).",
        "two = pair + uint64(1) < n_pairs  # false for the lone last pair of an odd row",
    ),
    "03.3": (
        "The kernel's two quad counts come from the shape, on the host: a row of n_pairs pairs "
        "has ceil(n_pairs / 2) quads. Keep the types the kernel takes: uint64 and int64.",
        "quads_per_row = n_pairs / 2 rounded up, as np.uint64; total_quads = np.int64(tokens "
        "times it), tokens = positions.size; threads = 128, say; blocks rounded up; then "
        "rope_quads[blocks, threads](...) with its seven arguments.",
        "quads_per_row = (n_pairs + np.uint64(1)) // np.uint64(2)  # an odd row: a lone pair",
    ),
    "03.4": (
        "Nothing new to compute: move lines. A load of x that comes after a store to out must "
        "stay after it (out may be x), so put every load of x before the first store.",
        "Right after i: j = i + 2 and a flag for the second pair (pair + 1 < n_pairs); load x0 "
        "and x1, and under the flag x2 and x3 (set both to float32(0.0) first, so they exist "
        "on every path); only then the angles, cos, sin and the stores, the second pair's "
        "under the flag.",
        "if two:  # the second pair's loads, before any store\n"
        "    x2, x3 = x[j], x[j + uint64(1)]",
    ),
}
