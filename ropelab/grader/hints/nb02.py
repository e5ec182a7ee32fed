"""Hints for notebook 02's ladder (02.1 .. 02.3): (direction, structure, key line)."""

HINTS = {
    "02.1": (
        "The block number is the token and the thread number is the pair: no division at all. "
        "A block is a whole number of warps and a row rarely is, so guard the pair.",
        "token = cuda.blockIdx.x; pair = cuda.threadIdx.x; if pair < n_pairs: the angle from "
        "the token's position and the pair's frequency, then rotate the pair's two floats of "
        "the batch into out.",
        "i = 2 * (token * n_pairs + pair)  # the pair's first float in the whole batch",
    ),
    "02.2": (
        "A block owns a whole row, whatever its number of threads: thread t takes pairs t, "
        "t + blockDim.x, t + 2 blockDim.x, ... until the row ends. That is a stride loop.",
        "token = cuda.blockIdx.x; the row's first float (uint64); the position as float32; "
        "pair starts at the thread's number (uint64); a while loop over this thread's pairs: "
        "its frequency with one pow, then the rotation of floats row + 2 pair and the one "
        "after; at the end of each turn, step pair.",
        "while pair < n_pairs:  # any row width, any block size\n"
        "    pair += uint64(cuda.blockDim.x)  # the loop's last line: this thread's next pair",
    ),
    "02.3": (
        "One block per token; threads per block = the row's pairs rounded up to whole warps, "
        "but never more than 1024: the kernel's stride loop covers rows wider than that.",
        "tokens = positions.size; warps = n_pairs / 32 rounded up (n_pairs is a uint64: make "
        "it an int); threads = the smaller of 32 warps and 1024; then "
        "my_rope_block2d[tokens, threads](...).",
        "threads = min(32 * ((int(n_pairs) + 31) // 32), 1024)",
    ),
}
