"""Hints for notebook 01's ladder (01.1 .. 01.4): (direction, structure, key line)."""

HINTS = {
    "01.1": (
        "The flat index is idx = token * n_pairs + pair: recover both with one division. Make "
        "the index unsigned (uint64) first, since a signed division gets floor fix-ups, and "
        "take the remainder without a second division.",
        "idx = cuda.grid(1); guard idx < total_pairs; i = uint64(idx); token = i // n_pairs; "
        "pair = what is left of i; out[i] = the token's position (as float32) times the "
        "pair's frequency.",
        "pair = i - token * n_pairs  # the remainder from the quotient: no %, no second division",
    ),
    "01.2": (
        "One thread per pair: total_pairs threads, in blocks of a size you choose.",
        "threads = 256, say; blocks = total_pairs divided by threads, rounded up; then "
        "pair_angles[blocks, threads](...) with its five arguments.",
        "blocks = (total_pairs + threads - 1) // threads",
    ),
    "01.3": (
        "inv_freq[pair] = 1 / base ** (2 pair / hidden), computed in float32 throughout: every "
        "constant and every integer must become float32 before it meets a float, or Numba "
        "promotes the arithmetic to float64.",
        "pair = cuda.grid(1); guard pair < n_pairs; the exponent 2 pair / hidden as a float32 "
        "division (hidden = 2 n_pairs); out[pair] = float32(1.0) / math.pow(base, exponent).",
        "exponent = float32(pair + pair) / float32(n_pairs + n_pairs)  # 2 pair / hidden, float32",
    ),
    "01.4": (
        "Steps 01.1 and 01.3 together, plus notebook 00's rotation: one thread per pair finds "
        "its token and pair with one unsigned division, computes its frequency with one pow, "
        "and turns its two floats.",
        "Guard; i = uint64(idx); token and pair as in 01.1; e = 2 i, the pair's first float; "
        "load x0 and x1; the frequency as in 01.3; the angle, its cos and sin; store the "
        "rotated pair at e and e + 1 (uint64(1) for the offset).",
        "angle = float32(positions[token]) * (float32(1.0) / math.pow(base, exponent))",
    ),
}
