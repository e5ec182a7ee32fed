"""Hints for notebook 05's ladder (05.1 .. 05.4): (direction, structure, key line)."""

HINTS = {
    "05.1": (
        "One thread per pair, and the pair's two floats share everything: one frequency (one "
        "pow), one angle, one cos and one sin.",
        "Guard; token and pair from i = uint64(idx) as in notebook 01; e = 2 i; the frequency "
        "with one pow of base; the angle from the token's position; c and s once; rotate x[e] "
        "and x[e + 1] with them.",
        "f = math.pow(base, exponent_step * float32(pair))  # exponent_step = -2 / hidden",
    ),
    "05.2": (
        "stride threads share a row, and thread j of a row owns slots j, j + stride, j + 2 "
        "stride, ... The frequencies of two slots stride apart differ by a constant factor, "
        "stride_ratio, so the thread needs one pow only: for its first slot.",
        "Guard idx < total_threads; i = uint64(idx); token = i // stride; j = what is left of "
        "i (the first slot); first = 2 token n_pairs; the position as float32; f = one pow for "
        "slot j; a while loop over the thread's slots that rotates floats first + 2j and the "
        "next by pos * f, and at the end of each turn steps f to the next slot's frequency and "
        "j to the next slot.",
        "f = f * stride_ratio  # slot j + stride's frequency, without a pow\n"
        "j += stride",
    ),
    "05.3": (
        "Five numbers depend on the shape only: compute them on the host. stride = "
        "ceil(n_pairs / 4), exponent_step = -2 / hidden, and stride_ratio = base ** "
        "(exponent_step * stride) in Python's float64, rounded to float32 once, when you pass "
        "it.",
        "n_pairs = hidden // 2; stride rounded up; total_threads = tokens * stride; "
        "exponent_step and stride_ratio as Python floats; threads = 64, say; blocks rounded "
        "up; launch my_rope_strided with uint64 around n_pairs and stride, total_threads as an "
        "int, and float32 around base, exponent_step and stride_ratio.",
        "stride_ratio = base ** (exponent_step * stride)  # float64; float32(...) at the launch",
    ),
    "05.4": (
        "Step 05.2's recurrence with notebook 04's head layout: stride threads share a head "
        "instead of a row, and a slot's two floats are step and partner apart.",
        "Guard; i = uint64(idx); head_row = i // stride (token * heads + head); j = what is "
        "left; first = 2 head_row half_dim; the position of token head_row // heads; one pow "
        "for slot j; while j < half_dim: floats a and b, rotate them by pos * f, then step f "
        "and j as in 05.2.",
        "a = first + j * step\n"
        "b = a + partner  # (step, partner): (2, 1) interleaved, (1, half_dim) half-split",
    ),
}
