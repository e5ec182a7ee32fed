"""The public fused QK-RMSNorm + RoPE: ``ropelab.fused_qknorm_rope``, its problem and its checks.

Everything the caller passes is checked here, on metadata and small host arrays, before any
data moves or any kernel runs; a bad call raises :class:`ropelab.RopeInputError` (a
``ValueError``) or ``TypeError`` and leaves ``qkv`` untouched.  The kernel itself lives in
:mod:`ropelab.kernels.fused_qknorm_rope`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import cuda

from . import bf16, reference, scaling
from .arrays import ArrayInfo, inspect_array, overlaps, to_device_flat
from .kernels import fused_qknorm_rope as _kernel
from .problem import RopeInputError, check_base
from .problem import check_rotary_dim as check_rope_rotary_dim
from .tolerance import F32_EPS, rope_atol
from .sim.warp import install as _install_warp_emulation


def _fail(msg: str):
    raise RopeInputError(msg)


@dataclass(frozen=True)
class FusedProblem:
    """One validated ``fused_qknorm_rope`` call: plain numbers and the float64 frequencies."""

    tokens: int
    heads_q: int
    heads_k: int
    heads_v: int
    head_dim: int
    rotary_dim: int
    interleave: bool
    storage: str  # "float32", "float16" or "bfloat16"
    eps: float
    base: float
    attention_factor: float = 1.0
    inv_freq: np.ndarray = field(default=None, repr=False, compare=False)  # float64 [rotary_dim/2]

    @property
    def row(self) -> int:
        return (self.heads_q + self.heads_k + self.heads_v) * self.head_dim

    def inv_freq_f32(self) -> np.ndarray:
        """The kernel's frequency table: the float64 frequencies rounded once to float32."""
        return self.inv_freq.astype(np.float32)


# ---- validation --------------------------------------------------------------------------------

def _int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if int(value) < minimum:
        _fail(f"{name} must be >= {minimum}, got {int(value)}")
    return int(value)


def _storage_of(dtype: np.dtype) -> str | None:
    for name, dt in _kernel.STORAGES.items():
        if dtype == dt:
            return name
    return None


def check_qkv(info: ArrayInfo, heads: tuple[int, int, int], head_dim: int) -> tuple[int, str]:
    """(tokens, storage) of a valid ``qkv`` or raise."""
    storage = _storage_of(info.dtype)
    if storage is None:
        raise TypeError(f"qkv must be float32, float16, or uint16 holding bfloat16 bits; got "
                        f"{info.dtype}")
    if len(info.shape) != 2:
        _fail(f"qkv must be 2-D [tokens, (heads_q + heads_k + heads_v) * head_dim], got shape "
              f"{info.shape}")
    if info.nbytes and not info.c_contiguous:  # NumPy gives empty arrays zero strides
        _fail("qkv must be C-contiguous (rows [Q | K | V] back to back); pass a contiguous array")
    tokens, width = info.shape
    hq, hk, hv = heads
    if width != (hq + hk + hv) * head_dim:
        _fail(f"qkv rows have {width} elements but (num_heads_q + num_heads_k + num_heads_v) * "
              f"head_dim = ({hq} + {hk} + {hv}) * {head_dim} = {(hq + hk + hv) * head_dim}")
    if storage == "bfloat16" and info.ptr % 4 and info.on_device:
        _fail("bfloat16 qkv must start at a 4-byte aligned address (the kernel moves two "
              "elements per 32-bit word); a fresh tensor is aligned, an odd-offset slice is not")
    if tokens * width > _kernel.MAX_ELEMENTS:
        _fail(f"qkv has {tokens * width} elements; the kernel's 32-bit indexing allows "
              f"{_kernel.MAX_ELEMENTS}")
    return tokens, storage


def check_weight(name: str, info: ArrayInfo, head_dim: int, dtype: np.dtype) -> None:
    if info.shape != (head_dim,):
        _fail(f"{name} must have shape ({head_dim},) (one weight per dim of a head), got {info.shape}")
    if info.dtype != dtype:
        raise TypeError(f"{name} must have the dtype of qkv ({dtype}), got {info.dtype}")
    if not info.c_contiguous:
        _fail(f"{name} must be contiguous")


def check_positions(info: ArrayInfo, tokens: int) -> None:
    if info.shape != (tokens,):
        _fail(f"positions (SGLang's position_ids) must have shape ({tokens},), one per token; got "
              f"{info.shape}")
    if info.dtype != np.int32:
        raise TypeError(f"positions must be int32, got {info.dtype}")
    if info.nbytes and not info.c_contiguous:
        _fail("positions must be contiguous")


def check_rotary_dim(rotary_dim, head_dim: int, interleave: bool) -> int:
    rotary_dim = check_rope_rotary_dim(rotary_dim, head_dim)  # the checks plain RoPE makes
    per_lane = head_dim // _kernel.WARP
    if not interleave and rotary_dim % (2 * per_lane):
        _fail(f"with interleave=False (NeoX) rotary_dim must be a multiple of 2 * head_dim / 32 = "
              f"{2 * per_lane} so that each half of the rotated dims fills whole lanes; got "
              f"{rotary_dim}")
    return rotary_dim


def _finite(name: str, value, minimum: float | None = None) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(value) or (minimum is not None and value < minimum):
        _fail(f"{name} must be a finite number{f' >= {minimum}' if minimum is not None else ''}, "
              f"got {value}")
    return value


def build_problem(qkv_info: ArrayInfo, *, num_heads_q, num_heads_k, num_heads_v, head_dim,
                  eps=1e-6, base=10000.0, rotary_dim=None, interleave=True, yarn=None) -> FusedProblem:
    """Check every scalar argument and ``qkv``'s metadata; return the problem."""
    head_dim = _int("head_dim", head_dim, 1)
    if head_dim not in _kernel.HEAD_DIMS:
        _fail(f"head_dim {head_dim} is not supported: the kernel gives each of a warp's 32 lanes "
              f"head_dim / 32 elements and keeps interleaved pairs inside a lane, so head_dim must "
              f"be one of {', '.join(map(str, _kernel.HEAD_DIMS))}")
    hq = _int("num_heads_q", num_heads_q, 0)
    hk = _int("num_heads_k", num_heads_k, 0)
    hv = _int("num_heads_v", num_heads_v, 0)
    if hq + hk == 0:
        _fail("num_heads_q + num_heads_k must be at least 1: there is nothing to normalize")
    if not isinstance(interleave, (bool, np.bool_)):
        raise TypeError(f"interleave must be True or False, got {interleave!r}")
    tokens, storage = check_qkv(qkv_info, (hq, hk, hv), head_dim)
    rotary_dim = check_rotary_dim(rotary_dim, head_dim, bool(interleave))
    eps = _finite("eps", eps, 0.0)
    base = check_base(base)
    freqs, att = scaling.resolve(scaling.as_fused_yarn(yarn), rotary_dim=rotary_dim, base=base)
    return FusedProblem(tokens, hq, hk, hv, head_dim, rotary_dim, bool(interleave), storage, eps,
                        base, att, freqs)


def _small_on_device(obj, info: ArrayInfo):
    """A device copy/view of a small argument (weights, positions), host or device."""
    return to_device_flat(obj, info)


# ---- the public function -----------------------------------------------------------------------

def fused_qknorm_rope(qkv, *, num_heads_q, num_heads_k, num_heads_v, head_dim, q_weight, k_weight,
                      positions, eps=1e-6, base=10000.0, rotary_dim=None, interleave=True,
                      yarn=None, fastmath=True, warps_per_block=None, heads_per_warp=None):
    """RMSNorm every Q and K head of ``qkv``, then rotate it (RoPE), in place; return ``qkv``.

    Parameters
    ----------
    qkv : ``[tokens, (num_heads_q + num_heads_k + num_heads_v) * head_dim]``, C-contiguous
        Each row is ``[Q heads | K heads | V heads]``.  float32, float16, or ``uint16`` holding
        bfloat16 bit patterns (e.g. ``torch_tensor.view(torch.uint16)``; see
        :mod:`ropelab.bf16`).  A NumPy array (copied to the GPU, and its Q and K columns copied
        back) or a device array with ``__cuda_array_interface__`` (numba, CuPy, PyTorch),
        modified where it lies.  V is neither changed nor written.
    num_heads_q, num_heads_k, num_heads_v, head_dim : int
        ``head_dim`` one of 64, 128, ..., 512 (multiples of 64).
    q_weight, k_weight : ``[head_dim]``, same dtype as ``qkv``
        RMSNorm weights, one vector for all Q heads and one for all K heads.
    positions : int32 ``[tokens]``
        SGLang's ``position_ids``: any int32 values (negative ones rotate backwards).
    eps : float
        Added to ``mean(x**2)`` inside the square root (>= 0).
    base : float
        RoPE base (theta), > 1.
    rotary_dim : int, optional
        Rotate only the first ``rotary_dim`` dims of each head (default all); the rest are
        normalized only.  Even; with ``interleave=False`` a multiple of ``head_dim / 16``.
    interleave : bool
        True: pairs ``(2i, 2i+1)`` (GPT-J); False: ``(i, i + rotary_dim/2)`` (NeoX).
    yarn : :class:`ropelab.scaling.YaRN` or dict(factor, low, high[, attention_factor]), optional
        YaRN's frequency blend; the dict is SGLang's form (``YaRN.from_ramp``);
        ``attention_factor`` scales the rotated dims.
    fastmath : bool
        Approximate sin/cos/sqrt/division (SGLang uses ``__sincosf`` too).
    warps_per_block : int, optional
        Override the block size in warps (1 .. 32).
    heads_per_warp : int, optional
        1 (the course's mapping: one warp per token and head), 2 or 4 (a warp loads that many
        heads before computing: more bytes in flight, which 16-bit storage needs to approach the
        copy rate).  Default: ``kernels.fused_qknorm_rope.HEADS_PER_WARP[storage]`` (2 for 16-bit
        storage, 1 for float32, from the H200 measurements).

    Raises :class:`ropelab.RopeInputError` / ``TypeError`` before anything runs on bad input.
    """
    _install_warp_emulation()  # no-op on a GPU and after the first call
    qkv_info = inspect_array(qkv, "qkv")
    problem = build_problem(qkv_info, num_heads_q=num_heads_q, num_heads_k=num_heads_k,
                            num_heads_v=num_heads_v, head_dim=head_dim, eps=eps, base=base,
                            rotary_dim=rotary_dim, interleave=interleave, yarn=yarn)
    infos = {}
    for name, obj in (("q_weight", q_weight), ("k_weight", k_weight)):
        infos[name] = inspect_array(obj, name)
        check_weight(name, infos[name], problem.head_dim, qkv_info.dtype)
    infos["positions"] = inspect_array(positions, "positions")
    check_positions(infos["positions"], problem.tokens)
    for name, info in infos.items():
        if info.nbytes and overlaps(info, qkv_info):
            _fail(f"{name} overlaps qkv; the kernel writes qkv while it reads {name}")
    if not isinstance(fastmath, (bool, np.bool_)):
        raise TypeError(f"fastmath must be True or False, got {fastmath!r}")
    if warps_per_block is not None:
        warps_per_block = _int("warps_per_block", warps_per_block, 1)
        if warps_per_block > 32:
            _fail(f"warps_per_block must be at most 32 (1024 threads), got {warps_per_block}")
    if heads_per_warp is not None and (isinstance(heads_per_warp, bool)
                                       or not isinstance(heads_per_warp, (int, np.integer))
                                       or heads_per_warp not in _kernel.HEADS_PER_WARP_CHOICES):
        _fail(f"heads_per_warp must be one of {_kernel.HEADS_PER_WARP_CHOICES}, got {heads_per_warp!r}")
    if problem.tokens == 0:
        return qkv

    qkv_dev = to_device_flat(qkv, qkv_info)
    args = [_small_on_device(o, infos[n]) for n, o in
            (("q_weight", q_weight), ("k_weight", k_weight), ("positions", positions))]
    freq_dev = cuda.to_device(problem.inv_freq_f32())
    _kernel.launch(problem, qkv_dev, *args, freq_dev, fastmath=bool(fastmath),
                   warps_per_block=warps_per_block, heads_per_warp=heads_per_warp)
    if not qkv_info.on_device:
        qk = (problem.heads_q + problem.heads_k) * problem.head_dim
        result = qkv_dev.copy_to_host().reshape(qkv_info.shape)
        qkv[:, :qk] = result[:, :qk]  # V columns are left as they were, not rewritten
    return qkv


# ---- accuracy: tolerance, and a check at given shapes ------------------------------------------

STORAGE_UNIT = {"float32": 0.0, "float16": 2.0**-11, "bfloat16": 2.0**-8}


def tolerance(normed_max: float, out_max: float, angle: float, storage: str, *, fastmath: bool,
              attention_factor: float = 1.0) -> float:
    """Absolute tolerance for one output element of the fused kernel.

    ``normed_max`` is max |RMSNorm output| (before rotation), ``out_max`` max |final output| and
    ``angle`` the largest rotation angle, all from the float64 reference.  Budget:

    * the norm: float32 sum of up to 512 squares, a square root and a division, then two
      products, a few dozen ulps relative (``32 * 2**-24``); fast-math ``sqrt.approx`` and
      ``div.approx`` add about ``2**-21``;
    * the rotation: :func:`ropelab.tolerance.rope_atol` on the normalized values;
    * the final rounding to the storage dtype: half an ulp, at most ``2**-8`` (bfloat16) or
      ``2**-11`` (float16) of the value.
    """
    norm = normed_max * max(abs(attention_factor), 1.0) * (32 * F32_EPS + (2.0**-21 if fastmath else 0.0))
    rot = rope_atol(normed_max, angle, fastmath=fastmath, attention_factor=attention_factor)
    return norm + rot + out_max * STORAGE_UNIT[storage]


def decode(values: np.ndarray, storage: str) -> np.ndarray:
    """Stored values -> float64 (bfloat16 bits decoded exactly)."""
    if storage == "bfloat16":
        return bf16.to_float32(values).astype(np.float64)
    return np.asarray(values, dtype=np.float64)


def random_inputs(rng: np.random.Generator, tokens: int, heads: tuple[int, int, int], head_dim: int,
                  storage: str, max_position: int = 4096):
    """Host inputs in the storage dtype: (qkv, q_weight, k_weight, positions int32).

    qkv is N(0, 1) with a per-head offset of scale (so heads differ in RMS); weights are near 1.
    """
    hq, hk, hv = heads
    width = (hq + hk + hv) * head_dim
    scale = np.repeat(rng.uniform(0.25, 4.0, hq + hk + hv), head_dim)
    raw = rng.standard_normal((tokens, width)) * scale
    wq = rng.uniform(0.5, 1.5, head_dim)
    wk = rng.uniform(0.5, 1.5, head_dim)
    pos = rng.integers(0, max_position, tokens).astype(np.int32)
    if storage == "bfloat16":
        enc = lambda a: bf16.from_float32(a.astype(np.float32))  # noqa: E731
    else:
        enc = lambda a: a.astype(_kernel.STORAGES[storage])  # noqa: E731
    return enc(raw), enc(wq), enc(wk), pos


@dataclass
class FusedCheck:
    name: str
    storage: str
    options: str
    max_error: float
    tolerance: float
    v_unchanged: bool

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.max_error) and self.max_error <= self.tolerance and self.v_unchanged)


def check_case(rng, *, tokens, heads, head_dim, rotary_dim, storage, interleave=True, yarn=None,
               fastmath=True, name="", eps=1e-6, base=10000.0, max_position=4096,
               warps_per_block=None, heads_per_warp=None) -> FusedCheck:
    """Run the kernel once on random inputs and compare with the float64 reference."""
    qkv, wq, wk, pos = random_inputs(rng, tokens, heads, head_dim, storage, max_position)
    hq, hk, hv = heads
    kw = dict(num_heads_q=hq, num_heads_k=hk, num_heads_v=hv, head_dim=head_dim, eps=eps,
              base=base, rotary_dim=rotary_dim, interleave=interleave)
    y = scaling.as_fused_yarn(yarn)
    rd = rotary_dim or head_dim
    freqs, att = scaling.resolve(y, rotary_dim=rd, base=base)
    want = reference.fused_qknorm_rope(decode(qkv, storage), q_weight=decode(wq, storage),
                                       k_weight=decode(wk, storage), positions=pos, freqs=freqs,
                                       attention_factor=att, **kw)
    before = qkv.copy()
    got = fused_qknorm_rope(qkv, q_weight=wq, k_weight=wk, positions=pos, yarn=y,
                            fastmath=fastmath, warps_per_block=warps_per_block,
                            heads_per_warp=heads_per_warp, **kw)
    qk = (hq + hk) * head_dim
    v_same = bool(np.array_equal(before[:, qk:].view(np.uint8), got[:, qk:].view(np.uint8)))
    normed = reference.fused_qknorm_rope(decode(before, storage), q_weight=decode(wq, storage),
                                         k_weight=decode(wk, storage), positions=np.zeros_like(pos),
                                         **kw)
    angle = float(np.abs(pos).max()) * float(freqs.max())
    tol = tolerance(float(np.abs(normed[:, :qk]).max()), float(np.abs(want[:, :qk]).max()), angle,
                    storage, fastmath=fastmath, attention_factor=att)
    err = float(np.abs(decode(got, storage)[:, :qk] - want[:, :qk]).max())
    opts = [("gptj" if interleave else "neox"), f"rot={rd}"] + ([f"yarn={y.factor:g}"] if y else [])
    return FusedCheck(name or f"{tokens}x({hq}+{hk}+{hv})x{head_dim}", storage, ",".join(opts), err, tol, v_same)


def check_production(shapes=None, storages=("bfloat16", "float16", "float32"), layouts=(True, False),
                     seed: int = 0, fastmath: bool = True) -> list[FusedCheck]:
    """The fused kernel against the reference at SGLang's production shapes (needs a GPU).

    Under the simulator this would run millions of Python threads; it refuses instead.
    """
    from .shapes import PRODUCTION_SHAPES
    from .target import SIMULATED

    if SIMULATED:
        raise RuntimeError("check_production needs a GPU: the simulator would take hours")
    rng = np.random.default_rng(seed)
    rows = []
    for shape in (shapes or PRODUCTION_SHAPES.values()):
        for storage in storages:
            for inter in layouts:
                rows.append(check_case(rng, tokens=shape.tokens,
                                       heads=(shape.heads_q, shape.heads_k, shape.heads_v),
                                       head_dim=shape.head_dim, rotary_dim=shape.rotary_dim,
                                       storage=storage, interleave=inter, fastmath=fastmath,
                                       name=shape.name))
    return rows


@dataclass
class DeviceCase:
    """Device inputs for timing the kernel alone: ``case.launch()`` runs it with no validation.

    Built by :func:`device_case`; ``qk_bytes`` is what the kernel must move (Q and K read and
    written once), the number a bandwidth figure divides by.  Each launch normalizes and rotates
    ``qkv`` again in place: fine for timing, not for checking results (use :func:`check_case`).
    """

    problem: FusedProblem
    qkv: object  # flat; bfloat16 as uint32 words of two elements (the kernel's view)
    q_weight: object
    k_weight: object
    positions: object
    inv_freq: object
    qk_bytes: int

    def launch(self, *, fastmath: bool = True, warps_per_block=None, stream=0,
               heads_per_warp=None) -> None:
        _kernel.launch(self.problem, self.qkv, self.q_weight, self.k_weight, self.positions,
                       self.inv_freq, fastmath=fastmath, warps_per_block=warps_per_block,
                       stream=stream, heads_per_warp=heads_per_warp)


def device_case(shape, storage: str = "bfloat16", *, interleave: bool = True, yarn=None,
                seed: int = 0, eps: float = 1e-6, base: float = 10000.0) -> DeviceCase:
    """Random inputs of a :class:`ropelab.shapes.FusedShape` on the device, validated once."""
    rng = np.random.default_rng(seed)
    heads = (shape.heads_q, shape.heads_k, shape.heads_v)
    qkv, wq, wk, pos = random_inputs(rng, shape.tokens, heads, shape.head_dim, storage)
    problem = build_problem(inspect_array(qkv, "qkv"), num_heads_q=shape.heads_q,
                            num_heads_k=shape.heads_k, num_heads_v=shape.heads_v,
                            head_dim=shape.head_dim, eps=eps, base=base,
                            rotary_dim=shape.rotary_dim, interleave=interleave, yarn=yarn)
    itemsize = _kernel.STORAGES[storage].itemsize
    flat = cuda.to_device(qkv.reshape(-1))
    if storage == "bfloat16":  # view once here rather than in every timed launch
        flat = flat.view(np.uint32)
    return DeviceCase(problem, flat, cuda.to_device(wq), cuda.to_device(wk),
                      cuda.to_device(pos), cuda.to_device(problem.inv_freq_f32()),
                      2 * shape.tokens * (shape.heads_q + shape.heads_k) * shape.head_dim * itemsize)
