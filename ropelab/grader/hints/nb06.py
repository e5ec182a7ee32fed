"""Hints for notebook 06's ladder (06.1 .. 06.5): (direction, structure, key line)."""

HINTS = {
    "06.1": (
        "One warp per row of 64 floats, two floats per lane. Each lane squares its two floats; "
        "a shuffle butterfly then gives every lane the row's sum, from which every lane "
        "computes the same scale. The if that skips warps with no row is the same for all 32 "
        "lanes of a warp, so every lane reaches every shuffle.",
        "lane = threadIdx.x % 32; row = the warp's number in the grid (blocks before this one "
        "times warps per block, plus threadIdx.x // 32); if row < rows: first = row * 64 + "
        "2 lane; a and b; ss = the sum of their squares; five butterfly steps; scale = 1 / "
        "sqrt(ss / 64 + eps); out = a and b times scale times their weights.",
        "ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)  # once each for m = 16, 8, 4, 2, 1",
    ),
    "06.2": (
        "A row of 256 floats takes four warps, and a warp's butterfly gives only the sum of "
        "its own 64 floats. The four sums meet in shared memory, behind a barrier.",
        "partial = cuda.shared.array(4, float32); t, lane = t % 32, warp = t // 32; first = "
        "blockIdx.x * 256 + 2 t; the squares of the thread's two floats; the butterfly of "
        "06.1; one lane per warp stores the warp's sum; the barrier, reached by every thread; "
        "total = the four partials; scale and weights as in 06.1, with 256 for 64.",
        "if lane == 0:\n"
        "    partial[warp] = ss  # then cuda.syncthreads() before any thread adds the four",
    ),
    "06.3": (
        "Step 06.1's norm, then notebook 00's rotation of the lane's pair: normalize first "
        "(weights included), then rotate the normalized floats.",
        "lane, row and the guard as in 06.1; a and b; the butterfly for ss; the scale; a and b "
        "normalized and weighted; the angle of the lane's pair; out[first] and out[first + 1] "
        "from the rotation of the normalized a and b.",
        "angle = float32(positions[row]) * inv_freq[lane]  # lane l holds pair l",
    ),
    "06.4": (
        "One warp per head of the packed buffer. The warp finds its token and which head of "
        "the token it is; Q and K heads are normalized (each with its own weight) and rotated, "
        "V heads copied. The branch is the same for all lanes of the warp, so the shuffles "
        "stay warp-uniform.",
        "lane; w = the warp's number in the grid; if w < total_warps: unit = uint64(w); the "
        "token and the head within it by one division; first = unit * 64 + 2 lane; a and b; "
        "if the head is Q or K: its weight, the butterfly, the scale, the rotation by the "
        "token's position (06.3); else copy a and b.",
        "token = unit // heads_per_token  # head = unit - token * heads_per_token\n"
        "weight = q_weight if head < heads_q else k_weight  # under if head < heads_q + heads_k",
    ),
    "06.5": (
        "One warp (32 threads) per head of every token, a few warps per block. The kernel "
        "takes uint64 head counts, an int total_warps and a float32 eps.",
        "heads_per_token = the three head counts added; total_warps = tokens times it; 4 warps "
        "a block (128 threads); blocks = total_warps / 4 rounded up; launch rope_fused_head "
        "with uint64(...) around heads_q, heads_k and heads_per_token, and float32(eps).",
        "blocks = (total_warps + warps_per_block - 1) // warps_per_block  # 32 threads a warp",
    ),
}
