"""Hints for notebook 00's ladder (00.1 .. 00.5): (direction, structure, key line)."""

HINTS = {
    "00.1": (
        "One thread per float, and now several blocks: the float's index is the thread's "
        "number in the whole grid, not in its block.",
        "Two lines: the thread's global number into i, then copy element i. No guard: here n "
        "is a multiple of the block size.",
        "i = cuda.grid(1)  # blockIdx.x * blockDim.x + threadIdx.x",
    ),
    "00.2": (
        "The grid is rounded up to whole blocks, so the last block has threads past the end of "
        "the array. They must not touch memory: on a GPU nothing would stop them.",
        "i = cuda.grid(1); an if that lets through only the threads with an element; the copy "
        "inside it.",
        "if i < n:  # the last block has threads past the end",
    ),
    "00.3": (
        "Thread p owns pair p, the two floats side by side at 2p and 2p + 1. Read both floats "
        "before writing either, then apply the 2-D rotation with the given cosine and sine.",
        "p = cuda.grid(1); guard p < n_pairs; c and s from cos_t[p] and sin_t[p]; x0 and x1 "
        "from the pair's two floats; the two rotated floats into the same places of out (the "
        "formula is in the step's text).",
        "out[2 * p] = x0 * c - x1 * s\n"
        "out[2 * p + 1] = x0 * s + x1 * c",
    ),
    "00.4": (
        "You choose the block size (a multiple of 32, at most 1024), then just enough blocks "
        "that every pair has a thread: rounding down loses the last pairs, one block too many "
        "does nothing at all.",
        "threads = 128, say; blocks = n_pairs divided by threads, rounded up; then "
        "rotate_pairs[blocks, threads](...) with the five arguments in the kernel's order.",
        "blocks = (n_pairs + threads - 1) // threads  # rounded up: the last block may be partial",
    ),
    "00.5": (
        "One thread per float now: thread i writes out[i] alone. It finds its pair (i // 2), "
        "whether its float is the pair's first or second, and reads its partner from x.",
        "i = cuda.grid(1); guard i < n; c and s of pair i // 2; an even i uses the float after "
        "it, an odd i the float before it, each with its own formula from the step's text.",
        "if i % 2 == 0:  # the first float of pair i // 2\n"
        "    out[i] = x[i] * c - x[i + 1] * s",
    ),
}
