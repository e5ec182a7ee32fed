"""Kernels the grader refuses (or that probe its rules); NOT in any ENTRIES.  Run:
   cd /tmp/learner_L && PYTHONPATH=/tmp/learner_L /work/venv/bin/python -W ignore set_l/refused_probes.py"""
import ropelab
import math
from numba import cuda, float32, uint64
from ropelab.grader import steps

def show(v):
    print("\n".join(l for l in str(v).splitlines() if not l.startswith(("hint", "stuck"))))
    print('-----')

@cuda.jit(fastmath=True)
def pair_angles_comment(out, positions, inv_freq, n_pairs, total_pairs):
    idx = cuda.grid(1)
    if idx < total_pairs:
        i = uint64(idx)
        token = i // n_pairs
        pair = i - token * n_pairs  # instead of i % n_pairs
        out[i] = float32(positions[token]) * inv_freq[pair]
show(steps.check(pair_angles_comment, "01.1", quiet=True))

FULL_MASK = 0xFFFFFFFF
@cuda.jit(fastmath=True)
def rms_norm_256_all_lanes_write(x, out, weight, rows, eps):
    partial = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * 256 + 2 * t
    x0 = x[i]; x1 = x[i + 1]
    ss = x0 * x0 + x1 * x1
    m = 16
    while m > 0:
        ss += cuda.shfl_xor_sync(FULL_MASK, ss, m)
        m //= 2
    partial[t // 32] = ss   # every lane stores the same value
    cuda.syncthreads()
    total = partial[0] + partial[1] + partial[2] + partial[3]
    scale = float32(1.0) / math.sqrt(total / float32(256.0) + eps)
    out[i] = x0 * scale * weight[2 * t]
    out[i + 1] = x1 * scale * weight[2 * t + 1]
show(steps.check(rms_norm_256_all_lanes_write, "06.2", quiet=True))

@cuda.jit(fastmath=True)
def block2d_for_range(x, out, positions, n_pairs, base):
    token = cuda.blockIdx.x
    pos = float32(positions[token])
    for p in range(cuda.threadIdx.x, n_pairs, cuda.blockDim.x):
        f = math.pow(base, -float32(p) / float32(n_pairs))
        th = pos * f
        c = math.cos(th); s = math.sin(th)
        a = 2 * (token * n_pairs + p)
        out[a] = x[a] * c - x[a + 1] * s
        out[a + 1] = x[a] * s + x[a + 1] * c
show(steps.check(block2d_for_range, "02.2", quiet=True))

@cuda.jit
def copy_2d_style(x, out):
    # 00.1 with a whole-array style: each thread its float, via threadIdx only of a block
    i = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    out[i] = x[i]
show(steps.check(copy_2d_style, "00.1", quiet=True))
