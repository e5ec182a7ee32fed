"""Hints for the on-ramp's puzzles (ramp.1 .. ramp.14): (direction, structure, key line)."""

HINTS = {
    "ramp.1": (
        "Each thread handles one float. With a single block, a thread's number inside its "
        "block is the index of its float.",
        "Two lines: read this thread's number into i, then write out[i] from x[i]. No guard: "
        "the block has exactly n threads.",
        "i = cuda.threadIdx.x  # one block: the thread's number is its float's index",
    ),
    "ramp.2": (
        "The map of ramp.1 with a second input, read at the same index as the first.",
        "i is the thread's number in the block; out[i] is the float of x at i times the float "
        "of weight at i. One thread, one element of each array.",
        "out[i] = x[i] * weight[i]",
    ),
    "ramp.3": (
        "The block always has 32 threads, but x may hold fewer floats. A thread whose index "
        "is past the end must do nothing at all: not even read.",
        "i = cuda.threadIdx.x; then an if that lets through only the threads that have a "
        "float; inside it, the scaling of ramp.1's map.",
        "if i < n:  # the threads with i >= n have no float",
    ),
    "ramp.4": (
        "With several blocks, cuda.threadIdx.x starts again at 0 in every block. The float's "
        "index is the thread's number in the whole grid, which counts the threads of the "
        "blocks before this one.",
        "i = (the blocks before this one) times (threads per block) plus (the thread's number "
        "in its block); then ramp.3's guard, then the scaling.",
        "i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x  # the same as cuda.grid(1)",
    ),
    "ramp.5": (
        "A launch is kernel[blocks, threads](arguments): you choose the threads per block (a "
        "multiple of 32, at most 1024) and just enough blocks that every float has a thread.",
        "Fix threads (256, say); blocks is n divided by threads, rounded up, not down; then "
        "launch scale_blocks with those two numbers and its four arguments.",
        "blocks = (n + threads - 1) // threads  # rounded up: the last block may be partial",
    ),
    "ramp.6": (
        "A 2-D grid gives each thread two numbers: x along the row (the column h) and y along "
        "the tokens (the row t). The grid is rounded up to whole blocks in both directions, "
        "so both need a guard.",
        "Take h and t from the 2-D grid index; if both are inside the array, the flat index "
        "of the element is t * hidden + h, and the weight is indexed by the column alone.",
        "h, t = cuda.grid(2)  # x: the column, y: the token\n"
        "if t < tokens and h < hidden:",
    ),
    "ramp.7": (
        "Ramp.6's 2-D grid, but each input is indexed by one coordinate only: the position "
        "by the token, the frequency by the pair. That is broadcasting.",
        "Take j (x, along the pairs) and t (y, along the tokens) from cuda.grid(2); guard "
        "both; the element at t * pairs + j is the token's position times the pair's "
        "frequency. Convert the int32 position to float32 first, or the product is computed "
        "in float64.",
        "out[t * pairs + j] = float32(positions[t]) * inv_freq[j]",
    ),
    "ramp.8": (
        "One thread per float. Each pair (2p, 2p + 1) turns by a quarter turn: the new first "
        "float is minus the old second one, the new second float is the old first one. A "
        "thread must find out whether its float is the first or the second of its pair.",
        "i = cuda.grid(1) (the rows are whole blocks: no guard). An even i is a pair's first "
        "float and takes its value from the float after it, negated; an odd i takes the float "
        "before it.",
        "if i % 2 == 0:  # the first float of its pair\n"
        "    out[i] = -x[i + 1]",
    ),
    "ramp.9": (
        "Two phases. Every thread first stores its own float of the row in a shared array; "
        "then, once the whole block has stored, each thread reads its partner from shared "
        "memory. Half-split pairs are (j, j + hidden / 2).",
        "row = cuda.shared.array(64, float32); j = cuda.threadIdx.x, h = half the block, "
        "start = the row's first float; store x[start + j] into row[j]; a barrier; then a "
        "thread of the first half writes minus its partner from the second half, a thread of "
        "the second half its partner from the first.",
        "cuda.syncthreads()  # every float of the row is stored before any is read\n"
        "out[start + j] = -row[j + h]  # j < h; the second half reads row[j - h]",
    ),
    "ramp.10": (
        "Each thread squares its float into a shared array; one thread then adds up the "
        "row's squares, but only after all of them are stored.",
        "squares = cuda.shared.array(64, float32); each thread stores the square of its float "
        "of row blockIdx.x; a barrier; then thread 0 alone adds the blockDim.x squares in a "
        "loop and writes out[blockIdx.x]. (A tree, halving the active threads at each step, "
        "works too, with a barrier at every step.)",
        "for k in range(cuda.blockDim.x):  # thread 0, after cuda.syncthreads()\n"
        "    total += squares[k]",
    ),
    "ramp.11": (
        "The 32 lanes of a warp can read each other's values with a shuffle. In a butterfly, "
        "every lane adds the value of the lane whose number differs from its own in one bit; "
        "after five such steps (bits 16, 8, 4, 2, 1) every lane holds the warp's sum.",
        "v = x[i] with i = cuda.grid(1); m = 16; while m > 0: add the value that lane "
        "(your lane XOR m) holds, then halve m; finally out[i] = v. Every lane runs every "
        "step: no if around the shuffles.",
        "v += cuda.shfl_xor_sync(0xFFFFFFFF, v, m)  # m = 16, 8, 4, 2, 1",
    ),
    "ramp.12": (
        "One thread per token computes the whole dot product of its two rows of d floats, "
        "with a loop. The grid is rounded up to whole blocks: guard the token.",
        "t = cuda.grid(1); if t < tokens: start a float32 total at 0, loop i over the d "
        "floats of the head adding q's float times k's float (both at t * d + i), then "
        "write out[t].",
        "total += q[t * d + i] * k[t * d + i]",
    ),
    "ramp.13": (
        "A block computes an 8 x 8 tile of scores and needs 8 queries and 8 keys of 8 floats "
        "each. Each of its 64 threads loads one float of each into shared memory, the block "
        "waits, and then each thread computes its own dot product from the shared tiles.",
        "One shared array (2, 8, 8) holds both tiles. Thread (tx, ty) loads float tx of the "
        "block's query ty into tiles[0] and float tx of the block's key ty into tiles[1] (the "
        "block's first query is 8 blockIdx.y, its first key 8 blockIdx.x); a barrier; a loop "
        "over the 8 floats of a head; write at the query's row and the key's column of out.",
        "total += tiles[0, ty, i] * tiles[1, tx, i]  # query ty of the tile . key tx of the tile",
    ),
    "ramp.14": (
        "Offset i is the sum of the lengths before sequence i. With 32 threads and n <= 31, "
        "one thread per offset can add up the lengths before its own: n + 1 offsets, the last "
        "one the total.",
        "i = cuda.threadIdx.x; a guard that keeps n + 1 threads (out has n + 1 entries); start "
        "a total at 0, add the lengths before sequence i in a loop, write out[i].",
        "for j in range(i):  # the sequences before sequence i\n"
        "    total += lengths[j]",
    ),
}
