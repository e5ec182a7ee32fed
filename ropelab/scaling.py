"""Context-extension schemes for RoPE: they change the inverse frequencies, and YaRN also scales
cos and sin by an "attention factor".

One frozen dataclass per scheme, validated when it is built (bad parameters raise
:class:`ropelab.RopeInputError` before anything else happens):

* :class:`Linear` -- position interpolation (kaiokendev; Chen et al. 2023).
* :class:`NTK` -- "NTK-aware" base scaling (bloc97).
* :class:`YaRN` -- NTK-by-parts interpolation plus an attention factor (Peng et al. 2023).
* :class:`Llama3` -- Llama 3.1's piecewise rescaling by wavelength.

``ropelab.rope(x, scaling=...)`` takes one of these objects, or a Hugging Face style dict such as
``{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}`` (the older
key ``"type"`` works too).  Unknown scheme names and unknown keys are refused.

All frequencies are computed here in float64 on the host, ``[rotary_dim // 2]`` long, pair ``i``
rotating by ``position * freqs[i]``.  The kernels receive them already scaled (as a table, or as
the parameters of the same formula evaluated in-kernel, see ``ropelab.kernels.pair_sincos``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Module imports, not names: this module is loaded while ``problem`` and ``reference`` may still
# be initialising (``reference`` re-exports the functions below).
from . import problem as _problem
from . import reference as _reference


def _fail(msg: str):
    raise _problem.RopeInputError(msg)


def _number(name: str, value, *, low=None, low_open=True, scheme: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        _fail(f"{scheme}: {name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        _fail(f"{scheme}: {name} must be finite, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        _fail(f"{scheme}: {name} must be {'>' if low_open else '>='} {low:g}, got {value:g}")
    return value


def _positive_int(name: str, value, *, scheme: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        _fail(f"{scheme}: {name} must be a positive int, got {value!r}")
    if value <= 0:
        _fail(f"{scheme}: {name} must be a positive int, got {value}")
    return int(value)


# --------------------------------------------------------------------------------------------
# The formulas, as plain float64 functions (re-exported by ropelab.reference).
# --------------------------------------------------------------------------------------------

def linear_inv_freq(rotary_dim: int, base: float, factor: float) -> np.ndarray:
    """Position interpolation: ``inv_freq / factor``.

    Follows Hugging Face ``_compute_linear_scaling_rope_parameters`` (which divides the
    frequencies rather than the positions; the two are the same product) and vLLM's
    ``LinearScalingRotaryEmbedding``.
    """
    return _reference.inv_freq(rotary_dim, base) / factor


def ntk_base(rotary_dim: int, base: float, factor: float) -> float:
    """The NTK-aware base ``base * factor ** (d / (d - 2))`` with ``d = rotary_dim``.

    The exponent makes the lowest frequency exactly ``1 / factor`` of its old value while the
    highest (pair 0, frequency 1) is unchanged.
    """
    return base * factor ** (rotary_dim / (rotary_dim - 2))


def ntk_inv_freq(rotary_dim: int, base: float, factor: float) -> np.ndarray:
    """NTK-aware scaling: the default frequencies of the larger base :func:`ntk_base`.

    This is bloc97's static formula, the one Hugging Face's ``_compute_dynamic_ntk_parameters``
    applies with a length-dependent factor ``factor * seq_len / max_pos - (factor - 1)`` in
    place of ``factor`` (static NTK = dynamic NTK frozen at that effective factor).  vLLM's
    ``NTKScalingRotaryEmbedding`` ("fixed NTK", kexue.fm/archives/9706) is a different formula
    (base times factor, then every frequency divided by ``factor ** (2 / d)``) and is not this.
    """
    return _reference.inv_freq(rotary_dim, ntk_base(rotary_dim, base, factor))


def yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's ``0.1 * mscale * ln(factor) + 1`` (1 for ``factor <= 1``)."""
    return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_correction_range(rotary_dim: int, base: float, original_max_positions: int,
                          beta_fast: float, beta_slow: float, truncate: bool = True) -> tuple[float, float]:
    """Pair indices ``(low, high)`` between which YaRN ramps from extrapolation to interpolation.

    Pair ``i`` completes ``original_max_positions * freq_i / (2 pi)`` turns over the original
    context; ``low`` is the (fractional) index at which that count falls to ``beta_fast`` turns
    and ``high`` where it falls to ``beta_slow``.  Floored / ceiled when ``truncate`` and clamped
    to ``[0, rotary_dim - 1]``, as Hugging Face and vLLM do.
    """
    def dim_for(turns: float) -> float:
        return (rotary_dim * math.log(original_max_positions / (turns * 2 * math.pi))
                / (2 * math.log(base)))

    low, high = dim_for(beta_fast), dim_for(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, rotary_dim - 1)


def yarn_ramp(rotary_dim: int, low: float, high: float) -> np.ndarray:
    """Interpolation weight per pair: 0 below ``low``, 1 above ``high``, linear between."""
    if low == high:
        high = high + 0.001  # the reference implementations' guard against 0/0
    i = np.arange(rotary_dim // 2, dtype=np.float64)
    return np.clip((i - low) / (high - low), 0.0, 1.0)


def yarn_inv_freq(rotary_dim: int, base: float, factor: float, original_max_positions: int,
                  beta_fast: float = 32.0, beta_slow: float = 1.0, truncate: bool = True) -> np.ndarray:
    """YaRN ("NTK-by-parts") frequencies.

    Follows Hugging Face ``_compute_yarn_parameters`` (and vLLM's ``YaRNScalingRotaryEmbedding``,
    which has the same ramp): with ``w_i = yarn_ramp(...)[i]``,
    ``freq_i = inv_freq_i * (1 - w_i) + (inv_freq_i / factor) * w_i``.  Fast-turning pairs
    (``w = 0``) keep their frequency; slow ones (``w = 1``) are interpolated by ``factor``.
    """
    low, high = yarn_correction_range(rotary_dim, base, original_max_positions, beta_fast,
                                      beta_slow, truncate)
    w = yarn_ramp(rotary_dim, low, high)
    f = _reference.inv_freq(rotary_dim, base)
    return f * (1.0 - w) + (f / factor) * w


def llama3_inv_freq(rotary_dim: int, base: float, factor: float, low_freq_factor: float,
                    high_freq_factor: float, original_max_positions: int) -> np.ndarray:
    """Llama 3.1 frequencies.

    Follows Hugging Face ``_compute_llama3_parameters`` (vLLM's ``Llama3RotaryEmbedding`` is the
    same): with wavelength ``L_i = 2 pi / inv_freq_i`` and ``L0 = original_max_positions``,
    pairs with ``L_i < L0 / high_freq_factor`` keep their frequency, pairs with
    ``L_i > L0 / low_freq_factor`` are divided by ``factor``, and in between
    ``s = (L0 / L_i - low_freq_factor) / (high_freq_factor - low_freq_factor)`` blends
    ``(1 - s) * inv_freq / factor + s * inv_freq``.
    """
    f = _reference.inv_freq(rotary_dim, base)
    wavelen = 2 * math.pi / f
    s = (original_max_positions / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    out = np.where(wavelen > original_max_positions / low_freq_factor, f / factor, f)
    medium = (wavelen >= original_max_positions / high_freq_factor) & \
             (wavelen <= original_max_positions / low_freq_factor)
    return np.where(medium, (1.0 - s) * f / factor + s * f, out)


# --------------------------------------------------------------------------------------------
# Scheme objects
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Linear:
    """Linear position interpolation by ``factor`` (> 0; > 1 stretches the context)."""

    factor: float

    def __post_init__(self):
        object.__setattr__(self, "factor", _number("factor", self.factor, low=0.0, scheme="linear"))

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        return linear_inv_freq(rotary_dim, base, self.factor), 1.0


@dataclass(frozen=True)
class NTK:
    """NTK-aware base scaling by ``factor`` (> 0); see :func:`ntk_inv_freq`."""

    factor: float

    def __post_init__(self):
        object.__setattr__(self, "factor", _number("factor", self.factor, low=0.0, scheme="ntk"))

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        if rotary_dim < 4:
            _fail(f"ntk: rotary_dim must be at least 4 (the exponent is d / (d - 2)), got {rotary_dim}")
        new_base = ntk_base(rotary_dim, base, self.factor)
        if not (math.isfinite(new_base) and new_base > 1.0):
            _fail(f"ntk: factor {self.factor:g} turns base {base:g} into {new_base:g}; it must stay > 1")
        return ntk_inv_freq(rotary_dim, base, self.factor), 1.0


@dataclass(frozen=True)
class YaRN:
    """YaRN: ``factor`` (>= 1), the pre-training context ``original_max_positions``, the ramp
    bounds ``beta_fast > beta_slow > 0`` (in turns over the original context), and the
    attention factor that multiplies cos and sin.

    ``attention_factor=None`` means ``yarn_mscale(factor, mscale) / yarn_mscale(factor,
    mscale_all_dim)`` when both DeepSeek-style ``mscale`` and ``mscale_all_dim`` are given, else
    ``0.1 ln(factor) + 1``, exactly as Hugging Face ``_compute_yarn_parameters`` decides it.
    """

    factor: float
    original_max_positions: int
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True

    def __post_init__(self):
        s = "yarn"
        set_ = object.__setattr__
        set_(self, "factor", _number("factor", self.factor, low=1.0, low_open=False, scheme=s))
        set_(self, "original_max_positions",
             _positive_int("original_max_positions", self.original_max_positions, scheme=s))
        set_(self, "beta_fast", _number("beta_fast", self.beta_fast, low=0.0, scheme=s))
        set_(self, "beta_slow", _number("beta_slow", self.beta_slow, low=0.0, scheme=s))
        if self.beta_fast <= self.beta_slow:
            _fail(f"yarn: beta_fast ({self.beta_fast:g}) must be greater than beta_slow "
                  f"({self.beta_slow:g}): the ramp runs from fast-turning to slow-turning pairs")
        if self.attention_factor is not None:
            set_(self, "attention_factor",
                 _number("attention_factor", self.attention_factor, low=0.0, scheme=s))
        for name in ("mscale", "mscale_all_dim"):
            if getattr(self, name) is not None:
                set_(self, name, _number(name, getattr(self, name), low=0.0, low_open=False, scheme=s))
        if not isinstance(self.truncate, bool):
            _fail(f"yarn: truncate must be True or False, got {self.truncate!r}")

    def resolved_attention_factor(self) -> float:
        if self.attention_factor is not None:
            return self.attention_factor
        if self.mscale and self.mscale_all_dim:
            return yarn_mscale(self.factor, self.mscale) / yarn_mscale(self.factor, self.mscale_all_dim)
        return yarn_mscale(self.factor)

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        freqs = yarn_inv_freq(rotary_dim, base, self.factor, self.original_max_positions,
                              self.beta_fast, self.beta_slow, self.truncate)
        return freqs, self.resolved_attention_factor()


@dataclass(frozen=True)
class Llama3:
    """Llama 3.1 scaling: ``factor`` (>= 1), ``0 < low_freq_factor < high_freq_factor``, and the
    pre-training context ``original_max_positions`` (Llama 3.1: 8, 1, 4, 8192)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_positions: int

    def __post_init__(self):
        s = "llama3"
        set_ = object.__setattr__
        set_(self, "factor", _number("factor", self.factor, low=1.0, low_open=False, scheme=s))
        set_(self, "low_freq_factor", _number("low_freq_factor", self.low_freq_factor, low=0.0, scheme=s))
        set_(self, "high_freq_factor", _number("high_freq_factor", self.high_freq_factor, low=0.0, scheme=s))
        if self.low_freq_factor >= self.high_freq_factor:
            _fail(f"llama3: low_freq_factor ({self.low_freq_factor:g}) must be less than "
                  f"high_freq_factor ({self.high_freq_factor:g})")
        set_(self, "original_max_positions",
             _positive_int("original_max_positions", self.original_max_positions, scheme=s))

    def compute(self, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
        return llama3_inv_freq(rotary_dim, base, self.factor, self.low_freq_factor,
                               self.high_freq_factor, self.original_max_positions), 1.0


SCHEMES = (Linear, NTK, YaRN, Llama3)

# Hugging Face ``rope_scaling`` keys -> (scheme, {hf key: field}); "rope_type"/"type" aside.
_HF = {
    "linear": (Linear, {"factor": "factor"}),
    "ntk": (NTK, {"factor": "factor"}),
    "yarn": (YaRN, {"factor": "factor", "original_max_position_embeddings": "original_max_positions",
                    "beta_fast": "beta_fast", "beta_slow": "beta_slow",
                    "attention_factor": "attention_factor", "mscale": "mscale",
                    "mscale_all_dim": "mscale_all_dim", "truncate": "truncate"}),
    "llama3": (Llama3, {"factor": "factor", "low_freq_factor": "low_freq_factor",
                        "high_freq_factor": "high_freq_factor",
                        "original_max_position_embeddings": "original_max_positions"}),
}
_HINTS = {
    "dynamic": "dynamic NTK depends on the running sequence length; use 'ntk' with the effective "
               "factor (factor * seq_len / max_position_embeddings - (factor - 1))",
    "longrope": "LongRoPE is not implemented in ropelab",
}


def from_dict(config: dict):
    """Build a scheme from a Hugging Face ``rope_scaling`` dict, or None for ``"default"``."""
    cfg = dict(config)
    name = cfg.pop("rope_type", None)
    legacy = cfg.pop("type", None)
    name = name if name is not None else legacy
    if name is None:
        _fail(f"a scaling dict needs 'rope_type' (one of {', '.join(['default', *_HF])}), got {config!r}")
    if not isinstance(name, str):
        _fail(f"rope_type must be a string, got {name!r}")
    if name == "default":
        if cfg:
            _fail(f"rope_type 'default' takes no parameters, got {sorted(cfg)}")
        return None
    if name not in _HF:
        hint = f" ({_HINTS[name]})" if name in _HINTS else ""
        _fail(f"unknown RoPE scaling scheme {name!r}{hint}; known: {', '.join(['default', *_HF])}")
    cls, keys = _HF[name]
    unknown = sorted(set(cfg) - set(keys))
    if unknown:
        _fail(f"{name}: unknown key(s) {unknown}; accepted: {sorted(keys)}")
    # None means "use the default", as in Hugging Face's ``.get(key) or default``.
    kwargs = {keys[k]: v for k, v in cfg.items() if v is not None}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a required key is missing
        missing = [k for k, f in keys.items() if f not in kwargs]
        raise _problem.RopeInputError(f"{name}: missing key(s) among {missing}: {exc}") from None


def parse(scaling):
    """A scheme object (or None for no scaling) from what a user passed as ``scaling``."""
    if scaling is None or isinstance(scaling, SCHEMES):
        return scaling
    if isinstance(scaling, dict):
        return from_dict(scaling)
    if isinstance(scaling, str):
        _fail(f"scaling must be a scheme object or a dict with parameters, got the bare name "
              f"{scaling!r}; e.g. ropelab.scaling.Linear(4.0) or {{'rope_type': 'linear', 'factor': 4.0}}")
    raise TypeError(f"scaling must be one of {', '.join(c.__name__ for c in SCHEMES)}, a Hugging Face "
                    f"rope_scaling dict, or None; got {type(scaling).__name__}")


def resolve(scaling, *, rotary_dim: int, base: float) -> tuple[np.ndarray, float]:
    """``(freqs, attention_factor)`` for ``scaling``: float64 ``[rotary_dim // 2]`` and a float."""
    scheme = parse(scaling)
    if scheme is None:
        return _reference.inv_freq(rotary_dim, base), 1.0
    freqs, attention_factor = scheme.compute(rotary_dim, base)
    freqs = np.asarray(freqs, dtype=np.float64)
    if not (np.all(np.isfinite(freqs)) and np.all(freqs > 0)):
        _fail(f"{scheme!r} gives non-finite or non-positive frequencies for rotary_dim={rotary_dim}, "
              f"base={base:g}")
    return freqs, float(attention_factor)
