"""The CUDA C++ twin of ropelab's fused QK-RMSNorm + RoPE (ropelab.kernels.fused_qknorm_rope at
its default mapping), written to compare numba's code generation with nvcc-style C++ on the
same algorithm: a group of G lanes per (token, head) -- 32 for float32, 16 (two heads per
warp) for bfloat16 and float16 --, each lane moving its E = HEAD_DIM / G elements as one run
(GPT-J, NeoX by shuffle) or as two runs of E / 2, one in each half of the head (SPLIT NeoX:
both elements of every pair in the lane), with the widest accesses that divide a run; a
shuffle butterfly inside the group for the sum of squares; the float32 inverse-frequency
table (128-bit loads of a lane's 4 frequencies when every dim rotates); one __sincosf per
pair (per slot for shuffled NeoX partners); and, when every dim rotates (FULL), the norm's
scale and the attention factor folded into cos and sin.  Same grid and block as the numba
kernel (blockIdx.x * blockDim.y + threadIdx.y the token, blockIdx.y * warps + warp the warp)
and the same scalar arguments, plus the token count the numba kernel reads from positions'
shape.  16-bit packing is one cvt.rn.{bf16x2,f16x2}.f32 per two elements, as numba's build
emits; the source needs no CUDA header and compiles with bare NVRTC.  qkv, q_weight and
k_weight must start on 16-byte boundaries (fresh allocations do).
"""

from __future__ import annotations

import numpy as np

from ... import check as ropelab_check
from ...tolerance import fused_atol
from .optional import available
from .sources import FUSED_TWIN_SOURCE

NVRTC_OPTIONS = ("--use_fast_math", "-std=c++17")


# storage -> (C++ storage type, bytes per element, lanes per head at the default mapping)
FUSED_TWIN_STORAGE = {"float32": ("F32", 4, 32), "bfloat16": ("Bf16", 2, 16),
                      "float16": ("Half", 2, 16)}


def fused_twin_name(storage: str, head_dim: int, interleave: bool, full: bool = True) -> str:
    """The template instantiation of the twin for one case (a CuPy/NVRTC name expression):
    the numba kernel's mapping (:func:`ropelab.kernels.fused_qknorm_rope.neox_split`) at
    ``rotary_dim == head_dim`` (``full``) or below it."""
    from ...kernels.fused_qknorm_rope import split_fits

    kind, item, lanes = FUSED_TWIN_STORAGE[storage]
    split = split_fits(interleave, full, storage)
    flag = lambda b: "true" if b else "false"  # noqa: E731
    return (f"fused_qknorm_rope_twin<{kind}, {item}, {head_dim}, {lanes}, {flag(interleave)}, "
            f"{flag(split)}, {flag(full)}>")


def fused_twin_names(head_dims=(64, 128, 256)) -> list[str]:
    return [fused_twin_name(st, d, inter, full) for st in FUSED_TWIN_STORAGE for d in head_dims
            for inter in (True, False) for full in (True, False)]


def compile_fused_twin_ptx(names=None, arch: str = "compute_90") -> dict:
    """{name expression: PTX} through NVRTC (cuda-bindings), no GPU needed: a compile check of
    :data:`FUSED_TWIN_SOURCE` with the options CuPy uses for it."""
    names = list(names or fused_twin_names())
    ptx, lowered = _compile_twin_module(names, arch)
    return {n: _ptx_entry(ptx, lowered[n]) for n in names}


def _compile_twin_module(names, arch: str = "compute_90") -> tuple[str, dict]:
    """(the whole PTX module, {name expression: mangled name}) of the twin's instantiations."""
    from cuda.bindings import nvrtc

    def ok(result):
        err, *rest = result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise RuntimeError(f"NVRTC: {err}")
        return rest[0] if len(rest) == 1 else rest

    prog = ok(nvrtc.nvrtcCreateProgram(FUSED_TWIN_SOURCE.encode(), b"fused_twin.cu", 0, [], []))
    try:
        for n in names:
            ok(nvrtc.nvrtcAddNameExpression(prog, n.encode()))
        opts = [o.encode() for o in NVRTC_OPTIONS] + [f"--gpu-architecture={arch}".encode()]
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            size = ok(nvrtc.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            ok(nvrtc.nvrtcGetProgramLog(prog, log))
            raise RuntimeError(f"NVRTC could not compile the fused twin:\n{log.decode(errors='replace')}")
        size = ok(nvrtc.nvrtcGetPTXSize(prog))
        ptx = b" " * size
        ok(nvrtc.nvrtcGetPTX(prog, ptx))
        ptx = ptx.decode().rstrip("\x00")
        lowered = {n: ok(nvrtc.nvrtcGetLoweredName(prog, n.encode())).decode() for n in names}
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return ptx, lowered


def twin_sass_counts(names) -> dict:
    """{name expression: SASS counts} of the twin (:func:`ropelab.measure.census.counting.count_sass`),
    compiled here without a GPU: NVRTC to PTX, nvJitLink to a cubin, ``nvdisasm`` (the ``sass``
    extra).  Beside the numba kernel's census (``ropelab census --sass``) it shows what the two
    compilers made of one algorithm."""
    import re

    from ..census import count_sass, ptx_to_sass

    module, lowered = _compile_twin_module(list(names))
    sass = ptx_to_sass(module)
    # nvdisasm prints one ".text.<mangled name>" section per kernel.
    sections = re.split(r"^\s*\.section\s+\.text\.([^,\s]+),.*$", sass, flags=re.M)
    bodies = dict(zip(sections[1::2], sections[2::2]))
    return {n: count_sass(bodies[lowered[n]]) for n in names}


def _ptx_entry(ptx: str, mangled: str) -> str:
    """The body of one ``.entry`` of a PTX module."""
    start = ptx.index(f".entry {mangled}(")
    nxt = ptx.find(".entry ", start + 1)
    return ptx[start:nxt if nxt >= 0 else len(ptx)]


_TWIN_FUNCTIONS = {}


def _twin_function(name: str):
    """The compiled twin for one name expression (one small NVRTC module each, made once)."""
    if name not in _TWIN_FUNCTIONS:
        import cupy

        mod = cupy.RawModule(code=FUSED_TWIN_SOURCE, options=NVRTC_OPTIONS, name_expressions=[name])
        _TWIN_FUNCTIONS[name] = mod.get_function(name)
    return _TWIN_FUNCTIONS[name]


class TwinCase:
    """The twin on one set of random inputs, on the GPU: ``launch()`` runs it in place.

    Inputs are :func:`ropelab.check.random_inputs` (as the numba rows of the bench use), held as
    CuPy arrays (bfloat16 as uint16 bits); grid, block and scalar arguments are the numba
    kernel's own (:mod:`ropelab.kernels.fused_qknorm_rope`) at the twin's lanes per head.
    """

    def __init__(self, tokens, heads, head_dim, rotary_dim, storage, interleave, seed=0,
                 max_position=4096):
        import cupy

        from ...ops import fused
        from ...ops.arrays import inspect_array
        from ...kernels import fused_qknorm_rope as kmod

        hq, hk, hv = heads
        rng = np.random.default_rng(seed)
        self.host = ropelab_check.random_inputs(rng, tokens, heads, head_dim, storage, max_position)
        self.problem = fused.build_problem(inspect_array(self.host[0], "qkv"), num_heads_q=hq,
                                           num_heads_k=hk, num_heads_v=hv, head_dim=head_dim,
                                           rotary_dim=rotary_dim, interleave=interleave)
        lanes = FUSED_TWIN_STORAGE[storage][2]
        if not kmod.neox_fits(self.problem, lanes, kmod.neox_split(self.problem)):
            raise ValueError(f"the twin needs rotary_dim a multiple of {2 * head_dim // lanes} "
                             f"for NeoX; got {rotary_dim}")
        self.qkv, self.q_weight, self.k_weight, self.positions = (cupy.asarray(a) for a in self.host)
        self.inv_freq = cupy.asarray(self.problem.inv_freq.astype(np.float32))
        self.fn = _twin_function(fused_twin_name(storage, head_dim, interleave,
                                                 self.problem.rotary_dim == head_dim))
        self.grid, self.block = kmod.launch_config(self.problem, None, 32 // lanes)
        self.args = (self.qkv, self.q_weight, self.k_weight, self.positions, self.inv_freq,
                     *kmod.scalar_args(self.problem, lanes), np.uint32(tokens))

    def launch(self):
        self.fn(self.grid, self.block, self.args)


def check_twin(shapes=None, storages=("bfloat16", "float16", "float32"),
               layouts=(True, False), seed: int = 0) -> list:
    """The CUDA C++ twin against the float64 reference, with the fused kernel's tolerance
    (:func:`ropelab.fused.tolerance`, fast-math); needs a GPU and CuPy.

    ``shapes``: :class:`ropelab.shapes.FusedShape` values (default: the production shapes).
    Returns :class:`ropelab.verdict.CheckRow` rows (``passed`` says if each is within budget);
    ``tests/test_gpu_public_path.py`` runs it on the GPU.
    """
    from ... import reference
    from ...shapes import PRODUCTION_SHAPES
    from ...target import SIMULATED
    from ...verdict import CheckRow

    if SIMULATED or not available()["cupy"]:
        raise RuntimeError("check_twin needs a GPU and CuPy (pip install -e '.[baselines]')")
    rows = []
    for shape in shapes or PRODUCTION_SHAPES.values():
        heads = (shape.heads_q, shape.heads_k, shape.heads_v)
        for storage in storages:
            for inter in layouts:
                case = TwinCase(shape.tokens, heads, shape.head_dim, shape.rotary_dim, storage,
                                inter, seed=seed)
                qkv, wq, wk, pos = case.host
                kw = dict(num_heads_q=heads[0], num_heads_k=heads[1], num_heads_v=heads[2],
                          head_dim=shape.head_dim, rotary_dim=shape.rotary_dim, interleave=inter)
                dq, dwq, dwk = (ropelab_check.decode(a, storage) for a in (qkv, wq, wk))
                want = reference.fused_qknorm_rope(dq, q_weight=dwq, k_weight=dwk, positions=pos,
                                                   **kw)
                normed = reference.fused_qknorm_rope(dq, q_weight=dwq, k_weight=dwk,
                                                     positions=np.zeros_like(pos), **kw)
                case.launch()
                got = case.qkv.get()
                qk = (heads[0] + heads[1]) * shape.head_dim
                angle = float(np.abs(pos).max()) * float(case.problem.inv_freq.max())
                tol = fused_atol(float(np.abs(normed[:, :qk]).max()),
                                      float(np.abs(want[:, :qk]).max()), angle, storage,
                                      fastmath=True)
                err = float(np.abs(ropelab_check.decode(got, storage)[:, :qk] - want[:, :qk]).max())
                v_same = bool(np.array_equal(got[:, qk:].view(np.uint8), qkv[:, qk:].view(np.uint8)))
                rows.append(CheckRow("cuda_fused", "gpu", (shape.name,),
                                     f"{'gptj' if inter else 'neox'},rot={shape.rotary_dim}",
                                     err, tol, storage, v_same))
    return rows
