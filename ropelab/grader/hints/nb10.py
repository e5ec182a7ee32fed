"""Hints for notebook 10's ladder (10.1 .. 10.4): (direction, structure, key line)."""

HINTS = {
    "10.1": (
        "A scatter reads in order and writes wherever the map says. Thread i copies one float "
        "of k; its token's slot says which cache row receives it, and a negative slot means "
        "padding: nothing is written.",
        "row = heads * head_dim; i from cuda.grid(1); guard i < tokens * row; t = i // row "
        "and c = i % row; slot = slot_mapping[t]; only when slot >= 0, the store into the "
        "slot's row at float c.",
        "if slot >= 0:  # a negative index would wrap to the cache's last row\n"
        "    out[slot * row + c] = k[i]",
    ),
    "10.2": (
        "Work on the float32's bits. e4m3 keeps 3 of the 23 mantissa bits and a 4-bit exponent "
        "of bias 7 (float32's is 127): rebias, then round the 20 dropped bits to nearest even. "
        "Three ranges need their own rule: below 2**-6 (subnormals), at or past 448 "
        "(saturate), NaN.",
        "v = x[i] * inv_scale; b = float_bits(v); sign = (b >> 24) & 0x80; a = b & 0x7FFFFFFF; "
        "the normal code from a; the subnormal code from the float32 sum |v| + 2**14; pick "
        "one by a's range, 0x7E when a >= the bits of 448.0 (0x43E00000), 0x7F when a > "
        "0x7F800000 (NaN); out[i] = float32(code | sign).",
        "normal = (a - uint32(120 << 23) + uint32(0x7FFFF) + ((a >> 20) & 1)) >> 20\n"
        "sub = float_bits(abs(v) + float32(16384.0)) - uint32(0x46800000)  # multiples of 2**-9",
    ),
    "10.3": (
        "The K warp is notebook 06's warp per head, with one change at the end: the rotated "
        "head goes to its slot's row of the cache, not back into qkv. V needs no arithmetic: "
        "copy it into the V half. A padding token's warp stores nothing.",
        "lane = threadIdx.x % 32; token = the warp's number in the grid; return if token >= "
        "tokens or slot < 0 (the whole warp: it stays uniform for the shuffles); k0, k1 from "
        "qkv at token * 256 + 128 + 2 lane; the butterfly on k0*k0 + k1*k1; scale; weight; "
        "rotate by float32(positions[token]) * inv_freq[lane]; two stores into the K row, two "
        "copies into the V row.",
        "scale = float32(1.0) / math.sqrt(ss / float32(64.0) + float32(1e-6))\n"
        "out[(num_slots + slot) * 64 + 2 * lane] = qkv[token * 256 + 192 + 2 * lane]  # V, copied",
    ),
    "10.4": (
        "The batch is the requests' new tokens one after another. A token's position is where "
        "it sits in its own request's sequence: the request's cached tokens come first. The "
        "grid covers every token of the batch, four per block.",
        "tokens = sum(query_lens); positions = for each request r, context_lens[r] + 0, 1, ... "
        "query_lens[r] - 1, concatenated (the prefix sum of query_lens says where each "
        "request starts); to the device as int32; write_kv[ceil(tokens / 4), 128](qkv, "
        "k_weight, positions, slot_mapping, inv_freq, out, tokens, num_slots).",
        "positions = np.concatenate([np.arange(c, c + q) for q, c in zip(query_lens, "
        "context_lens)]).astype(np.int32)",
    ),
}
