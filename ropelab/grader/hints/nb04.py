"""Hints for notebook 04's ladder (04.1 .. 04.5): (direction, structure, key line)."""

HINTS = {
    "04.1": (
        "Notebook 01's flat kernel with the pow gone: the host has already computed every "
        "pair's frequency, so the kernel reads it from inv_freq.",
        "Guard; i = uint64(idx); token = i // n_pairs and pair = the remainder; e = 2 i; the "
        "angle from the token's position and the table; cos and sin; rotate x[e] and x[e + 1] "
        "into out.",
        "angle = float32(positions[token]) * inv_freq[pair]  # int32 * float32 would be float64",
    ),
    "04.2": (
        "Two phases. First the whole block copies the table into shared memory, each thread a "
        "few entries; then, after a barrier that every thread of the block reaches, step "
        "04.1's rotation reads the frequency from the shared table.",
        "table = cuda.shared.array(TABLE_CAPACITY, float32); k starts at the thread's number "
        "(uint64) and steps by blockDim.x while k < n_pairs, copying entry k; the barrier; "
        "only then idx = cuda.grid(1), the guard and 04.1's body reading table[pair]. The "
        "guard comes after the barrier: threads past the last pair still help copy and still "
        "reach the barrier.",
        "table[k] = inv_freq[k]  # in the while k < n_pairs loop, k += blockDim.x\n"
        "cuda.syncthreads()  # before the guard: every thread of the block reaches it",
    ),
    "04.3": (
        "Step 04.1's kernel with no transcendental math: the cos and sin of every (position, "
        "pair) are already in two float32 tables. A table's row is the token's position, not "
        "the token's number.",
        "Guard; token and pair from i = uint64(idx) as in 04.1; e = 2 i; the row "
        "pos = uint64(positions[token]) (positions are never negative); c and s read from the "
        "two caches at [row, pair]; rotate x[e] and x[e + 1].",
        "c = cos_cache[pos, pair]  # pos = uint64(positions[token]); s from sin_cache likewise",
    ),
    "04.4": (
        "Think in slots: a head of head_dim floats has half_dim slots, one thread each. A slot "
        "below n_pairs rotates a pair whose first float is j * step from the head's start and "
        "whose second is partner after it; a slot past the rotated dims copies two floats.",
        "Guard idx < total_slots; i = uint64(idx); head_row = i // half_dim (token * heads + "
        "head); j = what is left of i; first = 2 head_row half_dim; if j < n_pairs: the two "
        "floats a and b, the angle from the token's position (the token is head_row // heads) "
        "and inv_freq[j], the rotation; else copy floats first + 2j and first + 2j + 1.",
        "a = first + j * step\n"
        "b = a + partner  # (step, partner): (2, 1) interleaved, (1, n_pairs) half-split",
    ),
    "04.5": (
        "Compute on the host everything the kernel takes from the shape, in the types it "
        "takes: uint64 for the index arguments, a plain int for total_slots. Then one thread "
        "per slot.",
        "half_dim = head_dim // 2; n_pairs = inv_freq.size; total_slots = tokens heads "
        "half_dim; step and partner from the layout; threads = 128, say; blocks rounded up; "
        "launch rope_freq_table_heads with uint64(...) around heads, half_dim, n_pairs, step "
        "and partner.",
        "step, partner = (2, 1) if interleave else (1, n_pairs)",
    ),
}
