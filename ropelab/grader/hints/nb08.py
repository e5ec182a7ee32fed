"""Hints for notebook 08's ladder (08.1 .. 08.4): (direction, structure, key line)."""

HINTS = {
    "08.1": (
        "The gradient of a rotation is the rotation back: the same angle, the matrix "
        "transposed, so only the signs of the sine terms change. One warp per head, lane l "
        "holding pair l.",
        "lane = threadIdx.x % 32; row = the warp's number in the grid; if row < rows: first = "
        "row * 64 + 2 lane; g0 and g1 from dy; the angle of pair lane at the row's position; "
        "c and s; the two floats of R(theta)^T (g0, g1) into out.",
        "out[first] = g0 * c + g1 * s  # R(theta)^T: the forward's turn, undone\n"
        "out[first + 1] = -g0 * s + g1 * c",
    ),
    "08.2": (
        "dx = (dn - n * mean(dn * n)) / r. The mean needs the whole head: each lane adds its "
        "two products dn * n, and a warp butterfly sums them, as the forward summed squares.",
        "lane, row and the guard as in 08.1; d0, d1 from dn and n0, n1 from n at first and "
        "first + 1; s = d0 n0 + d1 n1; the five-step butterfly on s; mean = s / 64; both "
        "floats of out from the formula with r[row].",
        "out[first] = (d0 - n0 * mean) / r[row]  # mean = the butterfly's sum / 64",
    ),
    "08.3": (
        "A block of 256 threads is four groups of 64, thread t owning column t % 64. Each "
        "thread adds dz * n down the rows it owns; then the four groups' sums meet in shared "
        "memory, behind a barrier, and the first 64 threads write the block's partial row.",
        "column = t % 64; row starts at blockIdx.x * 4 + t // 64; a float32 accumulator; a "
        "while loop over row < rows adding dz * n at row * 64 + column, then stepping row; "
        "part = cuda.shared.array(256, float32); part[t] = the sum; the barrier; if t < 64: "
        "out at blockIdx.x * 64 + t = the four groups' entries of column t.",
        "row += 4 * cuda.gridDim.x  # the next row this thread owns (four groups a block)\n"
        "out[cuda.blockIdx.x * 64 + t] = part[t] + part[64 + t] + part[128 + t] + part[192 + t]",
    ),
    "08.4": (
        "Two launches. Stage one writes a partial row of 64 floats per block into a buffer you "
        "allocate on the device; stage two (given) adds those rows into out in a fixed order. "
        "Cap stage one's grid so that stage two has few rows to add.",
        "rows = tokens * heads; blocks = ceil(rows / 4), capped (at 1024, say); a device "
        "buffer of blocks * 64 float32; dw_partials[blocks, 256](dz, n, partials, rows); then "
        "reduce_partials_kernel[2, REDUCE_THREADS](partials, out): a block per 32 columns.",
        "partials = cuda.device_array(blocks * 64, np.float32)  # the rows stage one writes",
    ),
}
