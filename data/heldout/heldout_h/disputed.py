"""Kernels kept out of ENTRIES that I believe are correct but that the grader refuses here.

Only one, and it is a tooling limit more than a grading error: the same decode-and-search
e4m3 rounding as learner_10's passing `decode_binary_search`, written with a
@cuda.jit(device=True) helper.  The grader says it is right on the simulator, then fails it
because the PTX census cannot compile a kernel that calls a device function on a machine with no
CUDA driver ("numba-cuda compiles a call inside a kernel as a helper that needs a CUDA driver").
README does say a census that cannot be taken fails, so this is documented behaviour.
"""
import ropelab  # noqa: F401

from numba import cuda, float32, int32, uint32

from ropelab.grader.steps.nb10 import float_bits


@cuda.jit(device=True)
def _e4m3_value(k):
    # the magnitude of the positive e4m3 code k (0 .. 126), built exactly in float32
    if k < 8:
        return float32(k) * float32(0.001953125)  # k * 2**-9
    e = (k >> 3) - 7
    m = k & 7
    p = float32(1.0)
    while e > 0:
        p *= float32(2.0)
        e -= 1
    while e < 0:
        p *= float32(0.5)
        e += 1
    return p * (float32(1.0) + float32(m) * float32(0.125))


@cuda.jit
def e4m3_codes_search_helper(x, out, inv_scale, n):
    i = cuda.grid(1)
    if i >= n:
        return
    v = x[i] * inv_scale
    sign = int32((float_bits(v) >> uint32(31)) & uint32(1)) * 128
    if v != v:
        out[i] = float32(127 + sign)
        return
    mag = abs(v)
    if mag >= float32(448.0):
        out[i] = float32(126 + sign)
        return
    lo = 0
    hi = 126
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if _e4m3_value(mid) <= mag:
            lo = mid
        else:
            hi = mid
    below = mag - _e4m3_value(lo)
    above = _e4m3_value(hi) - mag
    if below < above:
        code = lo
    elif above < below:
        code = hi
    else:
        code = lo if (lo & 1) == 0 else hi
    out[i] = float32(code + sign)


DISPUTED = [
    ("10.2", "decode_search_device_helper", e4m3_codes_search_helper,
     "right on the simulator (the grader says so); refused only because the census cannot "
     "compile a device-function call without a CUDA driver"),
]
